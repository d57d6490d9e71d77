// qwen35 GGUF metadata as a Qwen38Config (qwen38_gguf_config.h): llama.cpp's keys mapped back to
// transformers' fields, the layer pattern from an interval or from attention.recurrent_layers,
// MTP layers left out, tying and value-head order from the file, and precise refusals.
#include "models/qwen38/qwen38_gguf_config.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "../io/gguf_test_util.h"
#include "base/error.h"
#include "models/qwen38/qwen38_gguf_model.h"

namespace md {
namespace {

namespace fs = std::filesystem;
using testing::GgufBuilder;

constexpr std::uint32_t kF32Type = 6, kBoolType = 7, kArrayType = 9, kGgmlF32 = 0;

void put_f32(GgufBuilder& b, const std::string& key, float value) {
  std::vector<std::uint8_t> bytes(4);
  std::memcpy(bytes.data(), &value, 4);
  b.raw(key, kF32Type, bytes);
}

void put_bools(GgufBuilder& b, const std::string& key, const std::vector<bool>& values) {
  std::vector<std::uint8_t> bytes;
  testing::put_u32(bytes, kBoolType);
  testing::put_u64(bytes, values.size());
  for (bool v : values) bytes.push_back(v ? 1 : 0);
  b.raw(key, kArrayType, bytes);
}

// A 6-block qwen35 file's metadata (hidden 64, 4 / 2 attention heads of 32, rotary 8, key heads
// 2 of 16, value heads 4 of 8, conv 4) and a [64 x 100] token_embd; `edit` adds or overrides.
class Qwen35GgufConfig : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("md_qwen35_gguf_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }

  // `edit` may change the integer keys (a map from name without the architecture prefix) and
  // add other entries to the builder.
  using Keys = std::map<std::string, std::uint32_t>;
  std::string write(const std::function<void(Keys&, GgufBuilder&)>& edit,
                    const std::string& architecture = "qwen35", bool with_output = false) {
    GgufBuilder b;
    b.string("general.architecture", architecture);
    const std::string a = architecture + ".";
    Keys keys = {{"block_count", 6},           {"context_length", 4096},
                 {"embedding_length", 64},     {"feed_forward_length", 128},
                 {"attention.head_count", 4},  {"attention.head_count_kv", 2},
                 {"attention.key_length", 32}, {"attention.value_length", 32},
                 {"rope.dimension_count", 8},  {"ssm.conv_kernel", 4},
                 {"ssm.state_size", 16},       {"ssm.group_count", 2},
                 {"ssm.time_step_rank", 4},    {"ssm.inner_size", 32}};
    edit(keys, b);
    for (const auto& [name, value] : keys) b.u32(a + name, value);
    put_f32(b, a + "attention.layer_norm_rms_epsilon", 1e-6f);
    put_f32(b, a + "rope.freq_base", 1e7f);
    b.tensor({"token_embd.weight", kGgmlF32, {64, 100}, std::vector<std::uint8_t>(64 * 100 * 4)});
    // Stand-ins for the blocks' tensors (the parser wants at least one per block).
    for (int i = 0; i < 8; ++i) {
      b.tensor({"pad." + std::to_string(i), kGgmlF32, {1}, std::vector<std::uint8_t>(4)});
    }
    if (with_output) {
      b.tensor({"output.weight", kGgmlF32, {64, 100}, std::vector<std::uint8_t>(64 * 100 * 4)});
    }
    const fs::path path = dir_ / "model.gguf";
    const std::vector<std::uint8_t> bytes = b.build();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return path.string();
  }

  static std::string pattern_of(const Qwen38Config& c) {
    std::string p;
    for (int64_t i = 0; i < c.num_layers; ++i) p += c.is_full_attention(i) ? 'F' : 'L';
    return p;
  }

  static std::string error_of(const std::string& path) {
    try {
      parse_qwen38_gguf_config(GgufFile(path));
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  }
};

TEST_F(Qwen35GgufConfig, MapsLlamaCppKeysToTheModel) {
  const Qwen38Config c = parse_qwen38_gguf_config(GgufFile(write([](auto&, auto&) {})));
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rotary_dim(), 8);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_FLOAT_EQ(static_cast<float>(c.rope_theta), 1e7f);
  EXPECT_EQ(c.linear_conv_kernel, 4);
  EXPECT_EQ(c.linear_key_head_dim, 16);
  EXPECT_EQ(c.linear_num_key_heads, 2);
  EXPECT_EQ(c.linear_num_value_heads, 4);
  EXPECT_EQ(c.linear_value_head_dim, 8);
  EXPECT_EQ(c.vocab_size, 100);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(pattern_of(c), "LLLFLL");  // the default interval, 4
  EXPECT_TRUE(c.tie_word_embeddings);  // no output.weight
  EXPECT_TRUE(c.value_heads_tiled);    // 4 value heads over 2 key heads: the converter tiled them
}

TEST_F(Qwen35GgufConfig, ReadsThePatternTyingAndMtpLayers) {
  EXPECT_EQ(pattern_of(parse_qwen38_gguf_config(
                GgufFile(write([](auto& k, auto&) { k["full_attention_interval"] = 2; })))),
            "LFLFLF");
  EXPECT_EQ(
      pattern_of(parse_qwen38_gguf_config(GgufFile(write([](auto&, auto& b) {
        put_bools(b, "qwen35.attention.recurrent_layers", {false, true, false, false, true, true});
      })))),
      "FLFFLL");
  // Two exported MTP blocks follow the main four: they are not part of the model.
  EXPECT_EQ(parse_qwen38_gguf_config(GgufFile(write([](auto& k, auto&) {
              k["nextn_predict_layers"] = 2;
            }))).num_layers,
            4);
  EXPECT_FALSE(parse_qwen38_gguf_config(GgufFile(write([](auto&, auto&) {}, "qwen35", true)))
                   .tie_word_embeddings);
  EXPECT_FALSE(parse_qwen38_gguf_config(GgufFile(write([](auto& k, auto&) {
                 k["ssm.time_step_rank"] = 2;
                 k["ssm.inner_size"] = 16;
               }))).value_heads_tiled);  // as many value heads as key heads: nothing reordered
}

TEST_F(Qwen35GgufConfig, RefusesWhatItCannotRunNamingTheKey) {
  const std::vector<std::pair<std::function<void(Keys&, GgufBuilder&)>, std::string>> cases = {
      {[](auto& k, auto&) { k["ssm.inner_size"] = 30; },
       "'qwen35.ssm.inner_size' 30 is not a multiple of 'qwen35.ssm.time_step_rank' 4"},
      {[](auto& k, auto&) { k["ssm.group_count"] = 3; },
       "'qwen35.ssm.group_count' 3 does not divide 'qwen35.ssm.time_step_rank' 4"},
      {[](auto& k, auto&) { k["attention.head_count_kv"] = 3; },
       "'qwen35.attention.head_count_kv' 3 does not divide 'qwen35.attention.head_count' 4"},
      {[](auto& k, auto&) { k["rope.dimension_count"] = 7; },
       "'qwen35.rope.dimension_count' is 7: it must be even"},
      {[](auto& k, auto&) { k["attention.value_length"] = 16; },
       "'qwen35.attention.value_length' is 16 but 'qwen35.attention.key_length' is 32"},
      {[](auto& k, auto&) { k["full_attention_interval"] = 0; },
       "'qwen35.full_attention_interval' is 0, expected a positive integer"},
      {[](auto&, auto& b) {
         put_bools(b, "qwen35.attention.recurrent_layers", {true, false});
       },
       "'qwen35.attention.recurrent_layers' is not an array of at least 6 booleans"},
      {[](auto& k, auto&) { k["nextn_predict_layers"] = 6; },
       "'qwen35.nextn_predict_layers' is 6 with 6 blocks"},
  };
  for (const auto& [edit, expected] : cases) {
    const std::string error = error_of(write(edit));
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  }
  EXPECT_NE(
      error_of(write([](auto&, auto&) {}, "mamba")).find("'general.architecture' is \"mamba\""),
      std::string::npos);
}

// qwen35moe: the same keys under its own prefix, the expert keys instead of feed_forward_length.
TEST_F(Qwen35GgufConfig, ReadsTheMoeKeysOfQwen35moe) {
  auto moe_keys = [](Keys& k) {
    k.erase("feed_forward_length");
    k["expert_count"] = 16;
    k["expert_used_count"] = 4;
    k["expert_feed_forward_length"] = 32;
    k["expert_shared_feed_forward_length"] = 48;
  };
  const Qwen38Config c = parse_qwen38_gguf_config(
      GgufFile(write([&](Keys& k, GgufBuilder&) { moe_keys(k); }, "qwen35moe")));
  ASSERT_TRUE(c.is_moe());
  EXPECT_EQ(c.moe.experts, 16);
  EXPECT_EQ(c.moe.experts_per_token, 4);
  EXPECT_EQ(c.moe.intermediate, 32);
  EXPECT_EQ(c.moe.shared_intermediate, 48);
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.linear_num_value_heads, 4);

