#include "models/common/config_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config_test_util.h"
#include "models/common/config_files.h"

namespace md {
namespace {

using test::error_of;

nlohmann::json sample() {
  return nlohmann::json::parse(R"({
    "hidden_size": 5120, "eps": 1e-6, "flag": true, "act": "silu", "ids": [1, 2, 3],
    "names": ["a", "b"], "nothing": null, "big": 18446744073709551615, "ratio": 0.5,
    "text_config": {"num_key_value_heads": 4, "hidden_act": "gelu", "eos_token_id": [7, 8]},
    "one_id": 9
  })");
}

TEST(ConfigReader, ReadsTypedFieldsAndDefaults) {
  nlohmann::json json = sample();
  ConfigReader reader("config.json", json, "qwen3_5");
  EXPECT_EQ(reader.integer("hidden_size"), 5120);
  EXPECT_DOUBLE_EQ(reader.number("eps"), 1e-6);
  EXPECT_DOUBLE_EQ(reader.number("hidden_size"), 5120.0);  // integers are numbers too
  EXPECT_TRUE(reader.boolean("flag"));
  EXPECT_EQ(reader.string("act"), "silu");
  EXPECT_EQ(reader.integer_list("ids"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(reader.string_list("names"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(reader.integer_or("absent", 4), 4);
  EXPECT_EQ(reader.integer_or("nothing", 4), 4);  // null means absent
  EXPECT_FALSE(reader.has("nothing"));
  EXPECT_EQ(reader.string_or("absent", "x"), "x");
  EXPECT_TRUE(reader.boolean_or("absent", true));
  EXPECT_EQ(reader.token_ids("one_id"), (std::vector<int64_t>{9}));
  EXPECT_TRUE(reader.token_ids("absent").empty());
  ConfigReader text = reader.object("text_config");
  EXPECT_EQ(text.path_of("num_key_value_heads"), "text_config.num_key_value_heads");
  EXPECT_EQ(text.token_ids("eos_token_id"), (std::vector<int64_t>{7, 8}));
  EXPECT_FALSE(reader.optional_object("absent").has_value());
}

TEST(ConfigReader, WrongTypeNamesExpectedAndActual) {
  nlohmann::json json = sample();
  ConfigReader reader("config.json", json, "qwen3_5");
  EXPECT_EQ(error_of([&] { reader.integer("act"); }),
            "config.json: act = \"silu\": wrong type: expected integer, got string");
  EXPECT_EQ(error_of([&] { reader.integer("ratio"); }),
            "config.json: ratio = 0.5: wrong type: expected integer, got number");
  EXPECT_EQ(error_of([&] { reader.boolean("hidden_size"); }),
            "config.json: hidden_size = 5120: wrong type: expected boolean, got integer");
  EXPECT_EQ(error_of([&] { reader.string_list("ids"); }),
            "config.json: ids[0] = 1: wrong type: expected string, got integer");
  EXPECT_EQ(error_of([&] { reader.object("act"); }),
            "config.json: act = \"silu\": wrong type: expected object, got string");
  EXPECT_EQ(error_of([&] { reader.integer_list("hidden_size"); }),
            "config.json: hidden_size = 5120: wrong type: expected array, got integer");
  EXPECT_EQ(error_of([&] { reader.integer("big"); }),
            "config.json: big = 18446744073709551615: out of range");
}

TEST(ConfigReader, MissingAndRejectNameThePath) {
  nlohmann::json json = sample();
  ConfigReader reader("config.json", json, "qwen3_5");
  ConfigReader text = reader.object("text_config");
  EXPECT_EQ(error_of([&] { text.integer("head_dim"); }),
            "config.json: text_config.head_dim: missing (required by qwen3_5)");
  EXPECT_EQ(error_of([&] { reader.positive("absent"); }),
            "config.json: absent: missing (required by qwen3_5)");
  nlohmann::json negative = {{"n", -3}};
  ConfigReader negative_reader("c.json", negative, "m");
  EXPECT_EQ(error_of([&] { negative_reader.positive("n"); }), "c.json: n = -3: must be positive");
  EXPECT_EQ(error_of([&] { text.reject_element("eos_token_id", 1, "bad"); }),
            "config.json: text_config.eos_token_id[1] = 8: bad");
}

TEST(ConfigReader, ExpectRefusesOtherValuesAndAcceptsDefaults) {
  nlohmann::json json = sample();
  ConfigReader reader("config.json", json, "qwen3_5");
  ConfigReader text = reader.object("text_config");
  EXPECT_EQ(error_of([&] { text.expect("hidden_act", "silu"); }),
            "config.json: text_config.hidden_act = \"gelu\": unsupported (qwen3_5 needs \"silu\")");
  EXPECT_EQ(error_of([&] { reader.expect("act", 3); }),
            "config.json: act = \"silu\": wrong type: expected integer, got string");
  EXPECT_EQ(error_of([&] { reader.expect("missing_flag", true, ConfigReader::Absent::kRefuse); }),
            "config.json: missing_flag: missing (qwen3_5 needs true)");
  EXPECT_NO_THROW(reader.expect("missing_flag", true));
  EXPECT_NO_THROW(reader.expect("flag", true));
  EXPECT_NO_THROW(reader.expect("hidden_size", 5120.0));  // numbers compare by value
  EXPECT_EQ(error_of([&] { reader.forbid("act", "no activations"); }),
            "config.json: act = \"silu\": unsupported (no activations)");
  EXPECT_NO_THROW(reader.forbid("nothing", "null is absent"));
}

TEST(ConfigReader, LongValuesAreElided) {
  nlohmann::json json = {{"list", std::vector<int>(200, 1)}};
  ConfigReader reader("config.json", json, "m");
  std::string message = error_of([&] { reader.reject("list", "bad"); });
  EXPECT_LT(message.size(), 200u);
  EXPECT_NE(message.find("...: bad"), std::string::npos) << message;
}

// A model directory in the build tree holding one config.json with `text`.
std::string write_model_dir(const std::string& name, const std::string& text) {
  std::filesystem::path dir = std::filesystem::path(MD_BINARY_DIR) / "test_models" / name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << text;
  return dir.string();
}

TEST(ConfigFiles, MalformedJsonNamesFileAndPosition) {
  std::string dir =
      write_model_dir("malformed", "{\n  \"hidden_size\": 5120,\n  \"vocab_size\": ,\n}");
  std::string message = error_of([&] { read_config_files(dir); });
  EXPECT_TRUE(message.starts_with(dir + "/config.json: invalid JSON: parse error at line 3, "
                                        "column 17"))
      << message;
  std::string duplicate =
      write_model_dir("duplicate", R"({"model_type": "llama", "model_type": 1})");
  message = error_of([&] { read_config_files(duplicate); });
  EXPECT_NE(message.find("config.json: invalid JSON: duplicate key \"model_type\""),
            std::string::npos)
      << message;
}

TEST(ConfigFiles, TopLevelMustBeAnObject) {
  EXPECT_EQ(error_of([] { config_files_from_json(nlohmann::json::array(), "config.json"); }),
            "config.json: top level = []: wrong type: expected object, got array");
  std::string dir = write_model_dir("array", "[1, 2]");
  EXPECT_EQ(error_of([&] { read_config_files(dir); }),
            dir + "/config.json: top level = [1,2]: wrong type: expected object, got array");
}

TEST(ConfigFiles, ReadsDirectoryWithGenerationConfig) {
  ConfigFiles files = read_config_files(test::config_fixture_dir("qwen38-tiny"));
  EXPECT_TRUE(files.config_path.ends_with("qwen38-tiny/config.json"));
  EXPECT_TRUE(files.generation_path.ends_with("generation_config.json"));
  EXPECT_TRUE(files.generation.is_object());
  EXPECT_TRUE(files.quant.is_null());
  // A config.json path works as well as its directory.
  ConfigFiles direct = read_config_files(files.config_path);
  EXPECT_EQ(direct.config, files.config);
  EXPECT_FALSE(direct.generation_path.empty());
}

TEST(ConfigFiles, MissingDirectoryIsAnError) {
  std::string message = error_of([] { read_config_files("/nonexistent/model"); });
  EXPECT_NE(message.find("/nonexistent/model: no config.json"), std::string::npos) << message;
}

TEST(ConfigFiles, EosIdsAreCheckedAgainstTheVocabulary) {
  nlohmann::json json = {{"eos_token_id", {1, 600}}};
  ConfigFiles files = config_files_from_json(json);
  ConfigReader reader(files.config_path, files.config, "m");
  EXPECT_EQ(error_of([&] { eos_token_ids(files, {&reader}, 512, EosPolicy::kUnion); }),
            "config.json: eos_token_id[1] = 600: token id outside the vocabulary [0, 512)");
  nlohmann::json none = nlohmann::json::object();
  ConfigReader empty("config.json", none, "m");
  EXPECT_EQ(error_of([&] { eos_token_ids(files, {&empty}, 512, EosPolicy::kUnion); }),
            "config.json: eos_token_id: missing (no stop token here or in "
            "generation_config.json)");
}

}  // namespace
}  // namespace md
