// Bounded fuzzing of the Jinja interpreter: random mutations of real chat templates and random
// token soup must either render or throw md::Error, never crash, hang or throw anything else.
// MD_JINJA_FUZZ_ITERATIONS scales the run (default keeps it to seconds, also under ASan);
// MD_JINJA_FUZZ_SEED picks another deterministic sequence.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "base/file_util.h"
#include "text/chat_template.h"

namespace md {
namespace {

using ordered_json = nlohmann::ordered_json;

int iterations(int fallback) {
  const char* env = std::getenv("MD_JINJA_FUZZ_ITERATIONS");
  return env ? std::max(1, std::atoi(env)) : fallback;
}

std::vector<std::string> seed_templates() {
  std::vector<std::string> out;
  const std::string qwen3_config = std::string(MD_QWEN3_TOKENIZER_DIR) + "/tokenizer_config.json";
  out.push_back(ordered_json::parse(read_text_file(qwen3_config))["chat_template"]);
  for (const char* name : {"qwen38_style.jinja", "kimi_k2_style.jinja", "torture.jinja"}) {
    out.push_back(read_text_file(std::string(MD_SOURCE_DIR) + "/tests/data/templates/" + name));
  }
  return out;
}

const char* const kFragments[] = {"{{",
                                  "}}",
                                  "{%",
                                  "%}",
                                  "{#",
                                  "#}",
                                  "{%-",
                                  "-%}",
                                  "{{-",
                                  "-}}",
                                  "{%+",
                                  "(",
                                  ")",
                                  "[",
                                  "]",
                                  "{",
                                  "}",
                                  "'",
                                  "\"",
                                  "\\",
                                  "|",
                                  ".",
                                  ",",
                                  ":",
                                  "=",
                                  "~",
                                  "+",
                                  "-",
                                  "*",
                                  "**",
                                  "/",
                                  "//",
                                  "%",
                                  "<",
                                  ">",
                                  "==",
                                  "!=",
                                  " if ",
                                  " else ",
                                  " elif ",
                                  " endif ",
                                  " for ",
                                  " in ",
                                  " endfor ",
                                  " set ",
                                  " endset ",
                                  " macro ",
                                  " endmacro ",
                                  " not ",
                                  " and ",
                                  " or ",
                                  " is ",
                                  " none ",
                                  " true ",
                                  "loop",
                                  "ns",
                                  "messages",
                                  "message",
                                  "x",
                                  "0",
                                  "1",
                                  "-1",
                                  "1.5",
                                  "1e308",
                                  "'a'",
                                  "tojson",
                                  "trim",
                                  "length",
                                  "items()",
                                  "[::-1]",
                                  "raise_exception('x')",
                                  "namespace(a=1)",
                                  "range(99999)",
                                  " break ",
                                  " continue ",
                                  " filter ",
                                  " endfilter ",
                                  "\n",
                                  "  ",
                                  "é",
                                  "😀",
                                  "\xFF",
                                  "caller()",
                                  "varargs",
                                  "*",
                                  "{{ m() }}",
                                  "{% macro m() %}{{ m() }}{% endmacro %}"};

std::string mutate(std::string text, std::mt19937& rng) {
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n)(rng); };
  int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits; ++e) {
    std::size_t pos = text.empty() ? 0 : pick(text.size());
    switch (pick(4)) {
      case 0:  // delete a range
        text.erase(pos, pick(12));
        break;
      case 1:  // insert a fragment
        text.insert(pos, kFragments[pick(std::size(kFragments) - 1)]);
        break;
      case 2: {  // duplicate a range elsewhere
        std::string piece = text.substr(pos, pick(40));
        text.insert(text.empty() ? 0 : pick(text.size()), piece);
        break;
      }
      case 3:  // flip a byte
        if (!text.empty()) text[std::min(pos, text.size() - 1)] = static_cast<char>(pick(255));
        break;
      default:  // swap two ranges' order by cutting and re-inserting
        if (!text.empty()) {
          std::string piece = text.substr(pos, pick(30));
          text.erase(pos, piece.size());
          text.insert(text.empty() ? 0 : pick(text.size()), piece);
        }
    }
  }
  return text;
}

std::string token_soup(std::mt19937& rng) {
  std::string text;
  int n = std::uniform_int_distribution<int>(1, 40)(rng);
  for (int i = 0; i < n; ++i) {
    text +=
        kFragments[std::uniform_int_distribution<std::size_t>(0, std::size(kFragments) - 1)(rng)];
  }
  return text;
}

ordered_json conversation() {
  return ordered_json::parse(R"([
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "hi <think>"},
    {"role": "assistant", "content": "<think>r</think>a", "reasoning_content": "r",
     "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": [1, 2.5, null]}}},
                    {"function": {"name": "g", "arguments": "{\"y\": 1}"}}]},
    {"role": "tool", "content": "out"},
    {"role": "user", "content": [{"type": "text", "text": "t"}, {"type": "image"}]}
  ])");
}

// Returns false if something other than md::Error escaped.
bool try_template(const std::string& source, const ordered_json& messages,
                  const ChatTemplateOptions& options) {
  try {
    ChatTemplate t(source, "fuzz");
    t.render(messages, options);
  } catch (const Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-md::Error exception " << e.what() << " for template:\n" << source;
    return false;
  }
  return true;
}

TEST(JinjaFuzz, MutatedTemplatesAndTokenSoupNeverCrash) {
  std::vector<std::string> seeds = seed_templates();
  ASSERT_GE(seeds.size(), 3u);
  const char* seed = std::getenv("MD_JINJA_FUZZ_SEED");
  std::mt19937 rng(seed ? static_cast<unsigned>(std::strtoul(seed, nullptr, 10)) : 12345u);
  ordered_json messages = conversation();
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  options.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  options.extra = {{"enable_thinking", false}};
  options.limits.max_steps = 200000;
  options.limits.max_output_bytes = 1 << 20;
  const int n = iterations(4000);
  auto start = std::chrono::steady_clock::now();
  int failures = 0;
  for (int i = 0; i < n && failures < 5; ++i) {
    std::string source = i % 4 == 3 ? token_soup(rng) : mutate(seeds[i % seeds.size()], rng);
    if (!try_template(source, messages, options)) ++failures;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("jinja fuzz: %d templates in %.1f s\n", n, seconds);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace md
