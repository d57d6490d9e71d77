#include "io/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "io_test_util.h"

namespace md {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;
using testing::make_safetensors;
using testing::pattern_bytes;
using testing::TempDir;
using testing::write_bytes;
using testing::write_text;

std::vector<std::string> names(const Checkpoint& checkpoint) {
  std::vector<std::string> result;
  for (const TensorView& view : checkpoint.tensors()) result.emplace_back(view.name);
  return result;
}

// Two shards as transformers writes them, plus a third file the index does not mention.
class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    write_bytes(dir.path() / "model-00001-of-00002.safetensors",
                make_safetensors({{"embed.weight", "BF16", {4, 2}, pattern_bytes(16, 1)},
                                  {"layers.0.w", "F8_E4M3", {2, 2}, pattern_bytes(4, 2)}}));
    write_bytes(dir.path() / "model-00002-of-00002.safetensors",
                make_safetensors({{"layers.0.scale", "F32", {2}, pattern_bytes(8, 3)},
                                  {"lm_head.weight", "BF16", {4, 2}, pattern_bytes(16, 4)}}));
    // Garbage, to prove that files the index does not name are never opened.
    testing::write_text(dir.path() / "stray.safetensors", "not a safetensors file");
  }

  void write_index(const std::string& weight_map) {
    write_text(dir.path() / "model.safetensors.index.json",
               R"({"metadata": {"total_size": 44}, "weight_map": )" + weight_map + "}");
  }

  static constexpr const char* kWeightMap = R"({
      "embed.weight": "model-00001-of-00002.safetensors",
      "layers.0.w": "model-00001-of-00002.safetensors",
      "layers.0.scale": "model-00002-of-00002.safetensors",
      "lm_head.weight": "model-00002-of-00002.safetensors"})";

  TempDir dir;
};

TEST(Checkpoint, SingleFileDirectory) {
  TempDir dir;
  auto w = pattern_bytes(12, 7);
  write_bytes(
      dir.path() / "model.safetensors",
      make_safetensors({{"w", "BF16", {2, 3}, w}, {"n", "F32", {3}, pattern_bytes(12, 1)}}));
  Checkpoint checkpoint(dir.str());
  EXPECT_EQ(checkpoint.layout(), CheckpointLayout::kSingleFile);
  EXPECT_THAT(names(checkpoint), ElementsAre("n", "w"));
  EXPECT_THAT(checkpoint.files(), ElementsAre(dir.str("model.safetensors")));
  EXPECT_EQ(checkpoint.at("w").file, dir.str("model.safetensors"));
  EXPECT_EQ(std::memcmp(checkpoint.at("w").data, w.data(), w.size()), 0);
  EXPECT_EQ(checkpoint.total_bytes(), 24u);
  EXPECT_THAT(checkpoint.parameter_counts(),
              ElementsAre(std::pair<const DType, std::uint64_t>(DType::kBF16, 6),
                          std::pair<const DType, std::uint64_t>(DType::kF32, 3)));
  EXPECT_THAT(error_of([&] { checkpoint.at("missing"); }),
              AllOf(HasSubstr(dir.str()), HasSubstr("no tensor \"missing\"")));

  // The same file opened by path.
  Checkpoint by_file(dir.str("model.safetensors"));
  EXPECT_EQ(by_file.size(), 2u);
}

TEST(Checkpoint, ViewsSurviveMovingTheCheckpoint) {
  TempDir dir;
  write_bytes(dir.path() / "model.safetensors",
              make_safetensors({{"w", "U8", {3}, pattern_bytes(3, 1)}}));
  Checkpoint original(dir.str());
  const TensorView* before = original.find("w");
  Checkpoint moved = std::move(original);
  ASSERT_NE(moved.find("w"), nullptr);
  EXPECT_EQ(moved.find("w")->data, before->data);
  EXPECT_EQ(moved.find("w")->name, "w");
}

