#include "server/json_body.h"

#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"

namespace md::server {
namespace {

using Json = nlohmann::ordered_json;

// The error parse_json_body throws for `body`, or a failed expectation when it throws none.
ApiError body_error(std::string_view body) {
  try {
    parse_json_body(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for body: " << body;
  return ApiError(0, "", "", std::nullopt, "");
}

std::string code_of(std::string_view body) {
  return body_error(body).code;
}

// `depth` nested arrays inside a top-level object: total nesting depth + 1.
std::string nested_arrays(std::size_t depth) {
  return "{\"a\":" + std::string(depth, '[') + std::string(depth, ']') + "}";
}

TEST(JsonBody, ParsesAnObjectKeepingKeyOrder) {
  const auto body = parse_json_body(R"({"z":1,"a":{"y":2,"b":3},"m":[1,"x"]})");
  EXPECT_EQ(body.dump(), R"({"z":1,"a":{"y":2,"b":3},"m":[1,"x"]})");
}

TEST(JsonBody, TruncatedOrEmptyBodyIsInvalidJson) {  // §13 item 15
  const ApiError e = body_error("{");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
  EXPECT_EQ(e.message, "Request body is not valid JSON.");
  EXPECT_FALSE(e.param.has_value());
  EXPECT_EQ(code_of(""), "invalid_json");
  EXPECT_EQ(code_of(" \n\t"), "invalid_json");
}

TEST(JsonBody, OtherSyntaxErrorsAreInvalidJson) {
  EXPECT_EQ(code_of("{} x"), "invalid_json");
  EXPECT_EQ(code_of("{}{}"), "invalid_json");
  EXPECT_EQ(code_of(R"({"a":1,})"), "invalid_json");
  EXPECT_EQ(code_of(R"({"a":1 /* c */})"), "invalid_json");
  EXPECT_EQ(code_of(R"({'a':1})"), "invalid_json");
  EXPECT_EQ(code_of(R"({"a":NaN})"), "invalid_json");
  EXPECT_EQ(code_of(R"({"a":1e400})"), "invalid_json");  // overflows a double
  EXPECT_EQ(code_of("{\"a\":\"\\x\"}"), "invalid_json");
}

TEST(JsonBody, InvalidUtf8IsInvalidEncoding) {  // §13 item 16
  const ApiError e = body_error("{\"a\":\"\xFF\"}");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_encoding");
  EXPECT_EQ(e.message, "Request body is not valid UTF-8.");
  EXPECT_FALSE(e.param.has_value());
  EXPECT_EQ(code_of("{\"a\":\"\xC0\xAF\"}"), "invalid_encoding");          // overlong '/'
  EXPECT_EQ(code_of("{\"a\":\"\xED\xA0\x80\"}"), "invalid_encoding");      // encoded surrogate
  EXPECT_EQ(code_of("{\"a\":\"\xE2\x82\"}"), "invalid_encoding");          // truncated sequence
  EXPECT_EQ(code_of("{\"a\":\"\xF4\x90\x80\x80\"}"), "invalid_encoding");  // above U+10FFFF
  // Invalid bytes outside strings are still an encoding problem, checked before the grammar.
  EXPECT_EQ(code_of("\xFF"), "invalid_encoding");
}

TEST(JsonBody, LoneSurrogateEscapesAreInvalidEncoding) {  // §13 item 16
  EXPECT_EQ(code_of(R"({"a":"\ud800"})"), "invalid_encoding");
  EXPECT_EQ(code_of(R"({"a":"\uD800"})"), "invalid_encoding");
  EXPECT_EQ(code_of(R"({"a":"\udc00"})"), "invalid_encoding");
  EXPECT_EQ(code_of(R"({"a":"x\ud800y"})"), "invalid_encoding");
  EXPECT_EQ(code_of(R"({"a":"\ud800\u0041"})"), "invalid_encoding");
  EXPECT_EQ(code_of(R"({"a":"\ud800\ud800"})"), "invalid_encoding");
  EXPECT_EQ(code_of(R"({"\ud800":1})"), "invalid_encoding");  // in a key too
  EXPECT_EQ(code_of(R"({"a":["\udfff"]})"), "invalid_encoding");
}

TEST(JsonBody, SurrogatePairsAndLookalikesAreFine) {
  EXPECT_EQ(parse_json_body(R"({"a":"\ud83d\ude00"})")["a"], "\xF0\x9F\x98\x80");
  // An escaped backslash followed by the letters "ud800" is not an escape.
  EXPECT_EQ(parse_json_body(R"({"a":"\\ud800"})")["a"], "\\ud800");
  EXPECT_EQ(parse_json_body(R"({"a":"\"\ud83d\ude00\\"})")["a"], "\"\xF0\x9F\x98\x80\\");
  EXPECT_EQ(parse_json_body(R"({"a":"\u00e9\uFFFF"})")["a"], "\xC3\xA9\xEF\xBF\xBF");
  EXPECT_EQ(parse_json_body("{\"a\":\"\xC3\xA9\xE4\xB8\xAD\"}")["a"], "\xC3\xA9\xE4\xB8\xAD");
}

TEST(JsonBody, TopLevelMustBeAnObject) {  // §13 item 17
  const ApiError e = body_error("[]");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_type");
  EXPECT_EQ(e.message, "Request body must be a JSON object.");
  EXPECT_FALSE(e.param.has_value());
  for (const char* body : {"5", "\"s\"", "null", "true", "[{}]"}) {
    EXPECT_EQ(code_of(body), "invalid_type") << body;
  }
}

TEST(JsonBody, NestingIsBounded) {
  EXPECT_NO_THROW(parse_json_body(nested_arrays(kMaxJsonDepth - 1)));
  EXPECT_EQ(code_of(nested_arrays(kMaxJsonDepth)), "invalid_json");
  // A body made of brackets must not exhaust the stack anywhere.
  EXPECT_EQ(code_of(std::string(1 << 20, '[')), "invalid_json");
  // Brackets inside strings are text.
  const std::string text_brackets = "{\"a\":\"" + std::string(10000, '[') + "\"}";
  EXPECT_NO_THROW(parse_json_body(text_brackets));
}

TEST(JsonBody, EmbeddedJsonIsParsedWithKeyOrder) {
  const std::optional<Json> value = parse_embedded_json(R"({"b":1,"a":2})");
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(value->dump(), R"({"b":1,"a":2})");
  EXPECT_EQ(parse_embedded_json("[1]")->dump(), "[1]");
  EXPECT_FALSE(parse_embedded_json("{").has_value());
  EXPECT_FALSE(parse_embedded_json("").has_value());
  EXPECT_FALSE(parse_embedded_json("{\"a\":1} tail").has_value());
  EXPECT_FALSE(parse_embedded_json(R"("\ud800")").has_value());
  EXPECT_FALSE(
      parse_embedded_json(std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']'))
          .has_value());
}

}  // namespace
}  // namespace md::server
