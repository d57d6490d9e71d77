#include "server/request_fields.h"

#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"

namespace md::server {
namespace {

constexpr IntegerRule kSmall{0, 20, "an integer between 0 and 20"};
constexpr NumberRule kUnit{0, 1, "a number between 0 and 1"};
constexpr NumberRule kPositive{0, 2, "a number greater than 0 and at most 2", true};

// The ApiError `f` throws, or a failed expectation when it throws none.
template <typename F>
ApiError error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error thrown";
  return ApiError(0, "", "", std::nullopt, "");
}

IntegerStatus status_of(const char* json) {
  return read_integer(Json::parse(json)).status;
}
int64_t value_of(const char* json) {
  return read_integer(Json::parse(json)).value;
}

TEST(ReadInteger, AcceptsNumbersWithoutFraction) {
  EXPECT_EQ(value_of("10"), 10);
  EXPECT_EQ(value_of("10.0"), 10);
  EXPECT_EQ(value_of("1e1"), 10);
  EXPECT_EQ(value_of("1E+1"), 10);
  EXPECT_EQ(value_of("-3"), -3);
  EXPECT_EQ(value_of("-0.0"), 0);
  EXPECT_EQ(value_of("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(value_of("-9223372036854775808"), INT64_MIN);
  for (const char* json : {"10", "10.0", "1e1", "0"}) {
    EXPECT_EQ(status_of(json), IntegerStatus::kOk) << json;
  }
}

TEST(ReadInteger, FractionsAndNonNumbersAreNotIntegers) {
  for (const char* json : {"10.5", "1e-1", "true", "false", "\"10\"", "null", "[1]", "{}"}) {
    EXPECT_EQ(status_of(json), IntegerStatus::kNotInteger) << json;
  }
}

TEST(ReadInteger, IntegersBeyondInt64AreOutOfRange) {
  // -9223372036854775809 parses to the double -2^63; so does -9.2233720368547758e18. They cannot
  // be told apart, and the out-of-range literal must be refused (spec §2.2 seed), so a float
  // equal to -2^63 is out of range too (an in-range INT64_MIN literal parses as an integer).
  for (const char* json :
       {"9223372036854775808", "18446744073709551615", "18446744073709551616", "1e19", "-1e19",
        "9.3e18", "-9223372036854775809", "-9.2233720368547758e18"}) {
    EXPECT_EQ(status_of(json), IntegerStatus::kOutOfRange) << json;
  }
  // A double as large as 2^63 is integral, so this is a range error rather than a type error.
  EXPECT_EQ(read_integer(Json(9223372036854775808.0)).status, IntegerStatus::kOutOfRange);
  EXPECT_EQ(read_integer(Json(std::numeric_limits<double>::infinity())).status,
            IntegerStatus::kOutOfRange);
}

TEST(AsInteger, TypeErrorsAndRangeErrorsNameTheParam) {
  const ApiError type = error_of([] { as_integer(Json("10"), "max_tokens", kSmall); });
  EXPECT_EQ(type.code, "invalid_type");
  EXPECT_EQ(type.param, "max_tokens");
  EXPECT_EQ(type.message, "Invalid type for 'max_tokens': expected an integer.");
  EXPECT_EQ(error_of([] { as_integer(Json(true), "n", kSmall); }).code, "invalid_type");
  EXPECT_EQ(error_of([] { as_integer(Json(2.5), "n", kSmall); }).code, "invalid_type");

  const ApiError range = error_of([] { as_integer(Json(21), "top_logprobs", kSmall); });
  EXPECT_EQ(range.code, "invalid_value");
  EXPECT_EQ(range.message,
            "Invalid value for 'top_logprobs': expected an integer between 0 and 20.");
  EXPECT_EQ(error_of([] { as_integer(Json(-1), "n", kSmall); }).code, "invalid_value");
  EXPECT_EQ(error_of([] { as_integer(Json::parse("1e19"), "n", kSmall); }).code, "invalid_value");
  EXPECT_EQ(as_integer(Json(20.0), "n", kSmall), 20);
  EXPECT_EQ(as_integer(Json(0), "n", kSmall), 0);
}

TEST(AsNumber, BooleansAndStringsAreNotNumbers) {
  EXPECT_EQ(as_number(Json(1), "x"), 1.0);
  EXPECT_EQ(as_number(Json::parse("18446744073709551615"), "x"), 18446744073709551615.0);
  const ApiError e = error_of([] { as_number(Json(true), "temperature"); });
  EXPECT_EQ(e.code, "invalid_type");
  EXPECT_EQ(e.message, "Invalid type for 'temperature': expected a number.");
  EXPECT_EQ(error_of([] { as_number(Json("0.5"), "x"); }).code, "invalid_type");
  EXPECT_EQ(error_of([] { as_number(Json(nullptr), "x"); }).code, "invalid_type");
}

TEST(AsNumber, RulesAreInclusiveUnlessMarkedExclusive) {
  EXPECT_EQ(as_number(Json(0), "p", kUnit), 0.0);
  EXPECT_EQ(as_number(Json(1), "p", kUnit), 1.0);
  EXPECT_EQ(error_of([] { as_number(Json(1.0000001), "p", kUnit); }).message,
            "Invalid value for 'p': expected a number between 0 and 1.");
  EXPECT_EQ(error_of([] { as_number(Json(-0.1), "p", kUnit); }).code, "invalid_value");
  EXPECT_EQ(error_of([] { as_number(Json(0), "r", kPositive); }).message,
            "Invalid value for 'r': expected a number greater than 0 and at most 2.");
  EXPECT_EQ(as_number(Json(1e-9), "r", kPositive), static_cast<double>(1e-9f));
  EXPECT_EQ(as_number(Json(2), "r", kPositive), 2.0);
  // Checked as the float the engine holds: 1e-46 is 0 there.
  EXPECT_EQ(error_of([] { as_number(Json(1e-46), "r", kPositive); }).message,
            "Invalid value for 'r': expected a number greater than 0 and at most 2.");
  EXPECT_EQ(as_number(Json(1e-46), "p", kUnit), 0.0);
  EXPECT_EQ(
      error_of([] { as_number(Json(std::numeric_limits<double>::infinity()), "p", kUnit); }).code,
      "invalid_value");
}

TEST(AsOthers, StringsBooleansObjectsArrays) {
  EXPECT_EQ(as_string(Json("x"), "s"), "x");
  EXPECT_EQ(error_of([] { as_string(Json(10), "s"); }).message,
            "Invalid type for 's': expected a string.");
  EXPECT_TRUE(as_bool(Json(true), "b"));
  EXPECT_EQ(error_of([] { as_bool(Json("true"), "stream"); }).message,
            "Invalid type for 'stream': expected a boolean.");
  EXPECT_EQ(error_of([] { as_bool(Json(1), "b"); }).code, "invalid_type");
  EXPECT_EQ(error_of([] { as_object(Json::array(), "o"); }).message,
            "Invalid type for 'o': expected an object.");
  EXPECT_EQ(error_of([] { as_array(Json::object(), "a"); }).message,
            "Invalid type for 'a': expected an array.");
}

TEST(ParseDecimal, OnlyPlainDecimalIntegers) {
  EXPECT_EQ(parse_decimal("0"), 0);
  EXPECT_EQ(parse_decimal("50256"), 50256);
  EXPECT_EQ(parse_decimal("-1"), -1);
  EXPECT_EQ(parse_decimal("007"), 7);
  for (const char* text :
       {"", "-", "+1", " 1", "1 ", "1.0", "1e3", "abc", "0x10", "99999999999999999999"}) {
    EXPECT_FALSE(parse_decimal(text).has_value()) << text;
  }
}

TEST(FieldReader, NullMeansAbsent) {
  const Json object = Json::parse(R"({"a":null,"b":1})");
  const FieldReader r(object);
  EXPECT_EQ(r.find("a"), nullptr);
  EXPECT_EQ(r.find("missing"), nullptr);
  EXPECT_FALSE(r.has("a"));
  EXPECT_TRUE(r.has("b"));
  EXPECT_FALSE(r.string("a").has_value());
  EXPECT_FALSE(r.boolean("a").has_value());
  EXPECT_FALSE(r.integer("a", kSmall).has_value());
  EXPECT_FALSE(r.number("a", kUnit).has_value());
  EXPECT_EQ(r.object("a"), nullptr);
  EXPECT_EQ(r.array("a"), nullptr);
  EXPECT_EQ(error_of([&] { r.required("a"); }).message, "Missing required parameter: 'a'.");
}

TEST(FieldReader, PathsCarryThePrefix) {
  const Json object = Json::parse(R"({"include_usage":"yes","n":3,"o":[]})");
  const FieldReader r(object, "stream_options.");
  EXPECT_EQ(r.path("include_usage"), "stream_options.include_usage");
  const ApiError e = error_of([&] { r.boolean("include_usage"); });
  EXPECT_EQ(e.param, "stream_options.include_usage");
  EXPECT_EQ(e.message, "Invalid type for 'stream_options.include_usage': expected a boolean.");
  EXPECT_EQ(r.integer("n", kSmall), 3);
  EXPECT_EQ(error_of([&] { r.object("o"); }).param, "stream_options.o");
  EXPECT_EQ(error_of([&] { r.required("x"); }).param, "stream_options.x");
}

}  // namespace
}  // namespace md::server
