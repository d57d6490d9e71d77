// The path the 4-bit block formats' products (NVFP4, MXFP4) take: they may run a lower one than
// the rest of the kernels, on CPUs where their AVX-512 body is the slower one. Every path gives
// the same bits, so this is speed only.
#pragma once

#include "kernels/isa.h"

namespace md::kernels {

// The path on a CPU whose best (or forced) path is `level`: that path, except the AVX2 body where
// the CPU runs 512-bit operations as two halves (cpu_identity.h). The AVX-512 bodies decode two
// rows' blocks per register through a 16-entry permute; on AMD Zen 4 they stream slower than the
// AVX2 bodies at every thread and row count (nvfp4_matmul_bench: NVFP4 18-21 %, MXFP4 likewise;
// on an AVX-512 Xeon NVFP4's is the faster one).
Isa fp4_path_for(Isa level, bool wide_ops_split);

// fp4_path_for this process's active ISA level and CPU; fixed at the first call.
Isa active_fp4_path();

}  // namespace md::kernels
