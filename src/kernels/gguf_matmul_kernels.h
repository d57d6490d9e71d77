// The per-ISA implementations behind kernels/gguf_matmul.h. gguf_matmul.cpp dispatches to the
// active one; tests and benchmarks reach the others through gguf_matmul_kernels(isa).
#pragma once

#include <cstdint>

#include "kernels/gguf_matmul.h"
#include "kernels/isa.h"

namespace md::kernels {

using GgufTileFn = void (*)(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                            int64_t x_stride, int64_t n_rows, const MatmulOut& out);

struct GgufMatmulKernels {
  // The tile for a format; null for formats the kernels do not handle.
  GgufTileFn (*tile_for)(GgmlType type);
};

// Defined by gguf_matmul_scalar.cpp, gguf_matmul_avx2.cpp and gguf_matmul_avx512.cpp (the last
// two only on x86-64, each compiled for its instruction set alone).
extern const GgufMatmulKernels kGgufMatmulScalar;
extern const GgufMatmulKernels kGgufMatmulAvx2;
extern const GgufMatmulKernels kGgufMatmulAvx512;

// The implementation for `isa`, which the caller has checked the CPU supports.
const GgufMatmulKernels& gguf_matmul_kernels(Isa isa);

}  // namespace md::kernels
