// A block drafter's context rows of a prompt as programs (draft_context_program.h) against the
// pooled products DraftContext otherwise uses (its reference): every position's feature and every
// key and value the window reaches bitwise equal, over appends longer than one run, a ring that
// wraps, truncations and re-keying, with f32 and bf16 matrix inputs, 1 and 2 workers, on the
// persistent team and op by op.
#include "models/drafters/draft_context_program.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "program/executor.h"

namespace md {
namespace {

constexpr int64_t kHidden = 48, kTaps = 3, kKvHeads = 2, kHeadDim = 16, kWindow = 40;
constexpr int64_t kLayers = 2;

std::vector<uint16_t> random_bf16(int64_t n, std::mt19937_64& rng, double stddev, double mean = 0) {
  std::normal_distribution<double> normal(mean, stddev);
  std::vector<uint16_t> bits(static_cast<std::size_t>(n));
  for (uint16_t& b : bits) b = f32_to_bf16(static_cast<float>(normal(rng)));
  return bits;
}

// A drafter's context tensors, random, and the spec that points into them.
struct Weights {
  explicit Weights(kernels::MatmulInputs inputs) {
    std::mt19937_64 rng(11);
    fc = random_bf16(kHidden * kTaps * kHidden, rng, 0.1);
    hidden_norm = random_bf16(kHidden, rng, 0.1, 1.0);
    for (int64_t l = 0; l < kLayers; ++l) {
      k.push_back(random_bf16(kKvHeads * kHeadDim * kHidden, rng, 0.2));
      v.push_back(random_bf16(kKvHeads * kHeadDim * kHidden, rng, 0.2));
      k_norm.push_back(random_bf16(kHeadDim, rng, 0.1, 1.0));
    }
    fc_matrix = {fc.data(), kHidden, kTaps * kHidden, inputs};
    for (int64_t l = 0; l < kLayers; ++l) {
      const auto i = static_cast<std::size_t>(l);
      k_matrix.push_back({k[i].data(), kKvHeads * kHeadDim, kHidden, inputs});
      v_matrix.push_back({v[i].data(), kKvHeads * kHeadDim, kHidden, inputs});
    }
    spec = {.family = "test drafter",
            .hidden_size = kHidden,
            .num_taps = kTaps,
            .kv_heads = kKvHeads,
            .head_dim = kHeadDim,
            .window = kWindow,
            .eps = 1e-6f,
            .fc = &fc_matrix,
            .hidden_norm = hidden_norm.data(),
            .layers = {}};
    for (std::size_t l = 0; l < static_cast<std::size_t>(kLayers); ++l) {
      spec.layers.push_back({&k_matrix[l], &v_matrix[l], k_norm[l].data()});
    }
  }

  std::vector<uint16_t> fc, hidden_norm;
  std::vector<std::vector<uint16_t>> k, v, k_norm;
  kernels::Bf16Matrix fc_matrix;
  std::vector<kernels::Bf16Matrix> k_matrix, v_matrix;
  DraftContextSpec spec;
};

std::vector<float> random_taps(int64_t rows, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> taps(static_cast<std::size_t>(rows * kTaps * kHidden));
  for (float& x : taps) x = normal(rng);
  return taps;
}

bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<std::size_t>(n) * sizeof(float)) == 0;
}

// Every feature, and every layer's keys and values of the window before length(), bitwise.
void expect_same_store(DraftContext& reference, DraftContext& programmed) {
  ASSERT_EQ(reference.length(), programmed.length());
  const int64_t length = reference.length();
  for (int64_t p = 0; p < length; ++p) {
    ASSERT_TRUE(same_bits(reference.feature(p).data(), programmed.feature(p).data(), kHidden))
        << "feature of position " << p;
  }
  const int64_t first = std::max<int64_t>(0, length - kWindow);
  reference.prepare_keys(first);
  programmed.prepare_keys(first);
  for (int64_t l = 0; l < kLayers; ++l) {
    const kernels::KvRing a = reference.ring(l), b = programmed.ring(l);
    for (int64_t g = 0; g < kKvHeads; ++g) {
      for (int64_t p = first; p < length; ++p) {
        ASSERT_TRUE(same_bits(a.key(g, p), b.key(g, p), kHeadDim))
            << "key of layer " << l << ", head " << g << ", position " << p;
        ASSERT_TRUE(same_bits(a.value(g, p), b.value(g, p), kHeadDim))
            << "value of layer " << l << ", head " << g << ", position " << p;
      }
    }
  }
}

