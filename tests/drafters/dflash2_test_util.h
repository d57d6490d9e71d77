// Tiny DFlash2 drafters written to a temp directory (random bf16 weights of the tiny-dflash2
// shapes, spec §14), a target view to go with them, and an independent double-precision
// forward written straight from the spec's formulas (§11.3–§11.6) to check the drafter against.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../io/io_test_util.h"
#include "base/dtype.h"
#include "models/common/config_files.h"
#include "models/drafters/speculative_drafter.h"

namespace md::test {

using md::testing::make_safetensors;
using md::testing::TempDir;
using md::testing::TestTensor;
using md::testing::write_bytes;
using md::testing::write_text;

inline nlohmann::json tiny_dflash2_config() {
  return read_json_file(std::string(MD_SOURCE_DIR) +
                        "/tests/data/configs/dflash2-tiny/config.json");
}

// A tensor's values (already bf16-exact) and shape.
struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<double> values;
};
using RefWeights = std::map<std::string, RefTensor>;

inline std::vector<uint16_t> random_bf16_values(int64_t n, std::mt19937_64& rng, double mean,
                                                double stddev) {
  std::normal_distribution<double> normal(mean, stddev);
  std::vector<uint16_t> bits(static_cast<std::size_t>(n));
  for (uint16_t& b : bits) b = f32_to_bf16(static_cast<float>(normal(rng)));
  return bits;
}

inline RefTensor widen(const std::vector<int64_t>& shape, const std::vector<uint16_t>& bits) {
  RefTensor t{shape, {}};
  for (uint16_t b : bits) t.values.push_back(bf16_to_f32(b));
  return t;
}

// The target's embedding and head, random, with the bf16 storage the view points into.
struct TinyTarget {
  TinyTarget(int64_t vocab, int64_t hidden, int64_t layers, uint64_t seed = 7) {
    std::mt19937_64 rng(seed);
    embed = random_bf16_values(vocab * hidden, rng, 0.0, 1.0);
    head = random_bf16_values(vocab * hidden, rng, 0.0, 0.2);
    view.embed_tokens = kernels::WeightMatrix::of(kernels::Bf16Matrix{embed.data(), vocab, hidden});
    view.lm_head = kernels::WeightMatrix::of(kernels::Bf16Matrix{head.data(), vocab, hidden});
    view.hidden_size = hidden;
    view.vocab_size = vocab;
    view.num_layers = layers;
  }
  TinyTarget(const TinyTarget&) = delete;
  TinyTarget& operator=(const TinyTarget&) = delete;

  std::vector<uint16_t> embed, head;
  TargetView view;
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  double mean = 0;
  double stddev = 0;
};

// Every §11.2 tensor with its shape from `config`. Scales: Linear weights ~ 1/sqrt(fan_in) so
// activations keep unit size through the layers and attention is far from uniform; plain norms
// 1 + N(0, 0.1); conv bases N(0, 0.3); codebooks N(0, 0.5) (§14).
inline std::vector<TensorSpec> dflash2_tensor_specs(const nlohmann::json& c) {
  int64_t h = c["hidden_size"], hd = c["head_dim"], inter = c["intermediate_size"];
  int64_t q = int64_t{c["num_attention_heads"]} * hd, kv = int64_t{c["num_key_value_heads"]} * hd;
  const nlohmann::json& d = c["dflash_config"];
  int64_t taps = static_cast<int64_t>(d["target_layer_ids"].size());
  int64_t k = d["conv_kernel_size"], groups = h / int64_t{d["conv_group_size"]};
  int64_t rank = d["selector_rank"], vocab = c["vocab_size"];
  auto linear = [](std::string name, int64_t out, int64_t in) {
    return TensorSpec{std::move(name), {out, in}, 0.0, 1.0 / std::sqrt(static_cast<double>(in))};
  };
  auto norm = [](std::string name, int64_t n) {
    return TensorSpec{std::move(name), {n}, 1.0, 0.1};
  };
  std::vector<TensorSpec> specs = {
      linear("fc.weight", h, taps * h),
      norm("hidden_norm.weight", h),
      norm("norm.weight", h),
      linear("candidate_selector.hidden_projection.weight", rank, h),
      {"candidate_selector.predecessor_codebook", {vocab, rank}, 0.0, 0.5},
      {"candidate_selector.successor_codebook", {vocab, rank}, 0.0, 0.5},
  };
  for (int64_t l = 0; l < int64_t{c["num_hidden_layers"]}; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight"}) {
      specs.push_back(norm(p + n, h));
    }
    specs.push_back(linear(p + "self_attn.q_proj.weight", q, h));
    specs.push_back(linear(p + "self_attn.k_proj.weight", kv, h));
    specs.push_back(linear(p + "self_attn.v_proj.weight", kv, h));
    specs.push_back(linear(p + "self_attn.o_proj.weight", h, q));
    specs.push_back(norm(p + "self_attn.q_norm.weight", hd));
    specs.push_back(norm(p + "self_attn.k_norm.weight", hd));
    specs.push_back(linear(p + "mlp.gate_proj.weight", inter, h));
    specs.push_back(linear(p + "mlp.up_proj.weight", inter, h));
    specs.push_back(linear(p + "mlp.down_proj.weight", h, inter));
    for (const char* conv : {"attention_conv.", "mlp_conv."}) {
      specs.push_back({p + conv + "base_kernel", {2, k, h}, 0.0, 0.3});
      specs.push_back(linear(p + conv + "kernel_projection.weight", 2 * k * groups, h));
    }
  }
  return specs;
}

// Hooks to write a broken checkpoint: edit the tensor list before it is written.
using TensorEdit = std::function<void(std::vector<TestTensor>&)>;

// Writes config.json and model.safetensors into `dir`; returns the weights as written.
inline RefWeights write_tiny_drafter(const std::filesystem::path& dir, const nlohmann::json& config,
                                     uint64_t seed = 11, const TensorEdit& edit = {}) {
  std::mt19937_64 rng(seed);
  RefWeights weights;
  std::vector<TestTensor> tensors;
  for (const TensorSpec& spec : dflash2_tensor_specs(config)) {
    int64_t n = 1;
    for (int64_t s : spec.shape) n *= s;
    std::vector<uint16_t> bits = random_bf16_values(n, rng, spec.mean, spec.stddev);
    weights[spec.name] = widen(spec.shape, bits);
    std::vector<uint8_t> bytes(bits.size() * 2);
    std::memcpy(bytes.data(), bits.data(), bytes.size());
    tensors.push_back({spec.name, "BF16", spec.shape, std::move(bytes)});
  }
  if (edit) edit(tensors);
  write_text(dir / "config.json", config.dump(2));
  write_bytes(dir / "model.safetensors", make_safetensors(tensors));
  return weights;
}

// Random taps for `rows` positions ([rows][taps · hidden]), like post-layer residuals.
inline std::vector<float> random_taps(int64_t rows, int64_t width, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> taps(static_cast<std::size_t>(rows * width));
  for (float& t : taps) t = normal(rng);
  return taps;
}

}  // namespace md::test
