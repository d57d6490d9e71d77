#include "io/safetensors_header.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"

namespace md {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;
using testing::make_safetensors;
using testing::pattern_bytes;
using testing::raw_safetensors;

SafetensorsHeader parse(const std::vector<std::uint8_t>& bytes) {
  return parse_safetensors_header(bytes, "m.safetensors");
}

// The message of parsing a header with `json` followed by `data_bytes` bytes of data.
std::string header_error(const std::string& json, std::size_t data_bytes = 64) {
  return error_of([&] { parse(raw_safetensors(json, std::vector<std::uint8_t>(data_bytes))); });
}

TEST(SafetensorsHeader, ParsesEntriesMetadataAndAbsoluteOffsets) {
  auto bytes = make_safetensors({{"b.weight", "BF16", {2, 3}, pattern_bytes(12, 1)},
                                 {"a.bias", "F32", {2}, pattern_bytes(8, 2)},
                                 {"scalar", "I64", {}, pattern_bytes(8, 3)},
                                 {"empty", "F16", {0, 5}, {}}},
                                {{"format", "pt"}});
  SafetensorsHeader header = parse(bytes);
  EXPECT_EQ(header.data_offset, 8 + header.json_bytes);
  EXPECT_EQ(header.json_bytes % 8, 0u);
  EXPECT_EQ(header.data_bytes, 28u);
  EXPECT_THAT(header.metadata,
              ElementsAre(std::pair<const std::string, std::string>("format", "pt")));
  ASSERT_EQ(header.tensors.size(), 4u);
  // Sorted by offset; the empty tensor sits at the end of the data area.
  EXPECT_EQ(header.tensors[0].name, "b.weight");
  EXPECT_EQ(header.tensors[0].dtype, DType::kBF16);
  EXPECT_THAT(header.tensors[0].shape, ElementsAre(2, 3));
  EXPECT_EQ(header.tensors[0].offset, header.data_offset);
  EXPECT_EQ(header.tensors[0].nbytes, 12u);
  EXPECT_EQ(header.tensors[1].name, "a.bias");
  EXPECT_EQ(header.tensors[1].offset, header.data_offset + 12);
  EXPECT_EQ(header.tensors[2].name, "scalar");
  EXPECT_TRUE(header.tensors[2].shape.empty());
  EXPECT_EQ(header.tensors[2].nbytes, 8u);
  EXPECT_EQ(header.tensors[3].name, "empty");
  EXPECT_EQ(header.tensors[3].nbytes, 0u);
  EXPECT_EQ(header.tensors[3].offset, bytes.size());
}

TEST(SafetensorsHeader, KnowsEveryDTypeSize) {
  struct Case {
    const char* name;
    DType type;
    std::size_t size;
  };
  for (Case c : {Case{"BF16", DType::kBF16, 2},
                 {"F16", DType::kF16, 2},
                 {"F32", DType::kF32, 4},
                 {"F64", DType::kF64, 8},
                 {"F8_E4M3", DType::kF8E4M3, 1},
                 {"F8_E5M2", DType::kF8E5M2, 1},
                 {"U8", DType::kU8, 1},
                 {"I8", DType::kI8, 1},
                 {"I16", DType::kI16, 2},
                 {"I32", DType::kI32, 4},
                 {"I64", DType::kI64, 8},
                 {"BOOL", DType::kBool, 1}}) {
    auto header = parse(make_safetensors({{"t", c.name, {3, 1}, pattern_bytes(3 * c.size, 0)}}));
    ASSERT_EQ(header.tensors.size(), 1u);
    EXPECT_EQ(header.tensors[0].dtype, c.type) << c.name;
    EXPECT_EQ(header.tensors[0].nbytes, 3 * c.size) << c.name;
  }
}

TEST(SafetensorsHeader, AcceptsPaddingGapsTrailingBytesAndEmptyTensorsAnywhere) {
  // Only metadata, no tensors.
  EXPECT_TRUE(parse(raw_safetensors(R"({"__metadata__":{}})")).tensors.empty());
  EXPECT_TRUE(parse(raw_safetensors("{}   \n\t ")).tensors.empty());
  // A gap between tensors and unused bytes at the end are tolerated.
  auto header = parse(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                      R"("b":{"dtype":"U8","shape":[2],"data_offsets":[10,12]},)"
                                      R"("e1":{"dtype":"F32","shape":[0],"data_offsets":[2,2]},)"
                                      R"("e2":{"dtype":"F32","shape":[3,0],"data_offsets":[2,2]}})",
                                      std::vector<std::uint8_t>(20)));
  ASSERT_EQ(header.tensors.size(), 4u);
  EXPECT_EQ(header.data_bytes, 20u);
}

TEST(SafetensorsHeader, RejectsBadLengthFields) {
  EXPECT_THAT(error_of([] {
                parse({1, 2, 3});
              }),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("3 bytes, too short")));
  EXPECT_THAT(error_of([] { parse(raw_safetensors("{}", {}, 100'000'001)); }),
              HasSubstr("header length 100000001 exceeds the 100000000-byte limit"));
  EXPECT_THAT(error_of([] { parse(raw_safetensors("{}", {}, ~0ull)); }),
              HasSubstr("exceeds the 100000000-byte limit"));
  EXPECT_THAT(error_of([] { parse(raw_safetensors("{}", {}, 3)); }),
              HasSubstr("header length 3 runs past the end of the file (2 bytes follow"));
  EXPECT_THAT(error_of([] { parse(raw_safetensors("")); }), HasSubstr("invalid JSON"));
}