struct Case {
  program::ExecutorKind executor;
  int workers;
  kernels::MatmulInputs inputs;
};

class DraftContextProgramTest : public ::testing::TestWithParam<Case> {};

TEST_P(DraftContextProgramTest, MatchesThePooledProductsBitwise) {
  const Case c = GetParam();
  try {
    kernels::check_matmul_inputs(c.inputs);  // bf16 inputs need AVX512-BF16
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  Weights w(c.inputs);
  const kernels::Rope rope(kHeadDim, 10000.0);
  ThreadPool pool(c.workers);
  program::Executors executors(c.workers);
  DraftContextProgram program(w.spec, rope, c.workers,
                              [&](program::Program& p) { executors.get(c.executor).run(p); });
  DraftContext reference(w.spec, rope, &pool);
  DraftContext programmed(w.spec, rope, &pool, &program);

  std::mt19937_64 rng(5);
  auto append = [&](int64_t rows) {
    const std::vector<float> taps = random_taps(rows, rng);
    reference.append(taps, rows);
    programmed.append(taps, rows);
  };
  // A prompt of more than two runs, keyed over a window that wraps the ring.
  append(150);
  expect_same_store(reference, programmed);
  // A few positions at a time, as rounds commit them, then keyed again.
  for (int64_t rows : {1, 3, 8, 0, 2}) {
    append(rows);
    expect_same_store(reference, programmed);
  }
  // Truncated into the window and beyond it: the lost slots are recomputed from the features.
  reference.truncate(130);
  programmed.truncate(130);
  append(5);
  expect_same_store(reference, programmed);
  reference.truncate(60);
  programmed.truncate(60);
  append(70);
  expect_same_store(reference, programmed);
  // The rows ran as programs: 150 features in 3 runs, then at least one run per later append.
  EXPECT_GE(program.runs(), 3 + 5 + 2);
}

INSTANTIATE_TEST_SUITE_P(
    Executors, DraftContextProgramTest,
    ::testing::Values(Case{program::ExecutorKind::kMega, 2, kernels::MatmulInputs::kF32},
                      Case{program::ExecutorKind::kMega, 1, kernels::MatmulInputs::kF32},
                      Case{program::ExecutorKind::kOps, 2, kernels::MatmulInputs::kF32},
                      Case{program::ExecutorKind::kMega, 2, kernels::MatmulInputs::kBf16}),
    [](const ::testing::TestParamInfo<Case>& param) {
      return std::string(program::executor_name(param.param.executor)) +
             std::to_string(param.param.workers) +
             (param.param.inputs == kernels::MatmulInputs::kBf16 ? "Bf16" : "F32");
    });

TEST(DraftContextProgram, RefusesMoreRowsThanARun) {
  Weights w(kernels::MatmulInputs::kF32);
  const kernels::Rope rope(kHeadDim, 10000.0);
  ThreadPool pool(1);
  program::Executors executors(1);
  DraftContextProgram program(w.spec, rope, 1, [&](program::Program& p) {
    executors.get(program::ExecutorKind::kMega).run(p);
  });
  DraftContext context(w.spec, rope, &pool, &program);
  std::mt19937_64 rng(3);
  const int64_t rows = DraftContextProgram::kMaxRows + 1;
  const std::vector<float> taps = random_taps(rows, rng);
  context.extend(rows);
  EXPECT_THROW(program.features(context, taps.data(), 0, rows), Error);
  EXPECT_EQ(program.runs(), 0);
}

}  // namespace
}  // namespace md
