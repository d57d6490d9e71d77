// Cross-check with the reference implementation: files written by the `gguf` package (gguf-py,
// from llama.cpp) must read back as gguf-py's own reader sees them, and every tensor must
// dequantise to the values gguf-py's quants module computes. The fixture is written by
// tools/make_gguf_reference.py (ctest fixture io_reference).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "io/gguf_file.h"
#include "kernels/gguf_dequant.h"

namespace md {
namespace {

using nlohmann::json;

const std::string kFixtureDir = std::string(MD_GOLDEN_DIR) + "/io/gguf";

json load_manifest() {
  std::string path = kFixtureDir + "/manifest.json";
  if (!file_exists(path)) return nullptr;
  return json::parse(read_text_file(path));
}

#define REQUIRE_MANIFEST(value)                                        \
  if ((value).is_null())                                               \
  GTEST_SKIP() << "fixture missing in " << kFixtureDir                 \
               << ": run through ctest (fixture io_reference) or run " \
                  "tools/make_gguf_reference.py --out " MD_GOLDEN_DIR

std::string hex(std::span<const std::uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::uint8_t b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

void expect_metadata(const GgufFile& file) {
  EXPECT_EQ(file.string("general.architecture"), "megadecode-test");
  EXPECT_EQ(file.integer("t.u8"), 200);
  EXPECT_EQ(file.integer("t.i8"), -100);
  EXPECT_EQ(file.integer("t.u16"), 60000);
  EXPECT_EQ(file.integer("t.i16"), -30000);
  EXPECT_EQ(file.integer("t.u32"), 4000000000);
  EXPECT_EQ(file.integer("t.i32"), -2000000000);
  EXPECT_EQ(file.number("t.f32"), 1.5);
  EXPECT_TRUE(file.boolean_or("t.bool", false));
  EXPECT_EQ(file.string("t.string"), "h\xc3\xa9llo GGUF");
  EXPECT_EQ(file.find("t.u64")->describe(), "u64 9223372036854775813");
  EXPECT_EQ(file.integer("t.i64"), -(std::int64_t{1} << 62));
  EXPECT_EQ(file.number("t.f64"), 3.141592653589793);
  const auto& ints = *file.find("t.ints")->as_array();
  ASSERT_EQ(ints.size(), 3u);
  EXPECT_EQ(ints[2].as_int64(), 3);
  const auto& strings = *file.find("t.strings")->as_array();
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(*strings[1].as_string(), "bc");
  EXPECT_EQ(*strings[2].as_string(), "");
  const auto& nested = *file.find("t.nested")->as_array();
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ((*nested[0].as_array())[1].as_int64(), 2);
  EXPECT_EQ((*nested[1].as_array())[0].as_int64(), 3);
}

void expect_tensors(const GgufFile& file, const json& want) {
  EXPECT_EQ(file.alignment(), want["alignment"].get<std::uint64_t>());
  EXPECT_EQ(file.data_offset(), want["data_offset"].get<std::uint64_t>());
  ASSERT_EQ(file.tensors().size(), want["tensors"].size());
  for (const auto& [name, t] : want["tensors"].items()) {
    SCOPED_TRACE(name);
    const GgufTensor* tensor = file.tensor(name);
    ASSERT_NE(tensor, nullptr);
    EXPECT_EQ(ggml_type_name(tensor->type), t["type"].get<std::string>());
    EXPECT_EQ(tensor->dims, t["dims"].get<std::vector<std::int64_t>>());
    EXPECT_EQ(tensor->offset, t["offset"].get<std::uint64_t>());
    EXPECT_EQ(hex(tensor->bytes()), t["hex"].get<std::string>());
    if (!t.contains("values")) continue;
    auto expected = t["values"].get<std::vector<float>>();
    ASSERT_EQ(static_cast<std::size_t>(tensor->numel()), expected.size());
    ASSERT_TRUE(kernels::can_dequantize(tensor->type));
    // Row by row, as the loaders will call it.
    std::vector<float> row(static_cast<std::size_t>(tensor->row_length()));
    const std::size_t row_bytes = tensor->nbytes / static_cast<std::size_t>(tensor->rows());
    for (std::int64_t r = 0; r < tensor->rows(); ++r) {
      ASSERT_TRUE(kernels::dequantize_row(tensor->type, tensor->data + r * row_bytes, row.data(),
                                          tensor->row_length()));
      for (std::size_t i = 0; i < row.size(); ++i) {
        float want_value = expected[static_cast<std::size_t>(r) * row.size() + i];
        // gguf-py computes in numpy f32 with its own operation order: allow an ulp or two.
        ASSERT_NEAR(row[i], want_value, 1e-6f * (1.0f + std::fabs(want_value)))
            << "row " << r << " element " << i;
      }
    }
  }
}

TEST(GgufReference, ReadsAFileWrittenByGgufPy) {
  json manifest = load_manifest();
  REQUIRE_MANIFEST(manifest);
  GgufFile file(kFixtureDir + "/reference.gguf");
  EXPECT_EQ(file.version(), 3u);
  expect_metadata(file);
  expect_tensors(file, manifest["reference"]);
}

TEST(GgufReference, HonoursACustomAlignment) {
  json manifest = load_manifest();
  REQUIRE_MANIFEST(manifest);
  GgufFile file(kFixtureDir + "/aligned64.gguf");
  EXPECT_EQ(file.integer("general.alignment"), 64);
  expect_metadata(file);
  expect_tensors(file, manifest["aligned64"]);
}

}  // namespace
}  // namespace md
