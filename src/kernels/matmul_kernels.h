// The per-ISA implementations behind kernels/matmul.h. matmul.cpp dispatches to the active one;
// tests and benchmarks reach the others through matmul_kernels(isa) to compare them.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/bf16_matrix.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace md::kernels {

struct MatmulKernels {
  float (*dot)(const uint16_t* w, const float* x, int64_t n);
  void (*tile)(const Bf16Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
               int64_t x_stride, int64_t n_rows, const MatmulOut& out);
};

// Defined by matmul_scalar.cpp, matmul_avx2.cpp and matmul_avx512.cpp (the last two only on
// x86-64, each compiled for its instruction set alone).
extern const MatmulKernels kMatmulScalar;
extern const MatmulKernels kMatmulAvx2;
extern const MatmulKernels kMatmulAvx512;
// The bf16-input path (MatmulInputs::kBf16), matmul_avx512_bf16.cpp, x86-64 only: AVX-512 with
// AVX512-BF16, which the caller has checked (bf16_inputs_refusal).
extern const MatmulKernels kMatmulAvx512Bf16;

// The f32-input implementation for `isa`, which the caller has checked the CPU supports.
const MatmulKernels& matmul_kernels(Isa isa);

// Why MatmulInputs::kBf16 cannot run with the kernels at level `active` on a CPU with or without
// AVX512-BF16, or "" when it can; check_matmul_inputs' test, exposed for tests.
std::string bf16_inputs_refusal(Isa active, bool cpu_has_avx512_bf16);

}  // namespace md::kernels
