#include "models/model_family.h"

#include <gtest/gtest.h>

#include "config_test_util.h"
#include "models/model_config.h"

namespace md {
namespace {

using test::error_of;

ModelFamily detect(const nlohmann::json& config) {
  return detect_model_family(config, "config.json");
}

TEST(ModelFamily, DetectsEveryFixture) {
  struct Case {
    const char* fixture;
    ModelFamily family;
  };
  for (const Case& c :
       {Case{"qwen38-27b", ModelFamily::kQwen38}, Case{"qwen38-tiny", ModelFamily::kQwen38},
        Case{"kimi-k3", ModelFamily::kKimiK3}, Case{"kimi-k3-tiny", ModelFamily::kKimiK3},
        Case{"musespark", ModelFamily::kMuseSpark}, Case{"musespark-tiny", ModelFamily::kMuseSpark},
        Case{"smollm2-135m", ModelFamily::kLlama}, Case{"qwen38-dflash2", ModelFamily::kDFlash2},
        Case{"dflash2-tiny", ModelFamily::kDFlash2}, Case{"kimi-k3-dspark", ModelFamily::kDSpark},
        Case{"dspark-tiny", ModelFamily::kDSpark}}) {
    SCOPED_TRACE(c.fixture);
    EXPECT_EQ(detect(test::config_fixture(c.fixture)), c.family);
    // The full loader agrees and accepts the fixture.
    ModelConfig config = load_model_config(test::config_fixture_dir(c.fixture));
    EXPECT_EQ(family_of(config), c.family);
  }
}

TEST(ModelFamily, BareTextConfigsAndArchitecturesOnly) {
  nlohmann::json qwen = test::config_fixture("qwen38-27b")["text_config"];
  EXPECT_EQ(detect(qwen), ModelFamily::kQwen38);  // model_type qwen3_5_text
  nlohmann::json kimi = test::config_fixture("kimi-k3")["text_config"];
  EXPECT_EQ(detect(kimi), ModelFamily::kKimiK3);  // model_type kimi_linear
  EXPECT_EQ(detect({{"architectures", {"MuseSpark1xOmniForCausalLM"}}}), ModelFamily::kMuseSpark);
  EXPECT_EQ(detect({{"architectures", {"LlamaForCausalLM"}}}), ModelFamily::kLlama);
  EXPECT_EQ(detect({{"model_type", "musespark1x_omni"}}), ModelFamily::kMuseSpark);
}

TEST(ModelFamily, UnknownModelTypeListsTheSupportedOnes) {
  std::string message = error_of([] { detect({{"model_type", "gpt2"}}); });
  EXPECT_TRUE(
      message.starts_with("config.json: model_type = \"gpt2\": unsupported model type "
                          "(supported: qwen3_5, qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text, "
                          "kimi_k3, kimi_linear, "
                          "muse_spark, musespark1x_omni, llama;"))
      << message;
  EXPECT_NE(message.find("DFlash2DraftModel"), std::string::npos) << message;
}

TEST(ModelFamily, RefusesMissingOrMistypedModelType) {
  EXPECT_TRUE(error_of([] {
                detect(nlohmann::json::object());
              }).starts_with("config.json: model_type: missing (cannot tell the model family"));
  EXPECT_EQ(error_of([] {
              detect({{"model_type", 7}});
            }),
            "config.json: model_type = 7: wrong type: expected string, got integer");
  EXPECT_TRUE(error_of([] {
                detect({{"architectures", {"GPT2LMHeadModel"}}});
              })
                  .starts_with("config.json: architectures = [\"GPT2LMHeadModel\"]: no supported "
                               "architecture"));
}

TEST(ModelFamily, RefusesOtherDrafterLayoutsByName) {
  std::string message = error_of([] {
    detect({{"architectures", {"DSparkDraftModel"}}, {"model_type", "qwen3"}});
  });
  EXPECT_TRUE(
      message.starts_with("config.json: architectures[0] = \"DSparkDraftModel\": "
                          "unsupported drafter layout"))
      << message;
  EXPECT_NE(error_of([] {
              detect({{"architectures", {"DFlashDraftModel"}}});
            }).find("\"DFlashDraftModel\": unsupported drafter layout"),
            std::string::npos);
  EXPECT_EQ(error_of([] {
              detect({{"speculators_model_type", "eagle3"}});
            }),
            "config.json: speculators_model_type = \"eagle3\": unsupported speculators drafter "
            "(supported: dspark)");
}

TEST(ModelFamily, NamesAndDrafters) {
  EXPECT_EQ(family_name(ModelFamily::kQwen38), "qwen38");
  EXPECT_EQ(family_name(ModelFamily::kKimiK3), "kimi_k3");
  EXPECT_EQ(family_name(ModelFamily::kMuseSpark), "musespark");
  EXPECT_TRUE(is_drafter(ModelFamily::kDSpark));
  EXPECT_FALSE(is_drafter(ModelFamily::kLlama));
}

}  // namespace
}  // namespace md