  const std::vector<std::pair<std::function<void(Keys&)>, std::string>> cases = {
      {[](Keys& k) { k.erase("expert_count"); }, "'qwen35moe.expert_count'"},
      {[](Keys& k) { k["expert_used_count"] = 17; },
       "'qwen35moe.expert_used_count' is 17: at most 'qwen35moe.expert_count' 16"},
      {[](Keys& k) { k["expert_feed_forward_length"] = 0; },
       "'qwen35moe.expert_feed_forward_length' is 0, expected a positive integer"},
      {[](Keys& k) { k.erase("expert_shared_feed_forward_length"); },
       "'qwen35moe.expert_shared_feed_forward_length'"},
  };
  for (const auto& refusal : cases) {
    const std::string error = error_of(write(
        [&](Keys& k, GgufBuilder&) {
          moe_keys(k);
          refusal.first(k);
        },
        "qwen35moe"));
    EXPECT_NE(error.find(refusal.second), std::string::npos) << error;
  }
  // A dense qwen35 file is not read as MoE, whatever expert keys it carries.
  EXPECT_FALSE(parse_qwen38_gguf_config(GgufFile(write([](Keys& k, GgufBuilder&) {
                 k["expert_count"] = 16;
               }))).is_moe());
}

// Tensors the metadata implies but the file lacks or shapes otherwise: the loader names them.
TEST_F(Qwen35GgufConfig, RefusesMissingOrMisshapenTensors) {
  auto load_error = [](const std::string& path) {
    try {
      load_qwen38_gguf(std::make_shared<const GgufFile>(path),
                       ModelRunOptions{1, KvCacheType::kF32});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_NE(load_error(write([](auto&, auto&) {
            })).find("tensor 'output_norm.weight' is missing (qwen35 needs it)"),
            std::string::npos);
  const std::string misshapen = write([](auto&, auto& b) {
    b.tensor({"output_norm.weight", kGgmlF32, {32}, std::vector<std::uint8_t>(32 * 4)});
  });
  EXPECT_NE(load_error(misshapen).find("but the metadata implies [64, 1]"), std::string::npos)
      << load_error(misshapen);
}

// Random metadata values (zero, one, huge, random; keys dropped; random patterns and
// architectures): every file parses into a consistent config or is refused with an md::Error
// that names it, never a crash, a hang or another exception.
TEST_F(Qwen35GgufConfig, RandomMetadataParsesConsistentlyOrIsRefused) {
  std::mt19937_64 rng(20261203);
  auto pick = [&](std::uint32_t limit) {
    return static_cast<std::uint32_t>(std::uniform_int_distribution<std::uint64_t>(0, limit)(rng));
  };
  const std::vector<std::uint32_t> extremes = {0, 1, 2, 3, 4, 7, 8, 64, 0x7fffffffu, 0xffffffffu};
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 600; ++i) {
    const bool moe = i % 2 == 1;  // half the files qwen35moe, with its expert keys
    const std::string architecture = moe ? "qwen35moe" : "qwen35";
    const std::string path = write(
        [&](Keys& keys, GgufBuilder& b) {
          if (moe) {
            keys.erase("feed_forward_length");
            keys["expert_count"] = 16;
            keys["expert_used_count"] = 4;
            keys["expert_feed_forward_length"] = 32;
            keys["expert_shared_feed_forward_length"] = 48;
          }
          for (auto it = keys.begin(); it != keys.end();) {
            const std::uint32_t roll = pick(9);
            if (roll == 0) {
              it = keys.erase(it);
              continue;
            }
            if (roll == 1) it->second = extremes[pick(9)];
            if (roll == 2) it->second = pick(80);
            ++it;
          }
          if (pick(3) == 0) keys["full_attention_interval"] = extremes[pick(9)];
          if (pick(3) == 0) keys["nextn_predict_layers"] = extremes[pick(9)];
          if (pick(3) == 0) {
            std::vector<bool> recurrent(pick(10));
            for (std::size_t j = 0; j < recurrent.size(); ++j) recurrent[j] = pick(1) != 0;
            put_bools(b, architecture + ".attention.recurrent_layers", recurrent);
          }
        },
        architecture);
    try {
      const Qwen38Config c = parse_qwen38_gguf_config(GgufFile(path));
      ++accepted;
      ASSERT_EQ(c.is_moe(), moe);
      if (moe) {
        ASSERT_LE(c.moe.experts_per_token, c.moe.experts);
        ASSERT_GT(c.moe.intermediate, 0);
        ASSERT_GT(c.moe.shared_intermediate, 0);
      }
      ASSERT_EQ(static_cast<int64_t>(c.layer_types.size()), c.num_layers);
      ASSERT_EQ(c.num_attention_heads % c.num_key_value_heads, 0);
      ASSERT_EQ(c.linear_num_value_heads % c.linear_num_key_heads, 0);
      ASSERT_LE(c.rotary_dim(), c.head_dim);
    } catch (const Error& e) {
      ++rejected;
      ASSERT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(accepted, 20);
  EXPECT_GT(rejected, 100);
}

TEST_F(Qwen35GgufConfig, RefusesAMissingKey) {
  GgufBuilder b;
  b.string("general.architecture", "qwen35").u32("qwen35.block_count", 2);
  for (const char* name : {"a", "b"}) b.tensor({name, kGgmlF32, {1}, std::vector<std::uint8_t>(4)});
  const std::vector<std::uint8_t> bytes = b.build();
  const fs::path bare = dir_ / "bare.gguf";
  std::ofstream(bare, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  EXPECT_NE(error_of(bare.string()).find("qwen35.embedding_length"), std::string::npos)
      << error_of(bare.string());
}

}  // namespace
}  // namespace md
