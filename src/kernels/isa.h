// Which vector instruction set the kernels run on. Chosen once per process from CPUID, so one
// binary runs on any x86-64; MEGADECODE_ISA=scalar|avx2|avx512 forces a lower path (tests,
// benchmarks, bisecting a numeric difference, since each path has its own reduction order).
#pragma once

#include <string_view>
#include <vector>

namespace md::kernels {

// Ordered from least to most capable: a forced level above what the CPU has falls back to the
// best the CPU has.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// "scalar", "avx2" or "avx512".
const char* isa_name(Isa isa);

// The best path this CPU (and this build) can run.
Isa best_isa();

// The path the dispatched kernels use: best_isa(), lowered by MEGADECODE_ISA when set. Fixed at
// the first call.
Isa active_isa_level();
inline const char* active_isa() {
  return isa_name(active_isa_level());
}

// Whether the CPU has AVX512-BF16 (vdpbf16ps, vcvtne2ps2bf16): CPUID leaf 7, subleaf 1, EAX
// bit 5. Only the opt-in bf16-input matmul uses it (kernels/matmul.h MatmulInputs), on top of the
// avx512 path, which also establishes that the OS saves the AVX-512 registers.
bool has_avx512_bf16();

// Whether the CPU converts f16 in hardware (F16C, CPUID leaf 1 ECX bit 29): every AVX2 CPU made
// has it, but it is a separate bit; the q8 integer-dot path (gguf_matmul_q8.h) needs it.
bool has_f16c();

// Every path this CPU can run, scalar first (tests compare them all).
std::vector<Isa> available_isas();

// Resolves a MEGADECODE_ISA value against the CPU's best path; exposed for tests.
Isa resolve_isa(std::string_view requested, Isa best);

}  // namespace md::kernels
