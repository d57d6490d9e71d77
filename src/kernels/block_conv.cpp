#include "kernels/block_conv.h"

#include <algorithm>

#include "base/dtype.h"

namespace md::kernels {

void apply_block_conv(const uint16_t* base_kernel, const float* coefficients, int side,
                      const BlockConvShape& shape, const float* in, int64_t rows, float* out) {
  apply_block_conv_channels(base_kernel, coefficients, side, shape, in, rows, 0, shape.hidden, out);
}

void apply_block_conv_channels(const uint16_t* base_kernel, const float* coefficients, int side,
                               const BlockConvShape& shape, const float* in, int64_t rows,
                               int64_t channel_begin, int64_t channel_end, float* out) {
  const int64_t h = shape.hidden;
  const uint16_t* base = base_kernel + side * shape.taps * h;
  for (int64_t t = 0; t < rows; ++t) {
    float* y = out + t * h;
    for (int64_t c = channel_begin; c < channel_end; ++c) y[c] = 0.0f;
    const float* dynamic =
        coefficients + t * shape.coefficients() + side * shape.taps * shape.groups();
    for (int64_t tap = 0; tap < shape.taps && tap <= t; ++tap) {
      const float* source = in + (t - tap) * h;
      const uint16_t* base_tap = base + tap * h;
      const float* dynamic_tap = dynamic + tap * shape.groups();
      // Group by group, so that the channel's group is not divided out per channel.
      for (int64_t c = channel_begin; c < channel_end;) {
        int64_t group = c / shape.group_size;
        int64_t group_end = std::min(channel_end, (group + 1) * shape.group_size);
        float dynamic_value = dynamic_tap[group];
        for (; c < group_end; ++c) {
          y[c] += (bf16_to_f32(base_tap[c]) + dynamic_value) * source[c];
        }
      }
    }
  }
}

}  // namespace md::kernels
