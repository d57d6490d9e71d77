#include "kernels/int8_rows.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "base/dtype.h"

namespace md::kernels {

namespace {

// False (codes left unwritten) for a row holding a NaN or an infinity.
bool quantize_row(const std::uint16_t* w, int64_t cols, std::int8_t* q, float& scale) {
  float amax = 0.0f;
  for (int64_t c = 0; c < cols; ++c) {
    const float v = bf16_to_f32(w[c]);
    if (!std::isfinite(v)) return false;
    amax = std::max(amax, std::fabs(v));
  }
  constexpr float kInverseOf127 = 1.0f / 127.0f;
  scale = amax == 0.0f ? 1.0f : amax * kInverseOf127;
  const float inverse = 1.0f / scale;
  for (int64_t c = 0; c < cols; ++c) {
    // nearbyint rounds half to even in the default rounding mode.
    const float code = std::clamp(std::nearbyint(bf16_to_f32(w[c]) * inverse), -127.0f, 127.0f);
    q[c] = static_cast<std::int8_t>(code);
  }
  return true;
}

}  // namespace

bool quantize_int8_rows(const std::uint16_t* bf16, int64_t rows, int64_t cols, std::int8_t* q,
                        float* scales, ThreadPool* pool) {
  std::atomic<bool> finite{true};
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if (!quantize_row(bf16 + r * cols, cols, q + r * cols, scales[r])) finite = false;
    }
  };
  if (pool == nullptr) {
    body(0, rows);
  } else {
    pool->parallel_for(rows, body);
  }
  return finite;
}

void dequantize_int8_row(const Int8RowsMatrix& m, int64_t r, float* out) {
  const std::int8_t* q = m.row(r);
  for (int64_t c = 0; c < m.cols; ++c) out[c] = m.scales[r] * static_cast<float>(q[c]);
}

}  // namespace md::kernels