TEST_F(ShardedCheckpoint, ReadsEveryTensorFromTheShardTheIndexNames) {
  write_index(kWeightMap);
  Checkpoint checkpoint(dir.str());
  EXPECT_EQ(checkpoint.layout(), CheckpointLayout::kIndexed);
  EXPECT_THAT(names(checkpoint),
              ElementsAre("embed.weight", "layers.0.scale", "layers.0.w", "lm_head.weight"));
  EXPECT_THAT(checkpoint.files(), ElementsAre(dir.str("model-00001-of-00002.safetensors"),
                                              dir.str("model-00002-of-00002.safetensors")));
  EXPECT_EQ(checkpoint.at("lm_head.weight").file, dir.str("model-00002-of-00002.safetensors"));
  EXPECT_EQ(checkpoint.at("lm_head.weight").data[0], pattern_bytes(1, 4)[0]);
  EXPECT_EQ(checkpoint.at("layers.0.w").dtype, DType::kF8E4M3);
  EXPECT_EQ(checkpoint.total_bytes(), 44u);
  EXPECT_EQ(checkpoint.parameter_counts().at(DType::kBF16), 16u);

  // The index path itself works too.
  EXPECT_EQ(Checkpoint(dir.str("model.safetensors.index.json")).size(), 4u);
}

TEST_F(ShardedCheckpoint, RejectsAnIndexEntryMissingFromItsShard) {
  write_index(R"({"embed.weight": "model-00002-of-00002.safetensors"})");
  EXPECT_THAT(error_of([&] { Checkpoint c(dir.str()); }),
              AllOf(HasSubstr(dir.str("model.safetensors.index.json")),
                    HasSubstr("maps tensor \"embed.weight\" to " +
                              dir.str("model-00002-of-00002.safetensors") +
                              ", but that file has no tensor of that name")));
}

TEST_F(ShardedCheckpoint, RejectsMissingShardsAndEscapingNames) {
  write_index(R"({"a": "model-00003-of-00003.safetensors"})");
  EXPECT_THAT(error_of([&] { Checkpoint c(dir.str()); }),
              HasSubstr("names shard \"model-00003-of-00003.safetensors\", which does not exist "
                        "(looked for " +
                        dir.str("model-00003-of-00003.safetensors") + ")"));
  write_index(R"({"a": "../model-00001-of-00002.safetensors"})");
  EXPECT_THAT(error_of([&] { Checkpoint c(dir.str()); }), HasSubstr("not a safe relative file"));
}

TEST_F(ShardedCheckpoint, LoadsTensorsTheIndexDoesNotList) {
  // transformers loads whole shards, so an unlisted tensor in a listed shard is kept (with a
  // warning) rather than silently dropped.
  write_index(R"({"embed.weight": "model-00001-of-00002.safetensors",
                  "lm_head.weight": "model-00002-of-00002.safetensors"})");
  Checkpoint checkpoint(dir.str());
  EXPECT_EQ(checkpoint.size(), 4u);
  EXPECT_TRUE(checkpoint.contains("layers.0.scale"));
}

TEST_F(ShardedCheckpoint, RejectsShardsThatDisagree) {
  write_bytes(dir.path() / "model-00002-of-00002.safetensors",
              make_safetensors({{"layers.0.scale", "F32", {2}, pattern_bytes(8, 3)},
                                {"embed.weight", "BF16", {4, 2}, pattern_bytes(16, 9)},
                                {"lm_head.weight", "BF16", {4, 2}, pattern_bytes(16, 4)}}));
  write_index(kWeightMap);
  EXPECT_THAT(error_of([&] { Checkpoint c(dir.str()); }),
              HasSubstr("tensor \"embed.weight\" is stored in both " +
                        dir.str("model-00001-of-00002.safetensors") + " and " +
                        dir.str("model-00002-of-00002.safetensors")));
}

