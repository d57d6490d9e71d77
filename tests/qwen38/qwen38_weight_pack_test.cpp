// Weight packs (models/weight_pack.h) on the Qwen3.8 / Qwen3.5 fixtures: a model run from its pack
// gives bitwise the logits of the same ranks cutting their slices at load (bf16 safetensors with
// copied columns, a GGUF whose Q8_0 columns were strided views, a MoE model whose experts stay in
// the checkpoint, four ranks); the pack's bytes are what the ranks multiply (a slice rewritten
// with a matching hash changes the logits); and a pack that does not fit the run is refused with a
// message saying why: another checkpoint, another TP size, one rank, a corrupt or truncated rank
// file, a renamed slice, a missing manifest, a non-empty output directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../support/weight_pack_support.h"
#include "base/error.h"
#include "io/content_hash.h"
#include "io/pack_manifest.h"
#include "qwen38_test_util.h"

namespace md::test {
namespace {

namespace fs = std::filesystem;
using md::testing::expect_pack_round_trip;
using md::testing::greedy_logits;
using md::testing::on_ranks;
using md::testing::same_bits;
using md::testing::ScratchPath;

std::vector<int32_t> prompt_of(int64_t length) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i) ids.push_back(static_cast<int32_t>((i * 211 + 5) % 500));
  return ids;
}

std::string gguf(const std::string& file) {
  return std::string(MD_GOLDEN_DIR) + "/qwen35-gguf/" + file;
}

void quiet(int, std::uint64_t, std::uint64_t) {}

