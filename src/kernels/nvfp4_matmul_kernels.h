// The per-ISA bodies behind nvfp4_matmul_tile (nvfp4_matmul.h), exposed so that tests can compare
// every path this CPU runs.
#pragma once

#include <cstdint>

#include "kernels/isa.h"
#include "kernels/lane_sum8.h"
#include "kernels/nvfp4_matmul.h"

namespace md::kernels {

using Nvfp4TileFn = void (*)(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                             const float* x, int64_t x_stride, int64_t n_rows,
                             const MatmulOut& out);

void nvfp4_matmul_tile_scalar(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out);
void nvfp4_matmul_tile_avx2(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                            const float* x, int64_t x_stride, int64_t n_rows, const MatmulOut& out);

void nvfp4_matmul_tile_avx512(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out);

// The body a path runs.
Nvfp4TileFn nvfp4_tile_for(Isa isa);

// The path NVFP4 products take on a CPU whose best (or forced) path is `level`: that path, except
// the AVX2 body where the CPU runs 512-bit operations as two halves (cpu_identity.h). The
// AVX-512 body decodes two rows' blocks per register through a 16-entry permute; on AMD Zen 4 that
// streams 18-21 % slower than the AVX2 body, at every thread and row count (nvfp4_matmul_bench;
// on an AVX-512 Xeon it is the faster one). Every path gives the same bits, so this is speed only.
Isa nvfp4_path_for(Isa level, bool wide_ops_split);

// nvfp4_path_for this process's active ISA level and CPU; fixed at the first call.
Isa active_nvfp4_path();

}  // namespace md::kernels
