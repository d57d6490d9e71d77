// bench's share-of-peak figure for the many-row matrix tiles (issue 19): the arithmetic rate of
// the model's largest layer matrix multiplied with a prefill chunk of rows, through the kernel a
// prefill uses (kernels::matmul), next to the f32 fma peak measured in the same run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "models/language_model.h"

namespace md::cli {

struct MatrixTileFigure {
  std::string format;  // the weights' format name: "Q4_1", "bf16", …
  int64_t rows = 0, cols = 0;
  int64_t inputs = 0;  // activation rows: one prefill chunk
  double seconds = 0;  // the fastest pass
  double peak = 0;     // f32 fma operations per second, all threads (kernels/arithmetic_peak.h)

  double flops_per_second() const {
    return 2.0 * static_cast<double>(rows * cols * inputs) / seconds;
  }
  double share_of_peak() const { return flops_per_second() / peak; }
};

// Nothing for a model without a step program (whose matrices are not listed).
std::optional<MatrixTileFigure> measure_matrix_tiles(LanguageModel& model, int threads,
                                                     double seconds);

}  // namespace md::cli