TEST(Qwen38WeightPack, RunsBitwiseAsSlicingAtLoad) {
  expect_pack_round_trip(qwen38_fixture_dir("tiny-qwen38"), 2, prompt_of(9), 3);
  expect_pack_round_trip(gguf("tiny-qwen35-tied.Q8_0.gguf"), 2, prompt_of(9), 3);
  expect_pack_round_trip(qwen38_fixture_dir("tiny-qwen35-moe"), 2, prompt_of(7), 2);
  expect_pack_round_trip(qwen38_fixture_dir("tiny-qwen35-tied"), 4, prompt_of(7), 2);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

PackManifest manifest_of(const ScratchPath& pack) {
  return parse_pack_manifest(read_file(pack.path() / kPackManifestName), "manifest");
}

// Loading `model` on `ranks` ranks from `pack` throws md::Error containing `message`.
void expect_refused(const std::string& model, int ranks, const std::string& pack,
                    const std::string& message) {
  try {
    on_ranks(model, ranks, pack);
    ADD_FAILURE() << "loaded; expected: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

// The pack's slices are what the ranks read: rank 1's lm_head slice negated in the rank file,
// with its hash updated so the pack stays consistent, changes the logits.
TEST(Qwen38WeightPack, TheRanksMultiplyThePacksBytes) {
  const std::string model = qwen38_fixture_dir("tiny-qwen38");
  ScratchPath pack;
  pack_model(model, 2, pack.str(), "", quiet);
  const std::vector<float> before = greedy_logits(*on_ranks(model, 2, pack.str()), prompt_of(5), 1);
  PackManifest manifest = manifest_of(pack);
  PackRank& rank = manifest.ranks[1];
  auto head = std::find_if(rank.tensors.begin(), rank.tensors.end(),
                           [](const PackTensor& t) { return t.key == "lm_head"; });
  ASSERT_NE(head, rank.tensors.end());
  ASSERT_EQ(head->format, "bf16");
  std::string bytes = read_file(pack.path() / rank.file);
  for (std::uint64_t i = head->offset + 1; i < head->offset + head->bytes; i += 2) {
    bytes[i] = static_cast<char>(bytes[i] ^ 0x80);  // each bf16's sign bit
  }
  head->xxh3 = hex64(content_hash(
      {reinterpret_cast<const std::uint8_t*>(bytes.data()) + head->offset, head->bytes}));
  write_file(pack.path() / rank.file, bytes);
  write_file(pack.path() / kPackManifestName, pack_manifest_json(manifest));
  const std::vector<float> after = greedy_logits(*on_ranks(model, 2, pack.str()), prompt_of(5), 1);
  EXPECT_FALSE(same_bits(after, before));
}

TEST(Qwen38WeightPack, RefusesAPackThatDoesNotFitTheRun) {
  const std::string model = qwen38_fixture_dir("tiny-qwen38");
  ScratchPath pack;
  pack_model(model, 2, pack.str(), "abc123", quiet);
  const PackManifest manifest = manifest_of(pack);
  EXPECT_EQ(manifest.source.revision, "abc123");

  expect_refused(qwen38_fixture_dir("tiny-qwen38-text"), 2, pack.str(), "was packed from");
  expect_refused(model, 1, pack.str(), "packed for --tp 2; this run has 1 rank");
  expect_refused(model, 4, pack.str(), "packed for --tp 2; this run has 4 ranks");
  expect_refused(model, 2, pack.str() + "/nowhere", "no manifest.json");

  const fs::path file = pack.path() / manifest.ranks[0].file;
  const std::string good = read_file(file);
  std::string corrupt = good;
  const PackTensor& some = manifest.ranks[0].tensors[3];
  corrupt[some.offset + some.bytes / 2] ^= 0x10;
  write_file(file, corrupt);
  expect_refused(model, 2, pack.str(), "does not match its content hash");
  write_file(file, good.substr(0, good.size() - 64));
  expect_refused(model, 2, pack.str(), "truncated");
  write_file(file, good);
  EXPECT_NO_THROW(on_ranks(model, 2, pack.str()));

  // A slice under another name: the model asks for one the pack lacks.
  PackManifest renamed = manifest;
  renamed.ranks[1].tensors[0].key = "layer 99 q_proj";
  write_file(pack.path() / kPackManifestName, pack_manifest_json(renamed));
  expect_refused(model, 2, pack.str(), "holds no slice");
  // A slice the model does not ask for (a copy of one it does, under a new name).
  PackManifest extra = manifest;
  extra.ranks[1].tensors.push_back(extra.ranks[1].tensors[0]);
  extra.ranks[1].tensors.back().key = "layer 99 q_proj";
  write_file(pack.path() / kPackManifestName, pack_manifest_json(extra));
  expect_refused(model, 2, pack.str(), "holds 1 slice(s) tiny-qwen38 did not ask for");
  // Another layout for the same name.
  PackManifest moved = manifest;
  for (PackTensor& t : moved.ranks[1].tensors) {
    if (t.cut == "rows" && t.ranges.size() == 1) {
      t.ranges[0].begin -= 1;
      t.ranges[0].end -= 1;
      break;
    }
  }
  write_file(pack.path() / kPackManifestName, pack_manifest_json(moved));
  expect_refused(model, 2, pack.str(), "another model or TP layout");
}

TEST(Qwen38WeightPack, WritesOnlyIntoANewOrEmptyDirectoryForTwoOrMoreRanks) {
  const std::string model = qwen38_fixture_dir("tiny-qwen38");
  ScratchPath pack;
  pack_model(model, 2, pack.str(), "", quiet);
  try {
    pack_model(model, 2, pack.str(), "", quiet);
    ADD_FAILURE() << "packed into a non-empty directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not empty"), std::string::npos) << e.what();
  }
  ScratchPath other;
  EXPECT_THROW(pack_model(model, 1, other.str(), "", quiet), Error);
  EXPECT_FALSE(fs::exists(other.path()));
  // More ranks than the model's Gated DeltaNet key heads: the family's own refusal, and nothing
  // of the pack left behind.
  EXPECT_THROW(pack_model(model, 64, other.str(), "", quiet), Error);
  EXPECT_FALSE(fs::exists(other.path()));  // the directory it made is gone again
  // Into an existing empty directory: emptied again, kept.
  fs::create_directories(other.path());
  EXPECT_THROW(pack_model(model, 64, other.str(), "", quiet), Error);
  EXPECT_TRUE(fs::is_directory(other.path()));
  EXPECT_TRUE(fs::is_empty(other.path()));
}

}  // namespace
}  // namespace md::test
