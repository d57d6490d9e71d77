// The row_attention instruction (Muse Spark's attention, spec §10–§11) on hand-made keys, one
// instruction run per decoded position: a sliding layer's query sees exactly the last `window`
// positions (itself included) through its ring, a full layer's every position; keys are stored
// normalised and, on NoPE layers, unrotated, values raw, and RoPE at position 0 leaves a key as it
// is (RoPE's own properties: tests/kernels/rope_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "base/error.h"
#include "kernels/kv_rows.h"
#include "kernels/rope.h"
#include "program/executor.h"
#include "program/program.h"

namespace md::program {
namespace {

constexpr int64_t kHeadDim = 8;
constexpr float kEps = 1e-6f;

// One sequence's keys and values of one layer (one KV head).
struct OneLayer : StepState {
  explicit OneLayer(int64_t slots) : rows(slots, kHeadDim, kernels::KvCacheType::kF32) {}
  kernels::KvCache& kv_cache(int64_t slot) override { fail("no KV cache (slot {})", slot); }
  kernels::KvRows& kv_rows(int64_t) override { return rows; }
  kernels::KvRows rows;
};

// x / rms(x) in double.
std::vector<double> normalised(const std::vector<float>& x) {
  double sum = 0;
  for (float v : x) sum += static_cast<double>(v) * v;
  const double inv = 1.0 / std::sqrt(sum / static_cast<double>(x.size()) + kEps);
  std::vector<double> y;
  for (float v : x) y.push_back(v * inv);
  return y;
}

// One head decoded position by position into `layer`: what the instruction wrote for each
// position, and the random inputs it was given.
struct Decoded {
  std::vector<std::vector<float>> q, k, v, gate, out;
};

Decoded decode(int64_t window, int64_t positions, OneLayer& layer, const kernels::Rope* rope) {
  std::vector<float> q(kHeadDim), k(kHeadDim), v(kHeadDim), gate(kHeadDim), out(kHeadDim),
      angles(kHeadDim);
  std::vector<Instruction> list;
  Instruction angles_ins;
  angles_ins.name = "angles";
  angles_ins.tasks = 1;
  angles_ins.operands = RopeOperands{rope, 5};
  if (rope != nullptr) list.push_back(angles_ins);
  Instruction ins;
  ins.name = "attention";
  ins.tasks = 1;
  ins.operands = RowAttentionOperands{.q = 0,
                                      .k = 1,
                                      .v = 2,
                                      .gate = 3,
                                      .out = 4,
                                      .q_stride = kHeadDim,
                                      .kv_stride = kHeadDim,
                                      .heads = 1,
                                      .kv_heads = 1,
                                      .head_dim = kHeadDim,
                                      .window = window,
                                      .norm_eps = kEps,
                                      .q_scale = 1.5f,
                                      .angles = rope != nullptr ? 5 : kNoBuffer,
                                      .rope = rope,
                                      .layer = 0};
  if (rope != nullptr) ins.waits = {{0, 0, 1}};
  list.push_back(ins);
  Program program(std::move(list),
                  {q.data(), k.data(), v.data(), gate.data(), out.data(), angles.data()}, 1, 0, 1);
  auto executor = make_executor(ExecutorKind::kMega, 1);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  Decoded run;
  for (int64_t p = 0; p < positions; ++p) {
    for (auto* x : {&q, &k, &v, &gate}) {
      for (float& e : *x) e = normal(rng);
    }
    run.q.push_back(q), run.k.push_back(k), run.v.push_back(v), run.gate.push_back(gate);
    layer.rows.reserve(p);
    const StepRow row{0, p, &layer};
    program.set_rows({&row, 1});
    executor->run(program);
    run.out.push_back(out);
  }
  return run;
}

// The NoPE attention of position p over positions [first, p] in double: weightless norms, q scaled
// by 1.5, softmax at 1/√d, the output normalised and gated.
std::vector<double> expected(const Decoded& run, int64_t p, int64_t first) {
  std::vector<double> q = normalised(run.q[static_cast<std::size_t>(p)]);
  for (double& e : q) e *= 1.5f;
  std::vector<double> scores;
  double max = -1e300;
  for (int64_t j = first; j <= p; ++j) {
    const std::vector<double> k = normalised(run.k[static_cast<std::size_t>(j)]);
    double s = 0;
    for (int64_t d = 0; d < kHeadDim; ++d) s += q[d] * k[d];
    scores.push_back(s / std::sqrt(static_cast<double>(kHeadDim)));
    max = std::max(max, scores.back());
  }
  double total = 0;
  for (double& s : scores) total += (s = std::exp(s - max));
  std::vector<float> o(kHeadDim, 0.0f);
  std::vector<double> acc(kHeadDim, 0.0);
  for (int64_t j = first; j <= p; ++j) {
    for (int64_t d = 0; d < kHeadDim; ++d) {
      acc[d] += scores[static_cast<std::size_t>(j - first)] / total *
                run.v[static_cast<std::size_t>(j)][static_cast<std::size_t>(d)];
    }
  }
  for (int64_t d = 0; d < kHeadDim; ++d) o[d] = static_cast<float>(acc[d]);
  std::vector<double> y = normalised(o);
  for (int64_t d = 0; d < kHeadDim; ++d) {
    y[d] *= 1.0 / (1.0 + std::exp(-run.gate[static_cast<std::size_t>(p)][d]));
  }
  return y;
}

double max_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t d = 0; d < got.size(); ++d) worst = std::max(worst, std::abs(got[d] - want[d]));
  return worst;
}

