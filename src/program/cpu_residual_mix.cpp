#include "program/cpu_residual_mix.h"

#include <algorithm>
#include <array>

#include "kernels/residual_mix.h"

namespace md::program {

void run_residual_mix_row(const ResidualMixOperands& op, int64_t row, const Program& program,
                          float* scratch) {
  if (row >= program.rows()) return;
  const int64_t width = op.width;
  float* prefix = program.buffer(op.prefix) + row * width;
  if (op.update != PrefixUpdate::kNone) {
    const float* sub = program.buffer(op.sub) + row * width;
    if (op.update == PrefixUpdate::kReplace) {
      std::copy(sub, sub + width, prefix);
    } else {
      for (int64_t i = 0; i < width; ++i) prefix[i] += sub[i];
    }
  }
  if (op.copy_to != kNoBuffer) {
    std::copy(prefix, prefix + width,
              program.buffer(op.copy_to) + row * op.copy_stride + op.copy_offset);
  }
  float* blocks = program.buffer(op.blocks);
  std::array<const float*, kMaxResidualCandidates> candidates{};
  for (int64_t b = 0; b < op.block_count; ++b) {
    candidates[static_cast<std::size_t>(b)] = blocks + (b * op.block_rows + row) * width;
  }
  candidates[static_cast<std::size_t>(op.block_count)] = prefix;
  kernels::residual_mix(candidates.data(), op.block_count + 1, op.weight, width, op.eps, scratch,
                        program.buffer(op.out) + row * width);
  if (op.push_to >= 0) {
    std::copy(prefix, prefix + width, blocks + (op.push_to * op.block_rows + row) * width);
  }
}

}  // namespace md::program
