// Runs a test with the bf16-weight products in one MatmulInputs mode and restores the previous
// mode when the test ends, also when a failed assertion returns early.
#pragma once

#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"

namespace md::test {

class ScopedMatmulInputs {
 public:
  explicit ScopedMatmulInputs(kernels::MatmulInputs inputs) : previous_(kernels::matmul_inputs()) {
    kernels::set_matmul_inputs(inputs);
  }
  ~ScopedMatmulInputs() { kernels::set_matmul_inputs(previous_); }
  ScopedMatmulInputs(const ScopedMatmulInputs&) = delete;
  ScopedMatmulInputs& operator=(const ScopedMatmulInputs&) = delete;

 private:
  kernels::MatmulInputs previous_;
};

// Whether MatmulInputs::kBf16 can run in this process (CPU and active kernel path).
inline bool bf16_matmul_inputs_supported() {
  return kernels::bf16_inputs_refusal(kernels::active_isa_level(), kernels::has_avx512_bf16())
      .empty();
}

}  // namespace md::test
