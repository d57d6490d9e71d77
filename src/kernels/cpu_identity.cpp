#include "kernels/cpu_identity.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace md::kernels {

namespace {

CpuIdentity read_cpu_identity() {
  CpuIdentity id;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return id;
  char vendor[12];
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  id.vendor.assign(vendor, sizeof(vendor));
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return id;
  id.family = (eax >> 8) & 0xf;
  if (id.family == 0xf) id.family += (eax >> 20) & 0xff;
#endif
  return id;
}

}  // namespace

const CpuIdentity& cpu_identity() {
  static const CpuIdentity id = read_cpu_identity();
  return id;
}

bool splits_512_bit_ops(std::string_view vendor, unsigned family) {
  return vendor == "AuthenticAMD" && family == 0x19;
}

}  // namespace md::kernels