TEST(SafetensorsHeader, RejectsMalformedJson) {
  EXPECT_THAT(header_error("{\"a\":"),
              AllOf(HasSubstr("m.safetensors (safetensors header)"), HasSubstr("invalid JSON")));
  EXPECT_THAT(header_error("{} {}"), HasSubstr("invalid JSON"));
  EXPECT_THAT(header_error(std::string("{}\0\0", 4), 0), HasSubstr("invalid JSON"));
  EXPECT_THAT(header_error("[]"), HasSubstr("header is a JSON array, expected a JSON object"));
  EXPECT_THAT(header_error(R"({"a":{"shape":[[[[1]]]]}})"), HasSubstr("nesting deeper"));
}

TEST(SafetensorsHeader, RejectsDuplicateNamesAndKeys) {
  const std::string entry = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  EXPECT_THAT(header_error("{\"w\":" + entry + ",\"w\":" + entry + "}"),
              HasSubstr("duplicate key \"w\" in the top-level value"));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})"),
              HasSubstr("duplicate key \"dtype\" in value \"/w\""));
  EXPECT_THAT(header_error(R"({"__metadata__":{"k":"a","k":"b"}})"),
              HasSubstr("duplicate key \"k\""));
}

TEST(SafetensorsHeader, RejectsBadMetadata) {
  EXPECT_THAT(header_error(R"({"__metadata__":[]})"),
              HasSubstr("\"__metadata__\" is a JSON array, expected an object of strings"));
  EXPECT_THAT(header_error(R"({"__metadata__":{"n":1}})"),
              HasSubstr("\"__metadata__\" entry \"n\" is 1, expected a string"));
}

TEST(SafetensorsHeader, RejectsMalformedEntriesNamingTheTensor) {
  struct Case {
    std::string entry;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"("x")", "entry is \"x\", expected an object"},
      {R"({"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1})", "unknown key \"extra\""},
      {R"({"shape":[1],"data_offsets":[0,1]})", "missing \"dtype\""},
      {R"({"dtype":"U8","data_offsets":[0,1]})", "missing \"shape\""},
      {R"({"dtype":"U8","shape":[1]})", "missing \"data_offsets\""},
      {R"({"dtype":"F4","shape":[1],"data_offsets":[0,1]})", "unknown dtype \"F4\" (known: BF16"},
      {R"({"dtype":"bf16","shape":[1],"data_offsets":[0,2]})", "unknown dtype \"bf16\""},
      {R"({"dtype":7,"shape":[1],"data_offsets":[0,1]})", "dtype is 7, expected a string"},
      {R"({"dtype":"U8","shape":3,"data_offsets":[0,3]})", "shape is 3, expected an array"},
      {R"({"dtype":"U8","shape":[1,-2],"data_offsets":[0,1]})",
       "shape[1] is -2, expected a non-negative integer"},
      {R"({"dtype":"U8","shape":[1.0],"data_offsets":[0,1]})", "shape[0] is 1.0, expected"},
      {R"({"dtype":"U8","shape":["1"],"data_offsets":[0,1]})", "shape[0] is \"1\", expected"},
      {R"({"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,1]})",
       "shape[0] = 9223372036854775808 does not fit"},
      {R"({"dtype":"U8","shape":[1],"data_offsets":[0]})",
       "data_offsets is an array of 1 elements, expected [begin, end]"},
      {R"({"dtype":"U8","shape":[1],"data_offsets":{}})", "data_offsets is a JSON object"},
      {R"({"dtype":"U8","shape":[1],"data_offsets":[-1,0]})",
       "data_offsets [-1, 0] must be non-negative integers"},
      {R"({"dtype":"U8","shape":[1],"data_offsets":[5,4]})", "data_offsets [5, 4] end before"},
      {R"({"dtype":"U8","shape":[65],"data_offsets":[0,65]})",
       "data_offsets [0, 65] run past the end of the data area (64 bytes)"},
      {R"({"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551615]})", "run past the end"},
      {R"({"dtype":"BF16","shape":[2,3],"data_offsets":[0,10]})",
       "shape [2, 3] of BF16 needs 12 bytes, but data_offsets [0, 10] span 10"},
      {R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]})",
       "shape [4294967296, 4294967296] of F32 is too large: its byte size overflows 64 bits"},
      {R"({"dtype":"I64","shape":[2305843009213693952],"data_offsets":[0,0]})", "overflows"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(header_error("{\"layers.0.w\":" + c.entry + "}"),
                AllOf(HasSubstr("m.safetensors: tensor \"layers.0.w\": "), HasSubstr(c.message)))
        << c.entry;
  }
}

TEST(SafetensorsHeader, RejectsOverlapNamingBothTensors) {
  std::string json = R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})";
  EXPECT_THAT(header_error(json, 16),
              AllOf(HasSubstr("tensors \"a\" and \"b\" overlap"), HasSubstr("starts at")));
  // Identical ranges overlap too.
  json = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
         R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_THAT(header_error(json, 16), HasSubstr("tensors \"a\" and \"b\" overlap"));
}

TEST(SafetensorsHeader, QuotesHostileNamesInMessages) {
  std::string message =
      header_error(R"({"evil\nname\u0000":{"dtype":"X","shape":[],"data_offsets":[0,1]}})");
  EXPECT_THAT(message, HasSubstr("tensor \"evil\\nname\\u0000\": unknown dtype"));
}

}  // namespace
}  // namespace md
