// Kimi Delta Attention against fla-core's own naive KDA (tools/gen_kda_goldens.py:
// naive_recurrent_kda and naive_chunk_kda, float32): two heads of 32 channels over 32 tokens
// from a random initial state, outputs and final states. Negative control: one decay per head
// (the per-channel decays' mean, the per-head rule's form) misses the bound by far.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/safetensors_file.h"
#include "kernels/kda_rule.h"

namespace md {
namespace {

struct Golden {
  int64_t tokens = 0, heads = 0, d = 0;
  std::vector<float> q, k, v, g, beta, state0;
  std::vector<float> o_recurrent, state_recurrent, o_chunk, state_chunk;
};

std::vector<float> values(const SafetensorsFile& file, const std::string& name) {
  const TensorView* view = file.find(name);
  if (view == nullptr || view->dtype != DType::kF32) throw std::runtime_error(name);
  std::vector<float> out(view->numel());
  std::memcpy(out.data(), view->data, view->nbytes);
  return out;
}

Golden load() {
  SafetensorsFile file(std::string(MD_SOURCE_DIR) + "/tests/goldens/kimi/kda-fla.safetensors");
  Golden g;
  const TensorView* q = file.find("q");
  if (q == nullptr || q->shape.size() != 3) throw std::runtime_error("q");
  g.tokens = q->shape[0], g.heads = q->shape[1], g.d = q->shape[2];
  g.q = values(file, "q"), g.k = values(file, "k"), g.v = values(file, "v");
  g.g = values(file, "g"), g.beta = values(file, "beta"), g.state0 = values(file, "state0");
  g.o_recurrent = values(file, "recurrent.o"), g.state_recurrent = values(file, "recurrent.state");
  g.o_chunk = values(file, "chunk16.o"), g.state_chunk = values(file, "chunk16.state");
  return g;
}

struct KdaRun {
  std::vector<float> o, state;  // o: [T][H][d]; state: fla's layout [H][key][value]
};

enum class Form { kRecurrent, kChunked, kPerHeadDecay };

// Every head through megadecode's kernel: q scaled by d^(−1/2) as fla scales it, the state
// transposed into S[value][key] and back.
KdaRun run_kernel(const Golden& g, Form form) {
  const int64_t d = g.d, stride = g.heads * d;
  KdaRun out{std::vector<float>(g.o_recurrent.size()), std::vector<float>(g.state0.size())};
  for (int64_t h = 0; h < g.heads; ++h) {
    std::vector<float> q(g.q), beta(g.tokens);
    std::vector<float> decay(g.g);
    for (int64_t t = 0; t < g.tokens; ++t) {
      for (int64_t c = 0; c < d; ++c)
        q[t * stride + h * d + c] *= 1.0f / std::sqrt(static_cast<float>(d));
      beta[t] = g.beta[t * g.heads + h];
      if (form == Form::kPerHeadDecay) {
        float mean = 0;
        for (int64_t c = 0; c < d; ++c) mean += g.g[t * stride + h * d + c] / d;
        for (int64_t c = 0; c < d; ++c) decay[t * stride + h * d + c] = mean;
      }
    }
    std::vector<float> state(static_cast<std::size_t>(d * d));
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) state[j * d + i] = g.state0[(h * d + i) * d + j];
    kernels::KdaRows rows;
    rows.q = q.data() + h * d, rows.k = g.k.data() + h * d, rows.v = g.v.data() + h * d;
    rows.qk_stride = stride, rows.v_stride = stride, rows.beta = beta.data();
    rows.g = decay.data() + h * d, rows.g_stride = stride, rows.rows = g.tokens;
    float* o = out.o.data() + h * d;
    if (form == Form::kChunked) {
      kernels::kda_chunked(state.data(), d, d, rows, o, stride, 16);
    } else {
      kernels::kda_recurrent(state.data(), d, d, rows, o, stride);
    }
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) out.state[(h * d + i) * d + j] = state[j * d + i];
  }
  return out;
}

// max |a − b| / max |b|
double relative(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double{std::fabs(a[i] - b[i])});
    scale = std::max(scale, double{std::fabs(b[i])});
  }
  return diff / scale;
}

// Bound: f32 summation-order noise over 32 tokens of 32-channel dots (observed ~1e-7).
constexpr double kBound = 1e-5;

TEST(KdaGolden, TokenByTokenMatchesFlasNaiveRecurrentKda) {
  const Golden g = load();
  const KdaRun mine = run_kernel(g, Form::kRecurrent);
  const double o = relative(mine.o, g.o_recurrent), s = relative(mine.state, g.state_recurrent);
  std::printf("  recurrent vs fla: outputs %.3g, state %.3g\n", o, s);
  EXPECT_LE(o, kBound);
  EXPECT_LE(s, kBound);
  const KdaRun per_head = run_kernel(g, Form::kPerHeadDecay);
  EXPECT_GT(relative(per_head.o, g.o_recurrent), 100 * kBound);
}

TEST(KdaGolden, ChunkedMatchesFlasNaiveChunkKda) {
  const Golden g = load();
  const KdaRun mine = run_kernel(g, Form::kChunked);
  const double o = relative(mine.o, g.o_chunk), s = relative(mine.state, g.state_chunk);
  std::printf("  chunked (16) vs fla: outputs %.3g, state %.3g\n", o, s);
  EXPECT_LE(o, kBound);
  EXPECT_LE(s, kBound);
}

}  // namespace
}  // namespace md
