#include "kernels/isa.h"

#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "base/log.h"

namespace md::kernels {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kScalar:
      break;
  }
  return "scalar";
}

Isa best_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // The AVX-512 path widens bf16 with 16-bit masked loads (BW); FMA is a separate CPUID bit.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("fma")) {
    return Isa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

bool has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // Subleaf 0 of leaf 7 gives the highest subleaf in EAX; the flag is in subleaf 1.
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0 || eax < 1) return false;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  return (eax & (1u << 5)) != 0;
#else
  return false;
#endif
}

bool has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & (1u << 29)) != 0;
#else
  return false;
#endif
}

Isa resolve_isa(std::string_view requested, Isa best) {
  Isa wanted = best;
  if (requested == "scalar") {
    wanted = Isa::kScalar;
  } else if (requested == "avx2") {
    wanted = Isa::kAvx2;
  } else if (requested == "avx512") {
    wanted = Isa::kAvx512;
  } else if (!requested.empty()) {
    log::warn("MEGADECODE_ISA={} is not one of scalar, avx2, avx512; using {}", requested,
              isa_name(best));
  }
  if (wanted > best) {
    log::warn("MEGADECODE_ISA={} is not supported by this CPU; using {}", requested,
              isa_name(best));
    wanted = best;
  }
  return wanted;
}

Isa active_isa_level() {
  static const Isa active = [] {
    const char* requested = std::getenv("MEGADECODE_ISA");
    return resolve_isa(requested == nullptr ? "" : requested, best_isa());
  }();
  return active;
}

std::vector<Isa> available_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa <= best_isa()) isas.push_back(isa);
  }
  return isas;
}

}  // namespace md::kernels
