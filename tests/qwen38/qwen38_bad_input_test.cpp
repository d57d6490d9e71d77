// Damaged checkpoints and configs the family cannot run: each is a precise md::Error from the
// loader (naming the file, tensor or field), never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/checkpoint_edits.h"
#include "base/error.h"
#include "models/model_loader.h"
#include "qwen38_test_util.h"

namespace md::test {
namespace {

namespace fs = std::filesystem;

class Qwen38BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("md_qwen38_bad_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path copy_fixture(const std::string& name) {
    fs::path target = root_ / name;
    fs::copy(qwen38_fixture_dir(name), target, fs::copy_options::recursive);
    return target;
  }

  // The message of the md::Error that loading throws ("" when it loads).
  static std::string load_error(const fs::path& dir) {
    try {
      load_language_model(dir.string(), ModelRunOptions{1, KvCacheType::kF32});
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }

  fs::path root_;
};

void edit_config(const fs::path& dir, const std::function<void(nlohmann::ordered_json&)>& edit) {
  std::ifstream in(dir / "config.json");
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(in);
  edit(config);
  std::ofstream(dir / "config.json") << config.dump(2);
}

const std::string kPrefix = "model.language_model.";

// Declares the config a qwen3_5_moe one: `experts` experts of which each token takes `top_k`.
void make_moe(nlohmann::ordered_json& c, int experts, int top_k) {
  c["model_type"] = "qwen3_5_moe";
  c["text_config"]["model_type"] = "qwen3_5_moe_text";
  c["text_config"]["num_experts"] = experts;
  c["text_config"]["num_experts_per_tok"] = top_k;
  c["text_config"]["moe_intermediate_size"] = 32;
  c["text_config"]["shared_expert_intermediate_size"] = 32;
}

TEST_F(Qwen38BadInput, IntactFixtureLoads) {
  EXPECT_EQ(load_error(copy_fixture("tiny-qwen38")), "");
}

TEST_F(Qwen38BadInput, TruncatedShard) {
  fs::path dir = copy_fixture("tiny-qwen38");
  fs::resize_file(dir / "model.safetensors", fs::file_size(dir / "model.safetensors") - 1000);
  expect_contains(load_error(dir), {"model.safetensors"});
}

TEST_F(Qwen38BadInput, EmptyShard) {
  fs::path dir = copy_fixture("tiny-qwen38");
  fs::resize_file(dir / "model.safetensors", 0);
  expect_contains(load_error(dir), {"model.safetensors"});
}

TEST_F(Qwen38BadInput, MissingShardOfAnIndexedCheckpoint) {
  fs::path dir = copy_fixture("tiny-qwen38-hd256");
  fs::remove(dir / "model-00002-of-00002.safetensors");
  expect_contains(load_error(dir), {"model-00002-of-00002.safetensors"});
}

TEST_F(Qwen38BadInput, MissingTensor) {
  fs::path dir = copy_fixture("tiny-qwen38");
  std::string name = kPrefix + "layers.2.linear_attn.conv1d.weight";
  edit_header(dir / "model.safetensors", [&](nlohmann::ordered_json& header) {
    header[kPrefix + "layers.2.linear_attn.conv.weight"] = header[name];
    header.erase(name);
  });
  expect_contains(load_error(dir), {name, "missing"});
}

TEST_F(Qwen38BadInput, WrongShape) {
  fs::path dir = copy_fixture("tiny-qwen38");
  std::string name = kPrefix + "layers.3.self_attn.q_norm.weight";
  edit_header(dir / "model.safetensors", [&](nlohmann::ordered_json& header) {
    header[name]["shape"] = {32, 2};
  });
  expect_contains(load_error(dir), {name, "[32, 2]", "[64]"});
}

TEST_F(Qwen38BadInput, WrongDtype) {
  fs::path dir = copy_fixture("tiny-qwen38");
  std::string name = kPrefix + "layers.0.mlp.up_proj.weight";
  edit_header(dir / "model.safetensors",
              [&](nlohmann::ordered_json& header) { header[name]["dtype"] = "F16"; });
  expect_contains(load_error(dir), {name, "F16", "BF16"});
}

TEST_F(Qwen38BadInput, IntegerDecayParameters) {
  fs::path dir = copy_fixture("tiny-qwen38");
  std::string name = kPrefix + "layers.1.linear_attn.A_log";
  edit_header(dir / "model.safetensors",
              [&](nlohmann::ordered_json& header) { header[name]["dtype"] = "I32"; });
  expect_contains(load_error(dir), {name, "I32"});
}

TEST_F(Qwen38BadInput, ConfigsTheFamilyCannotRun) {
  struct Case {
    const char* field;
    std::function<void(nlohmann::ordered_json&)> edit;
  };
  std::vector<Case> cases = {
      {"hidden_act", [](auto& c) { c["text_config"]["hidden_act"] = "xielu"; }},
      {"num_experts_per_tok", [](auto& c) { make_moe(c, 4, 5); }},
      {"layer_types", [](auto& c) { c["text_config"]["layer_types"][3] = "mamba"; }},
      {"quantization_config",
       [](auto& c) {
         c["quantization_config"] = {{"quant_method", "fp8"}};
       }},
      {"num_key_value_heads", [](auto& c) { c["text_config"]["num_key_value_heads"] = 3; }},
  };
  for (const Case& test_case : cases) {
    fs::path dir = copy_fixture("tiny-qwen38");
    edit_config(dir, test_case.edit);
    expect_contains(load_error(dir), {test_case.field});
    fs::remove_all(dir);
  }
}

// Configs the family runs, but not with these tensors: the error names the tensor that does not
// fit, never a crash or a silently different model.
TEST_F(Qwen38BadInput, ConfigsThatDisagreeWithTheCheckpoint) {
  struct Case {
    std::vector<std::string> expected;
    std::function<void(nlohmann::ordered_json&)> edit;
  };
  const std::string layer3 = kPrefix + "layers.3.";
  std::vector<Case> cases = {
      {{"shape"}, [](auto& c) { c["text_config"]["hidden_size"] = 96; }},
      {{kPrefix + "layers.0.linear_attn.conv1d.weight", "shape"},
       [](auto& c) { c["text_config"]["linear_conv_kernel_dim"] = 3; }},
      // Layer 3 becomes a Gated DeltaNet layer: the checkpoint has attention tensors there.
      {{layer3 + "linear_attn."},
       [](auto& c) { c["text_config"]["layer_types"][3] = "linear_attention"; }},
      // attention_bias, but the checkpoint has no biases.
      {{layer3 + "self_attn.q_proj.bias", "missing"},
       [](auto& c) { c["text_config"]["attention_bias"] = true; }},
  };
  for (const Case& test_case : cases) {
    fs::path dir = copy_fixture("tiny-qwen38");
    edit_config(dir, test_case.edit);
    expect_contains(load_error(dir), test_case.expected);
    fs::remove_all(dir);
  }
  // Qwen3.5-MoE: a dense checkpoint called MoE lacks the router; the MoE checkpoint with other
  // expert widths has expert stacks of another shape.
  fs::path dense = copy_fixture("tiny-qwen38");
  edit_config(dense, [](auto& c) { make_moe(c, 4, 2); });
  expect_contains(load_error(dense), {kPrefix + "layers.0.mlp.gate.weight", "missing"});
  fs::path moe = copy_fixture("tiny-qwen35-moe");
  edit_config(moe, [](auto& c) { c["text_config"]["moe_intermediate_size"] = 16; });
  expect_contains(load_error(moe), {kPrefix + "layers.0.mlp.experts.gate_up_proj", "shape"});
}

// An untied config whose checkpoint lacks lm_head.weight is refused by name; tied, the same
// checkpoint loads (lm_head is the embedding table).
TEST_F(Qwen38BadInput, MissingLmHeadUnlessTied) {
  fs::path dir = copy_fixture("tiny-qwen38");
  edit_header(dir / "model.safetensors",
              [&](nlohmann::ordered_json& header) { header.erase("lm_head.weight"); });
  expect_contains(load_error(dir), {"lm_head.weight"});
  edit_config(dir, [](auto& c) {
    c["tie_word_embeddings"] = true;
    c["text_config"]["tie_word_embeddings"] = true;
  });
  EXPECT_EQ(load_error(dir), "");
}

TEST_F(Qwen38BadInput, DrafterIsNotAStandaloneModel) {
  fs::path dir = root_ / "draft";
  fs::copy(std::string(MD_SOURCE_DIR) + "/tests/data/configs/dflash2-tiny", dir,
           fs::copy_options::recursive);
  expect_contains(load_error(dir), {"drafter"});
}

}  // namespace
}  // namespace md::test
