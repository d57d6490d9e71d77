// Kimi K3's chat format (text/kimi_xtml_chat.h), which its checkpoint renders in Python and ships
// no template for: byte for byte against jinja2 rendering llama.cpp's transcription of the encoder
// (tests/goldens/kimi/kimi-k3-xtml-chat.json, tools/gen_kimi_xtml_goldens.py), the errors it
// raises, the switch aliases the server passes, and the prompt's tokens on the fixture's tokenizer:
// the markers become their special ids, a marker typed in a message stays text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "kimi_test_util.h"
#include "text/chat_template.h"
#include "text/jinja/error.h"
#include "text/kimi_xtml_chat.h"
#include "text/tokenizer.h"

namespace md {
namespace {

using json = nlohmann::ordered_json;

json goldens() {
  std::ifstream in(std::filesystem::path(MD_SOURCE_DIR) /
                   "tests/goldens/kimi/kimi-k3-xtml-chat.json");
  return json::parse(in);
}

KimiXtmlOptions options_of(const json& c) {
  KimiXtmlOptions options;
  options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  options.tools = c["tools"];
  options.variables = c["variables"];
  return options;
}

TEST(KimiXtmlChat, RendersEveryCaseAsJinja2RendersTheTranscription) {
  const json cases = goldens()["cases"];
  ASSERT_GE(cases.size(), 20u);
  for (const json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    if (c.contains("error")) {
      try {
        render_kimi_xtml(c["messages"], options_of(c));
        ADD_FAILURE() << "rendered instead of raising";
      } catch (const jinja::TemplateError& e) {
        EXPECT_EQ(e.kind(), jinja::TemplateError::Kind::kRaised);
        EXPECT_EQ(e.detail(), c["error"].get<std::string>());
      }
      continue;
    }
    EXPECT_EQ(join_segments(render_kimi_xtml(c["messages"], options_of(c))),
              c["expected"].get<std::string>());
  }
}

// Only the four markers are marker segments; tag names, attributes and content are text (which
// holds a marker only where a message typed one).
TEST(KimiXtmlChat, SegmentsSeparateMarkersFromText) {
  const json cases = goldens()["cases"];  // kept: a loop over the temporary's member would dangle
  for (const json& c : cases) {
    if (c.contains("error")) continue;
    const bool typed_markers = c["messages"].dump().find("<|") != std::string::npos;
    for (const ChatSegment& s : render_kimi_xtml(c["messages"], options_of(c))) {
      if (s.markers) {
        EXPECT_TRUE(s.text == "<|open|>" || s.text == "<|sep|>" || s.text == "<|close|>" ||
                    s.text == "<|end_of_msg|>")
            << s.text;
      } else if (!typed_markers) {
        EXPECT_EQ(s.text.find("<|sep|>"), std::string::npos) << c["name"] << ": " << s.text;
      }
    }
  }
}

std::string render(const json& messages, json variables, bool generation = true) {
  KimiXtmlOptions options;
  options.add_generation_prompt = generation;
  options.variables = std::move(variables);
  return join_segments(render_kimi_xtml(messages, options));
}

// The server passes the OpenAI switches (enable_thinking, reasoning_effort) beside the format's
// own (thinking, thinking_effort): each alias renders as what it stands for.
TEST(KimiXtmlChat, TheServerSwitchesAreAliasesOfTheFormatsOwn) {
  const json messages = json::parse(R"([{"role":"user","content":"hi"},
      {"role":"assistant","content":"yo","reasoning_content":"think"},
      {"role":"user","content":"again"}])");
  EXPECT_EQ(render(messages, {{"enable_thinking", false}}),
            render(messages, {{"thinking", false}}));
  EXPECT_EQ(render(messages, {{"reasoning_effort", "high"}}),
            render(messages, {{"thinking_effort", "high"}}));
  EXPECT_EQ(render(messages, {{"reasoning_effort", "none"}}),
            render(messages, {{"thinking", false}}));
  EXPECT_NE(render(messages, {{"thinking", false}}), render(messages, json::object()));
  EXPECT_TRUE(render(messages, {{"thinking", false}}).ends_with("<|open|>response<|sep|>"));
  EXPECT_TRUE(render(messages, json::object()).ends_with("<|open|>think<|sep|>"));
}

// Fuzz: conversations of random shapes (any role, content of any type, tool calls and arguments
// of any type, switches of any type) render or raise the format's own error, nothing else.
TEST(KimiXtmlChat, RandomConversationsRenderOrRaiseTheFormatsError) {
  std::mt19937 rng(5);
  const std::vector<json> scalars = {nullptr, true,    0,      -1.5,          "",
                                     "x",     "a&\"b", "\xff", json::array(), json::object()};
  auto scalar = [&] { return scalars[rng() % scalars.size()]; };
  auto value = [&](int depth, auto&& self) -> json {
    if (depth == 0 || rng() % 3 == 0) return scalar();
    json v = rng() % 2 ? json::array() : json::object();
    for (int i = 0, n = static_cast<int>(rng() % 3); i < n; ++i) {
      if (v.is_array()) {
        v.push_back(self(depth - 1, self));
      } else {
        v[std::string(1, static_cast<char>('a' + rng() % 4))] = self(depth - 1, self);
      }
    }
    return v;
  };
  const std::vector<std::string> roles = {"user", "assistant", "tool", "system", "other"};
  for (int round = 0; round < 400; ++round) {
    json messages = json::array();
    for (int m = 0, n = static_cast<int>(rng() % 5); m < n; ++m) {
      json message = {{"role", roles[rng() % roles.size()]}, {"content", value(2, value)}};
      if (rng() % 3 == 0) {
        json call = {{"id", scalar()}, {"function", {{"name", scalar()}}}};
        if (rng() % 2) call["function"]["arguments"] = value(2, value);
        message["tool_calls"] = json::array({call, value(1, value)});
      }
      if (rng() % 4 == 0) message["tool_call_id"] = scalar();
      if (rng() % 5 == 0) message["name"] = scalar();
      if (rng() % 6 == 0) message["reasoning_content"] = scalar();
      if (rng() % 10 == 0) message.erase("role");
      messages.push_back(message);
    }
    KimiXtmlOptions options;
    options.add_generation_prompt = rng() % 2 == 0;
    if (rng() % 3 == 0) options.tools = value(2, value);
    if (rng() % 3 == 0) options.variables["thinking"] = scalar();
    if (rng() % 3 == 0) options.variables["thinking_effort"] = scalar();
    if (rng() % 4 == 0) options.variables["response_format"] = value(2, value);
    try {
      (void)render_kimi_xtml(messages, options);
    } catch (const jinja::TemplateError& e) {
      EXPECT_EQ(e.kind(), jinja::TemplateError::Kind::kRaised) << messages.dump();
    }
  }
}

TEST(KimiXtmlChat, TheFixturesTemplateIsTheBuiltInFormatAndMarkersInTextStayText) {
  const std::string dir = test::kimi_fixture_path("kimi-k3-tiny");
  std::optional<ChatTemplate> chat = ChatTemplate::load(dir);
  ASSERT_TRUE(chat.has_value());
  EXPECT_TRUE(chat->is_kimi_xtml());
  EXPECT_TRUE(chat->takes_tools());
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(dir);
  const json messages = json::parse(R"([{"role":"user","content":"say <|open|>hi<|sep|>"}])");
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  const std::vector<int32_t> ids =
      encode_chat_segments(*tokenizer, chat->render_segments(messages, options));
  const int32_t open = *tokenizer->token_id("<|open|>"), sep = *tokenizer->token_id("<|sep|>");
  const int32_t end = *tokenizer->token_id("<|end_of_msg|>");
  // Structure: the effort and user messages (an open and a close tag each) and the generation
  // prompt (the assistant message and its think section opened): 4 opens, 6 seps.
  EXPECT_EQ(std::count(ids.begin(), ids.end(), open), 1 + 1 + 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), sep), 2 + 2 + 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), end), 2);
  EXPECT_EQ(tokenizer->decode(ids), chat->render(messages, options));
  // Negative control: the whole text encoded with specials parsed turns the typed ones into ids.
  const std::vector<int32_t> naive = tokenizer->encode(chat->render(messages, options), true);
  EXPECT_EQ(std::count(naive.begin(), naive.end(), open), 4 + 1);
}

}  // namespace
}  // namespace md
