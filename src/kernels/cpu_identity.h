// Who made this CPU and which family it is, from CPUID: for the performance choices that depend on
// the microarchitecture rather than on the instruction set (isa.h detects that). Neither choice
// changes a result: the weight walk (weight_streaming.h) and the 4-bit formats' path (fp4_path.h)
// are bitwise alike on every path.
#pragma once

#include <string>
#include <string_view>

namespace md::kernels {

struct CpuIdentity {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", "HygonGenuine", …; empty off x86
  unsigned family =
      0;  // the displayed family: the base, plus the extended one when the base is 0xf
};

// Read once per process.
const CpuIdentity& cpu_identity();

// Whether a CPU of this vendor and family runs 512-bit vector operations as two 256-bit halves:
// AMD's family 0x19 (Zen 4; Zen 3, the same family, has no AVX-512 at all). Zen 5 (0x1a) runs
// them whole on its server and desktop parts; its mobile parts split them but are not told apart
// here.
bool splits_512_bit_ops(std::string_view vendor, unsigned family);

}  // namespace md::kernels