// §11's positions with window 16 and a context of 64: position p sees (p − 16, p] on a sliding
// layer (position 15 sees 0, 16 does not), every position on a full layer; the window one key
// longer (or shorter) is far off wherever it differs.
TEST(RowAttention, SlidingAndFullLayersSeeTheirPositions) {
  const int64_t window = 16;
  OneLayer ring(window + 8), every(64);
  const Decoded sliding = decode(window, 64, ring, nullptr);
  const Decoded full = decode(0, 64, every, nullptr);
  for (const int64_t p : {0, 5, 14, 15, 16, 17, 40, 63}) {
    const int64_t first = std::max<int64_t>(0, p - window + 1);
    const auto at = static_cast<std::size_t>(p);
    EXPECT_LT(max_error(sliding.out[at], expected(sliding, p, first)), 1e-5) << p;
    EXPECT_LT(max_error(full.out[at], expected(full, p, 0)), 1e-5) << p;
    if (p >= window) {
      EXPECT_GT(max_error(sliding.out[at], expected(sliding, p, first - 1)), 1e-3) << p;
      EXPECT_GT(max_error(sliding.out[at], expected(sliding, p, first + 1)), 1e-3) << p;
    }
  }
}

// Keys are stored normalised and, without RoPE, unrotated; values as given. With RoPE, position
// 0's key is stored as the NoPE one (the rotation by angle 0 is the identity) and later ones not.
TEST(RowAttention, StoresNormalisedKeysAndRawValues) {
  const kernels::Rope rope(kHeadDim, 10000.0);
  OneLayer nope_layer(6), rope_layer(6);
  const Decoded nope = decode(0, 6, nope_layer, nullptr);
  const Decoded roped = decode(0, 6, rope_layer, &rope);
  std::vector<float> scratch(kHeadDim);
  for (int64_t p = 0; p < 6; ++p) {
    const auto at = static_cast<std::size_t>(p);
    const float* key = nope_layer.rows.key(p, 0, kHeadDim, scratch.data());
    const std::vector<double> want = normalised(nope.k[at]);
    EXPECT_LT(max_error(std::vector<float>(key, key + kHeadDim), want), 1e-6) << p;
    const float* value = nope_layer.rows.value(p, 0, kHeadDim, scratch.data());
    EXPECT_EQ(std::vector<float>(value, value + kHeadDim), nope.v[at]) << p;
    const float* rotated = rope_layer.rows.key(p, 0, kHeadDim, scratch.data());
    const double off =
        max_error(std::vector<float>(rotated, rotated + kHeadDim), normalised(roped.k[at]));
    if (p == 0) {
      EXPECT_LT(off, 1e-6);
    } else {
      EXPECT_GT(off, 1e-3) << p;
    }
  }
}

}  // namespace
}  // namespace md::program
