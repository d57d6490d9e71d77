// Fixture models and their transformers goldens for the Qwen3.8 tests.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../support/golden_math.h"
#include "../support/param_names.h"
#include "io/safetensors_file.h"
#include "models/qwen38/qwen38_model.h"
#include "models/qwen38/qwen38_state.h"
#include "models/qwen38/qwen38_testing.h"

namespace md::test {

inline const std::vector<std::string>& qwen38_fixture_names() {
  static const std::vector<std::string> names = {
      "tiny-qwen38",          "tiny-qwen38-hd256",  "tiny-qwen38-text", "tiny-qwen35-tied",
      "tiny-qwen35-interval", "tiny-qwen35-layers", "tiny-qwen35-moe",  "tiny-qwen35-gelu-bias"};
  return names;
}

// The fixtures on which the bf16 KV cache's golden bound (qwen38_golden_test.cpp) was measured
// and set. The breadth fixtures added for issue 18 are compared with f32 KV (the bound);
// with a bf16 cache tiny-qwen35-layers (4 of 7 layers attention, head_dim 32) measures 1.06e-2,
// just past that 1e-2, which was not widened to take it in.
inline const std::vector<std::string>& qwen38_bf16_cache_fixture_names() {
  static const std::vector<std::string> names = {"tiny-qwen38", "tiny-qwen38-hd256",
                                                 "tiny-qwen38-text"};
  return names;
}

// The negative controls (qwen38_testing.h) that change a fixture's model: tiling key heads over
// value heads is the identity with one key head or one value head per key head.
inline std::vector<md::testing::Qwen38Ablation> ablations_that_change(const Qwen38Config& c) {
  std::vector<md::testing::Qwen38Ablation> ablations = {
      md::testing::Qwen38Ablation::kSkipConv, md::testing::Qwen38Ablation::kSkipAttentionGate};
  if (c.linear_num_key_heads > 1 && c.linear_head_group() > 1) {
    ablations.push_back(md::testing::Qwen38Ablation::kTiledKeyHeads);
  }
  if (c.attention_bias) ablations.push_back(md::testing::Qwen38Ablation::kSkipAttentionBias);
  if (c.hidden_act != kernels::Activation::kSilu) {
    ablations.push_back(md::testing::Qwen38Ablation::kSiluWhateverHiddenAct);
  }
  if (c.is_moe()) {
    ablations.push_back(md::testing::Qwen38Ablation::kMoeUnnormalisedWeights);
    ablations.push_back(md::testing::Qwen38Ablation::kMoeUngatedSharedExpert);
  }
  return ablations;
}

inline std::string qwen38_fixture_dir(const std::string& name) {
  return std::string(MD_GOLDEN_DIR) + "/qwen38/" + name;
}

struct GoldenPrompt {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [ids.size()][vocab]
  std::vector<int32_t> greedy;
  std::vector<float> greedy_margin;
};

inline std::vector<GoldenPrompt> load_goldens(const std::string& name) {
  SafetensorsFile file(std::string(MD_SOURCE_DIR) + "/tests/goldens/qwen38/" + name +
                       ".safetensors");
  std::vector<GoldenPrompt> prompts;
  for (int i = 0; file.find(fmt::format("p{}.ids", i)) != nullptr; ++i) {
    std::string p = fmt::format("p{}.", i);
    prompts.push_back({tensor_values<int32_t>(file, p + "ids"),
                       tensor_values<float>(file, p + "logits"),
                       tensor_values<int32_t>(file, p + "greedy"),
                       tensor_values<float>(file, p + "greedy_margin")});
  }
  return prompts;
}

// For every position of every golden prompt (one prefill each, in a sequence of `capacity`):
// max |Δlogit| at the position over the prompt's max |logit|, the golden measure position by
// position.
inline std::vector<double> position_errors(Qwen38Model& model,
                                           const std::vector<GoldenPrompt>& goldens,
                                           int64_t capacity) {
  std::vector<double> errors;
  const auto vocab = static_cast<std::size_t>(model.vocab_size());
  for (const GoldenPrompt& golden : goldens) {
    auto state = model.new_sequence(capacity);
    std::vector<float> logits;
    model.forward(*state, golden.ids, LogitRows::kAll, logits);
    EXPECT_EQ(logits.size(), golden.logits.size());
    double scale = 0;
    for (float value : golden.logits) scale = std::max(scale, static_cast<double>(std::abs(value)));
    for (std::size_t at = 0; at + vocab <= logits.size(); at += vocab) {
      double diff = 0;
      for (std::size_t v = at; v < at + vocab; ++v) {
        diff = std::max(diff, std::abs(static_cast<double>(logits[v]) - golden.logits[v]));
      }
      errors.push_back(diff / scale);
    }
  }
  return errors;
}

inline double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2),
                   values.end());
  return values[values.size() / 2];
}

inline std::unique_ptr<Qwen38Model> load_fixture(
    const std::string& name, KvCacheType kv, Qwen38Options options = {}, int threads = 2,
    ExecutorKind executor = ExecutorKind::kMega,
    kernels::MatmulInputs inputs = kernels::MatmulInputs::kF32) {
  ModelRunOptions run;
  run.threads = threads;
  run.kv_cache = kv;
  run.executor = executor;
  run.matmul_inputs = inputs;
  return std::make_unique<Qwen38Model>(qwen38_fixture_dir(name), run, options);
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Bitwise equality of two sequences' states: positions, delta-net states and the KV entries below
// the position (the only ones ever read).
inline bool same_state(const Qwen38Model& model, const SequenceState& a_state,
                       const SequenceState& b_state) {
  const auto& a = dynamic_cast<const Qwen38State&>(a_state);
  const auto& b = dynamic_cast<const Qwen38State&>(b_state);
  if (a.position() != b.position()) return false;
  const Qwen38Config& c = model.config();
  for (int64_t i = 0; i < c.num_linear_attention_layers(); ++i) {
    if (std::memcmp(a.gdn(i).recurrent.data(), b.gdn(i).recurrent.data(),
                    a.gdn(i).recurrent.bytes()) != 0)
      return false;
    if (std::memcmp(a.gdn(i).conv.data(), b.gdn(i).conv.data(), a.gdn(i).conv.bytes()) != 0)
      return false;
  }
  // KV slots below the position are the ones ever read.
  for (int64_t i = 0; i < c.num_full_attention_layers(); ++i) {
    for (int64_t kv = 0; kv < c.num_key_value_heads; ++kv) {
      std::size_t offset = static_cast<std::size_t>(kv * a.capacity() * c.head_dim);
      std::size_t bytes = static_cast<std::size_t>(a.position() * c.head_dim) * sizeof(float);
      if (std::memcmp(a.kv(i).keys_f32().data() + offset, b.kv(i).keys_f32().data() + offset,
                      bytes) != 0)
        return false;
      if (std::memcmp(a.kv(i).values_f32().data() + offset, b.kv(i).values_f32().data() + offset,
                      bytes) != 0)
        return false;
    }
  }
  return true;
}

}  // namespace md::test
