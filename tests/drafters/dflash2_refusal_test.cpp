// What the DFlash2 drafter refuses to load: checkpoints whose tensors do not match the config
// (missing, misshapen, not bf16, unaccounted for), configs the spec refuses (§11.1), drafters
// that do not fit their target, and directories that hold no drafter.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"
#include "dflash2_test_util.h"
#include "models/drafters/dflash2/dflash2_drafter.h"

namespace md {
namespace {

using TestTensor = md::testing::TestTensor;

class DFlash2Refusals : public ::testing::Test {
 protected:
  // The message of loading a drafter written with `config` and `edit`, "" when it loads.
  std::string load_error(const nlohmann::json& config, const test::TensorEdit& edit = {},
                         const TargetView* target = nullptr) {
    std::filesystem::remove_all(dir_.path() / "d");
    test::write_tiny_drafter(dir_.path() / "d", config, 11, edit);
    try {
      DFlash2Drafter drafter(dir_.str("d"), target ? *target : target_.view);
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }

  static void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
    ASSERT_FALSE(message.empty()) << "loaded";
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }

  static test::TensorEdit find_and(
      const std::string& name,
      const std::function<void(std::vector<TestTensor>&, std::vector<TestTensor>::iterator)>& f) {
    return [name, f](std::vector<TestTensor>& tensors) {
      auto it = std::find_if(tensors.begin(), tensors.end(),
                             [&](const TestTensor& t) { return t.name == name; });
      ASSERT_NE(it, tensors.end()) << name;
      f(tensors, it);
    };
  }

  test::TempDir dir_;
  nlohmann::json config_ = test::tiny_dflash2_config();
  test::TinyTarget target_{512, 128, 8};
};

TEST_F(DFlash2Refusals, TheValidDrafterLoadsThroughTheFreeFunction) {
  EXPECT_EQ(load_error(config_), "");
  std::unique_ptr<SpeculativeDrafter> d = load_dflash2_drafter(dir_.str("d"), target_.view);
  EXPECT_EQ(d->block_size(), 8);
  EXPECT_EQ(d->tap_layers().size(), 5u);
}

TEST_F(DFlash2Refusals, MissingTensor) {
  std::string name = "layers.1.mlp_conv.base_kernel";
  expect_contains(load_error(config_, find_and(name, [](auto& all, auto it) { all.erase(it); })),
                  {name, "missing", "DFlash2DraftModel"});
}

TEST_F(DFlash2Refusals, WrongShape) {
  std::string name = "layers.0.attention_conv.kernel_projection.weight";
  auto edit = find_and(name, [](auto&, auto it) { it->shape = {16, 256}; });
  expect_contains(load_error(config_, edit), {name, "model.safetensors", "[16, 256]", "[32, 128]"});
}

TEST_F(DFlash2Refusals, NotBf16) {
  std::string name = "hidden_norm.weight";
  auto edit = find_and(name, [](auto&, auto it) { it->dtype = "F16"; });
  expect_contains(load_error(config_, edit), {name, "F16", "BF16"});
}

TEST_F(DFlash2Refusals, TensorsTheConfigDoesNotAccountFor) {
  // A third layer in the file for a two-layer config, and an own embedding of another variant.
  auto edit = [](std::vector<TestTensor>& tensors) {
    tensors.push_back(
        {"layers.2.input_layernorm.weight", "BF16", {128}, std::vector<uint8_t>(256)});
    tensors.push_back({"embed_tokens.weight", "BF16", {512, 128}, std::vector<uint8_t>(512 * 256)});
  };
  expect_contains(load_error(config_, edit),
                  {"2 tensor(s)", "embed_tokens.weight", "layers.2.input_layernorm.weight"});
}

TEST_F(DFlash2Refusals, ConfigsTheSpecRefuses) {
  nlohmann::json causal = config_;
  causal["is_causal"] = true;
  expect_contains(load_error(causal), {"config.json", "is_causal = true"});
  nlohmann::json scaled = config_;
  scaled["dflash_config"]["output_multiplier"] = 2.0;
  expect_contains(load_error(scaled), {"output_multiplier"});
  nlohmann::json embedding = config_;
  embedding["dflash_config"]["input_embedding_scale"] = 0.5;
  expect_contains(load_error(embedding), {"input_embedding_scale"});
  nlohmann::json last_layer = config_;
  last_layer["dflash_config"]["target_layer_ids"][4] = 7;
  expect_contains(load_error(last_layer), {"target_layer_ids[4] = 7"});
  nlohmann::json mask = config_;
  mask["dflash_config"]["mask_token_id"] = 512;
  expect_contains(load_error(mask), {"mask_token_id"});
}

TEST_F(DFlash2Refusals, DrafterThatDoesNotFitTheTarget) {
  test::TinyTarget narrow(512, 64, 8);
  expect_contains(load_error(config_, {}, &narrow.view), {"hidden_size = 128", "64"});
  test::TinyTarget small_vocab(500, 128, 8);
  expect_contains(load_error(config_, {}, &small_vocab.view), {"vocab_size = 512", "500"});
  test::TinyTarget deeper(512, 128, 12);
  expect_contains(load_error(config_, {}, &deeper.view), {"num_target_layers = 8", "12"});
  // A view whose matrices disagree with its own sizes.
  TargetView broken = target_.view;
  broken.lm_head.rows = 256;
  expect_contains(load_error(config_, {}, &broken), {"lm_head", "[256, 128]"});
}

TEST_F(DFlash2Refusals, DirectoryWithoutADrafter) {
  std::string qwen = std::string(MD_SOURCE_DIR) + "/tests/data/configs/qwen38-tiny";
  try {
    DFlash2Drafter drafter(qwen, target_.view);
    ADD_FAILURE() << "loaded";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("not a DFlash2DraftModel"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace md
