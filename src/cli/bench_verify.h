// bench's verify figure (issue 19): a step of 8 verify rows of one sequence (a speculative
// round's check of a drafted block) against a 1-row decode step, same executor, interleaved in
// the same run. A step's weights are read once for all its rows, so the ratio shows what the
// extra rows cost in arithmetic.
#pragma once

#include <cstdint>
#include <optional>

#include "models/language_model.h"

namespace md::cli {

struct VerifyFigure {
  int64_t rows = 0;
  double verify_seconds = 0;  // median step
  double decode_seconds = 0;  // median 1-row step

  double ratio() const { return verify_seconds / decode_seconds; }
};

// Nothing for a family without verify rows.
std::optional<VerifyFigure> measure_verify(LanguageModel& model, int64_t rows, int64_t context,
                                           double seconds);

}  // namespace md::cli
