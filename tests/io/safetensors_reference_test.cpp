// Cross-check with the reference implementation: files written by the `safetensors` library (and
// sharded as huggingface_hub shards them) must read back identically, and on mutated files the
// C++ parser must agree with the reference library's verdict except for documented deviations.
// The fixture is written by tools/make_safetensors_reference.py (ctest fixture
// safetensors_reference).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "base/file_util.h"
#include "io/checkpoint.h"
#include "io/safetensors_header.h"
#include "io_test_util.h"

namespace md {
namespace {

using nlohmann::json;

const std::string kFixtureDir = std::string(MD_GOLDEN_DIR) + "/io";

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> bytes(hex.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return bytes;
}

json load_fixture(const std::string& name) {
  std::string path = kFixtureDir + "/" + name;
  if (!file_exists(path)) return nullptr;
  return json::parse(read_text_file(path));
}

#define REQUIRE_FIXTURE(value)                                                  \
  if ((value).is_null())                                                        \
  GTEST_SKIP() << "fixture missing in " << kFixtureDir                          \
               << ": run through ctest (fixture safetensors_reference) or run " \
                  "tools/make_safetensors_reference.py --out " MD_GOLDEN_DIR

// Every tensor the reference reader saw, with the same dtype, shape and bytes.
void expect_same_tensors(const Checkpoint& checkpoint, const json& expected) {
  ASSERT_EQ(checkpoint.size(), expected["tensors"].size());
  for (const auto& [name, want] : expected["tensors"].items()) {
    const TensorView* view = checkpoint.find(name);
    ASSERT_NE(view, nullptr) << name;
    EXPECT_EQ(dtype_name(view->dtype), want["dtype"].get<std::string>()) << name;
    EXPECT_EQ(std::vector<std::int64_t>(view->shape.begin(), view->shape.end()),
              want["shape"].get<std::vector<std::int64_t>>())
        << name;
    std::vector<std::uint8_t> bytes(view->bytes().begin(), view->bytes().end());
    EXPECT_EQ(bytes, from_hex(want["hex"])) << name;
  }
}

TEST(SafetensorsReference, ReadsAFileWrittenByTheReferenceLibrary) {
  json manifest = load_fixture("reference/manifest.json");
  REQUIRE_FIXTURE(manifest);
  Checkpoint checkpoint(kFixtureDir + "/reference/single");
  expect_same_tensors(checkpoint, manifest["single"]);
  const auto& metadata = checkpoint.shards()[0]->metadata();
  EXPECT_EQ(json(metadata), manifest["single"]["metadata"]);
  // All twelve dtypes megadecode knows appear in the fixture.
  EXPECT_EQ(checkpoint.parameter_counts().size(), 12u);
}

TEST(SafetensorsReference, ReadsAShardedCheckpointSplitByHuggingFaceHub) {
  json manifest = load_fixture("reference/manifest.json");
  REQUIRE_FIXTURE(manifest);
  std::string directory = kFixtureDir + "/reference/sharded";
  Checkpoint checkpoint(directory);
  EXPECT_EQ(checkpoint.layout(), CheckpointLayout::kIndexed);
  expect_same_tensors(checkpoint, manifest["sharded"]);
  std::vector<std::string> files;
  for (const auto& name : manifest["sharded"]["files"]) {
    files.push_back(directory + "/" + name.get<std::string>());
  }
  EXPECT_EQ(checkpoint.files(), files);
}

// Whether the data area is exactly covered by the tensors back to back: the reference library
// requires it, megadecode tolerates gaps and trailing bytes.
bool covers_data_contiguously(const SafetensorsHeader& header) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& t : header.tensors) ranges.emplace_back(t.offset, t.offset + t.nbytes);
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t end = header.data_offset;
  for (auto [begin, stop] : ranges) {
    if (begin != end) return false;
    end = stop;
  }
  return end == header.data_offset + header.data_bytes;
}

TEST(SafetensorsReference, AgreesWithTheReferenceOnMutatedFiles) {
  json cases = load_fixture("differential.json");
  REQUIRE_FIXTURE(cases);
  int agreed = 0;
  int stricter = 0;
  int laxer = 0;
  for (std::size_t i = 0; i < cases["cases"].size(); ++i) {
    const json& c = cases["cases"][i];
    std::vector<std::uint8_t> file = from_hex(c["hex"]);
    bool reference_accepts = c["accepted"];
    std::optional<SafetensorsHeader> header;
    std::string error;
    try {
      header = parse_safetensors_header(file, "case");
    } catch (const Error& e) {
      error = e.what();
    }
    SCOPED_TRACE("case " + std::to_string(i) + ": " + error +
                 (reference_accepts ? "" : " / reference: " + c["error"].get<std::string>()));
    if (header.has_value() == reference_accepts) {
      ++agreed;
      if (!header) continue;
      ASSERT_EQ(header->tensors.size(), c["tensors"].size());
      for (const auto& t : header->tensors) {
        const json& want = c["tensors"][t.name];
        EXPECT_EQ(dtype_name(t.dtype), want["dtype"].get<std::string>());
        EXPECT_EQ(t.shape, want["shape"].get<std::vector<std::int64_t>>());
        std::vector<std::uint8_t> bytes(
            file.begin() + static_cast<std::ptrdiff_t>(t.offset),
            file.begin() + static_cast<std::ptrdiff_t>(t.offset + t.nbytes));
        EXPECT_EQ(bytes, from_hex(want["hex"]));
      }
    } else if (reference_accepts) {
      // Deliberately stricter: duplicates, unknown entry keys, dtypes megadecode cannot use, and
      // dimensions beyond int64 (possible in the reference only next to a zero dimension).
      ++stricter;
      EXPECT_THAT(error, ::testing::AnyOf(::testing::HasSubstr("duplicate key"),
                                          ::testing::HasSubstr("unknown key"),
                                          ::testing::HasSubstr("unknown dtype"),
                                          ::testing::HasSubstr("does not fit in a signed 64-bit")));
    } else {
      // Deliberately laxer: gaps, trailing bytes and empty tensors between others.
      ++laxer;
      EXPECT_FALSE(covers_data_contiguously(*header));
    }
  }
  EXPECT_GT(agreed, static_cast<int>(cases["cases"].size()) * 8 / 10);
  std::printf("differential: %d agree, %d stricter, %d laxer (documented)\n", agreed, stricter,
              laxer);
}

}  // namespace
}  // namespace md
