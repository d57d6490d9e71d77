#include "io/strict_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"

namespace md {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;

TEST(StrictJson, ParsesLikeNlohmannWhenKeysAreUnique) {
  std::string text = R"({"a": [1, -2, 3.5, "x", null, true], "b": {"c": {}}, "d": []}  )";
  EXPECT_EQ(parse_strict_json(text, "t"), nlohmann::json::parse(text));
}

TEST(StrictJson, RejectsDuplicateKeysNamingThePath) {
  EXPECT_THAT(error_of([] { parse_strict_json(R"({"a": 1, "a": 2})", "f.json"); }),
              AllOf(HasSubstr("f.json"), HasSubstr("duplicate key \"a\""), HasSubstr("top-level")));
  EXPECT_THAT(error_of([] { parse_strict_json(R"({"x": [0, {"k": 1, "k": 1}]})", "f.json"); }),
              HasSubstr("duplicate key \"k\" in value \"/x/1\""));
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(parse_strict_json(R"({"a": {"k": 1}, "b": {"k": 2}})", "f.json"));
}

TEST(StrictJson, LimitsNesting) {
  std::string deep = std::string(10, '[') + std::string(10, ']');
  EXPECT_NO_THROW(parse_strict_json(deep, "t", 10));
  EXPECT_THAT(error_of([&] { parse_strict_json(deep, "t", 9); }),
              HasSubstr("nesting deeper than 9"));
  // Hostile depth fails fast at the default limit instead of building a huge DOM.
  std::string hostile(1'000'000, '[');
  EXPECT_THAT(error_of([&] { parse_strict_json(hostile, "t"); }), HasSubstr("nesting deeper"));
}

TEST(StrictJson, ReportsSyntaxErrorsWithTheOrigin) {
  for (std::string_view bad :
       {std::string_view(""), std::string_view("{"), std::string_view("{\"a\":}"),
        std::string_view("[1,]"), std::string_view("{} x"), std::string_view("{\"a\": 01}"),
        std::string_view("// c\n{}"), std::string_view("{\"\xff\": 1}"),
        std::string_view("{}\0junk", 6), std::string_view("\0", 1)}) {
    EXPECT_THAT(error_of([&] { parse_strict_json(bad, "cfg.json"); }),
                HasSubstr("cfg.json: invalid JSON"))
        << bad;
  }
}

TEST(StrictJson, QuotesUntrustedTextForMessages) {
  EXPECT_EQ(quote_for_message("a.weight"), "\"a.weight\"");
  EXPECT_EQ(quote_for_message(std::string("a\0b\n", 4)), "\"a\\u0000b\\n\"");
  EXPECT_EQ(quote_for_message("\xff"), "\"\xEF\xBF\xBD\"");
  EXPECT_EQ(quote_for_message(std::string(500, 'x'), 4), "\"xxxx\"...");
}

}  // namespace
}  // namespace md
