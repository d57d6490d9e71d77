// Whether a model can be built with bf16 matmul inputs (kernels/bf16_matrix.h MatmulInputs) in
// this process: tests of that mode skip where the CPU or the active kernel path cannot run it.
#pragma once

#include "kernels/isa.h"
#include "kernels/matmul_kernels.h"

namespace md::test {

inline bool bf16_matmul_inputs_supported() {
  return kernels::bf16_inputs_refusal(kernels::active_isa_level(), kernels::has_avx512_bf16())
      .empty();
}

}  // namespace md::test
