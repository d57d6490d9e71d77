// ChatTemplate: the variables it passes (as transformers does), special tokens, and finding the
// template in a model directory.
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace md {
namespace {

using ordered_json = nlohmann::ordered_json;
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("md_chat_template_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TEST(ChatTemplate, PassesTransformersVariables) {
  ChatTemplate t(
      "{{ messages | length }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|"
      "{{ bos_token is defined }}|{{ eos_token }}|{{ enable_thinking }}");
  ChatTemplateOptions options;
  options.eos_token = "</s>";
  options.bos_token = "";  // empty tokens stay undefined, as in transformers
  options.extra = {{"enable_thinking", false}};
  EXPECT_EQ(t.render(ordered_json::array({{{"role", "user"}, {"content", "x"}}}), options),
            "1|None|None|False|False|</s>|False");
}

TEST(ChatTemplate, KeepsToolKeyOrderAndAcceptsPlainJson) {
  ChatTemplate t("{% for tool in tools %}{{ tool | tojson }}{% endfor %}");
  ChatTemplateOptions options;
  options.tools = ordered_json::parse(R"([{"name": "f", "description": "d", "b": 1, "a": 2}])");
  EXPECT_EQ(t.render(ordered_json::array(), options),
            R"({"name": "f", "description": "d", "b": 1, "a": 2})");
  // nlohmann::json converts implicitly (its objects are sorted by key).
  nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", "x"}}});
  ChatTemplate u("{{ messages[0] | tojson }}");
  EXPECT_EQ(u.render(messages), R"({"content": "x", "role": "user"})");
}

TEST(ChatTemplate, RejectsBadInputs) {
  ChatTemplate t("x");
  EXPECT_THROW(t.render(ordered_json::object()), Error);
  ChatTemplateOptions options;
  options.extra = {{"messages", 1}};
  EXPECT_THROW(t.render(ordered_json::array(), options), Error);
  EXPECT_THROW(ChatTemplate("{% if %}"), jinja::TemplateError);
}

TEST(ChatTemplate, RaiseExceptionSurfacesTheMessage) {
  ChatTemplate t(
      "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}"
      "{% endif %}ok");
  try {
    t.render(ordered_json::parse(R"([{"role": "system", "content": "s"}])"));
    FAIL();
  } catch (const jinja::TemplateError& e) {
    EXPECT_EQ(e.kind(), jinja::TemplateError::Kind::kRaised);
    EXPECT_EQ(e.detail(), "first must be user");
  }
}

TEST(ChatTemplate, RendersTheRealQwen3Template) {
  auto t = ChatTemplate::load(std::string(MD_QWEN3_TOKENIZER_DIR) + "");
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->bos_token().has_value());  // null in tokenizer_config.json
  EXPECT_EQ(t->eos_token(), "<|im_end|>");
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  options.extra = {{"enable_thinking", false}};
  auto messages = ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"}])");
  EXPECT_EQ(t->render(messages, options),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, LoadsFromModelDirectories) {
  {
    TempDir dir;
    dir.write("tokenizer_config.json",
              R"({"chat_template": "{{ bos_token }}{{ eos_token }}",
                  "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>"})");
    auto t = ChatTemplate::load(dir.str());
    ASSERT_TRUE(t);
    EXPECT_EQ(t->render(ordered_json::array()), "<s></s>");
  }
  {
    TempDir dir;  // chat_template.jinja wins over tokenizer_config.json
    dir.write("tokenizer_config.json", R"({"chat_template": "config", "eos_token": "E"})");
    dir.write("chat_template.jinja", "file {{ eos_token }}\n");
    auto t = ChatTemplate::load(dir.str());
    ASSERT_TRUE(t);
    EXPECT_EQ(t->render(ordered_json::array()), "file E");
  }
  {
    TempDir dir;  // a list of named templates: "default" is used
    dir.write("tokenizer_config.json",
              R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                    {"name": "default", "template": "D"}]})");
    auto t = ChatTemplate::load(dir.str());
    ASSERT_TRUE(t);
    EXPECT_EQ(t->render(ordered_json::array()), "D");
  }
  {
    TempDir dir;
    dir.write("tokenizer_config.json", R"({"chat_template": [{"name": "x", "template": "T"}]})");
    EXPECT_THROW(ChatTemplate::load(dir.str()), Error);
  }
  {
    TempDir dir;  // no template at all
    dir.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
    EXPECT_FALSE(ChatTemplate::load(dir.str()).has_value());
  }
  {
    TempDir dir;
    dir.write("tokenizer_config.json", "{not json");
    EXPECT_THROW(ChatTemplate::load(dir.str()), Error);
  }
}

}  // namespace
}  // namespace md
