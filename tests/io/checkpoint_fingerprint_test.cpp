// A checkpoint's fingerprint (io/checkpoint_fingerprint.h) is stable for the same bytes and moves
// with what tells checkpoints apart: the header, the size, the data as a fine-tune changes it, a
// file added to a directory. (A change of a few bytes between its samples is not seen: the
// header says so; a pack's own slices carry full hashes.)
#include "io/checkpoint_fingerprint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/error.h"
#include "io_test_util.h"

namespace md {
namespace {

using testing::TempDir;
using testing::write_bytes;

std::vector<std::uint8_t> file_of(std::size_t size, std::uint8_t seed) {
  std::vector<std::uint8_t> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(i * 31 + seed);
  return bytes;
}

TEST(CheckpointFingerprint, SameBytesSameFingerprintAndEachDifferenceMovesIt) {
  TempDir dir;
  const std::size_t size = (std::size_t{3} << 20) + 123;
  const std::vector<std::uint8_t> base = file_of(size, 1);
  write_bytes(dir.path() / "a.gguf", base);
  write_bytes(dir.path() / "b.gguf", base);
  const CheckpointFingerprint a = fingerprint_checkpoint(dir.str("a.gguf"));
  EXPECT_EQ(a.bytes, size);
  EXPECT_EQ(a.name, "a.gguf");
  EXPECT_EQ(a.fingerprint.size(), 16u);
  EXPECT_EQ(fingerprint_checkpoint(dir.str("a.gguf")).fingerprint, a.fingerprint);

  std::vector<std::uint8_t> header = base;
  header[100] ^= 1;  // a tensor's offset or shape in the header
  write_bytes(dir.path() / "b.gguf", header);
  EXPECT_NE(fingerprint_checkpoint(dir.str("b.gguf")).fingerprint,
            fingerprint_checkpoint(dir.str("a.gguf")).fingerprint);

  std::vector<std::uint8_t> tuned = base;
  for (std::size_t i = std::size_t{1} << 20; i < size; i += 2) tuned[i] ^= 0x40;  // every weight
  write_bytes(dir.path() / "b.gguf", tuned);
  const CheckpointFingerprint b = fingerprint_checkpoint(dir.str("b.gguf"));
  EXPECT_EQ(b.bytes, a.bytes);
  EXPECT_NE(b.fingerprint, a.fingerprint);

  std::vector<std::uint8_t> longer = base;
  longer.push_back(0);
  write_bytes(dir.path() / "b.gguf", longer);
  EXPECT_NE(fingerprint_checkpoint(dir.str("b.gguf")).bytes, a.bytes);
}

TEST(CheckpointFingerprint, DirectoriesCountTheirWeightFilesOnly) {
  TempDir dir;
  write_bytes(dir.path() / "config.json", file_of(200, 2));
  write_bytes(dir.path() / "model.safetensors", file_of(5000, 3));
  const CheckpointFingerprint before = fingerprint_checkpoint(dir.str());
  EXPECT_EQ(before.bytes, 5200u);
  write_bytes(dir.path() / "README.md", file_of(70, 4));  // not a weight file
  EXPECT_EQ(fingerprint_checkpoint(dir.str()).fingerprint, before.fingerprint);
  write_bytes(dir.path() / "model-2.safetensors", file_of(10, 5));
  EXPECT_NE(fingerprint_checkpoint(dir.str()).fingerprint, before.fingerprint);
  EXPECT_EQ(fingerprint_checkpoint(dir.str() + "/").name, fingerprint_checkpoint(dir.str()).name);
}

TEST(CheckpointFingerprint, RefusesWhatIsNoCheckpoint) {
  TempDir dir;
  EXPECT_THROW(fingerprint_checkpoint(dir.str("missing.gguf")), Error);
  EXPECT_THROW(fingerprint_checkpoint(dir.str()), Error);  // empty directory
}

}  // namespace
}  // namespace md