TEST_F(ShardedCheckpoint, ReportsACorruptShardByName) {
  write_index(R"({"a": "stray.safetensors"})");
  EXPECT_THAT(error_of([&] { Checkpoint c(dir.str()); }),
              HasSubstr(dir.str("stray.safetensors") + ": header length"));
}

TEST(Checkpoint, FollowsSymlinksAsInTheHuggingFaceCache) {
  // Snapshots hold symlinks into blobs/; shard names resolve against the snapshot directory.
  TempDir dir;
  namespace fs = std::filesystem;
  write_bytes(dir.path() / "blobs" / "1111", make_safetensors({{"a", "U8", {2}, {7, 8}}}));
  write_bytes(dir.path() / "blobs" / "2222", make_safetensors({{"b", "I8", {1}, {9}}}));
  write_text(dir.path() / "blobs" / "3333",
             R"({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})");
  fs::path snapshot = dir.path() / "snapshots" / "abc";
  fs::create_directories(snapshot);
  fs::create_symlink("../../blobs/1111", snapshot / "model-1.safetensors");
  fs::create_symlink("../../blobs/2222", snapshot / "model-2.safetensors");
  fs::create_symlink("../../blobs/3333", snapshot / "model.safetensors.index.json");
  Checkpoint checkpoint(snapshot.string());
  EXPECT_EQ(checkpoint.layout(), CheckpointLayout::kIndexed);
  EXPECT_EQ(checkpoint.at("a").data[1], 8);
  EXPECT_EQ(checkpoint.at("b").file, (snapshot / "model-2.safetensors").string());
}

TEST(Checkpoint, SingleFileWinsOverAnIndex) {
  TempDir dir;
  write_bytes(dir.path() / "model.safetensors",
              make_safetensors({{"w", "U8", {1}, pattern_bytes(1, 1)}}));
  write_text(dir.path() / "model.safetensors.index.json", "broken, never read");
  Checkpoint checkpoint(dir.str());
  EXPECT_EQ(checkpoint.layout(), CheckpointLayout::kSingleFile);
}

TEST(Checkpoint, FallsBackToEveryFileInTheDirectory) {
  TempDir dir;
  write_bytes(dir.path() / "b.safetensors",
              make_safetensors({{"y", "I32", {2}, pattern_bytes(8, 1)}}));
  write_bytes(dir.path() / "a.safetensors",
              make_safetensors({{"x", "I64", {1}, pattern_bytes(8, 2)}}));
  testing::write_text(dir.path() / "config.json", "{}");
  std::filesystem::create_directories(dir.path() / "sub.safetensors");  // a directory: skipped
  Checkpoint checkpoint(dir.str());
  EXPECT_EQ(checkpoint.layout(), CheckpointLayout::kAllFiles);
  EXPECT_THAT(names(checkpoint), ElementsAre("x", "y"));
  EXPECT_THAT(checkpoint.files(), ElementsAre(dir.str("a.safetensors"), dir.str("b.safetensors")));

  write_bytes(dir.path() / "c.safetensors",
              make_safetensors({{"x", "I64", {1}, pattern_bytes(8, 2)}}));
  EXPECT_THAT(error_of([&] { Checkpoint c(dir.str()); }),
              HasSubstr("tensor \"x\" is stored in both " + dir.str("a.safetensors") + " and " +
                        dir.str("c.safetensors")));
}

TEST(Checkpoint, SaysWhatItLookedForWhenThereAreNoWeights) {
  TempDir dir;
  EXPECT_THAT(
      error_of([&] { Checkpoint c(dir.str()); }),
      AllOf(HasSubstr("no model weights found"), HasSubstr(dir.str("model.safetensors")),
            HasSubstr(dir.str("model.safetensors.index.json")), HasSubstr("*.safetensors")));
  EXPECT_THAT(error_of([&] { Checkpoint c(dir.str("nope")); }),
              HasSubstr(dir.str("nope") + ": no such checkpoint file or directory"));
}

}  // namespace
}  // namespace md
