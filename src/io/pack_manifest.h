// The manifest of a weight pack (`megadecode pack --tp N`, ARCHITECTURE.md "Weight packs"): which
// checkpoint it was made from, for how many tensor-parallel ranks, and where each rank's matrix
// slices lie in its rank file, with a content hash for each. It is read before anything is
// mapped, from a file anyone could have edited: the parser checks every field and every bound
// and throws md::Error naming the manifest for anything else.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace md {

inline constexpr std::string_view kPackFormat = "megadecode-pack";
inline constexpr int kPackVersion = 1;
inline constexpr std::string_view kPackManifestName = "manifest.json";
// Every slice starts on this boundary of its rank file (cache lines; 2-byte bf16 rows).
inline constexpr std::uint64_t kPackAlignment = 64;

// What a pack was made from (checkpoint_fingerprint.h).
struct PackSource {
  std::string name;         // the checkpoint's file or directory name
  std::string revision;     // the Hugging Face commit, when it came from the cache; else empty
  std::uint64_t bytes = 0;  // its files' total size
  std::string fingerprint;  // 16 hex digits
};

struct PackRange {
  std::int64_t begin = 0, end = 0;
};

// One matrix slice of a rank: rows [rows][cols] of `format`, each row_bytes long, densely at
// `offset` of the rank file.
struct PackTensor {
  std::string key;                // the shard's name for it ("layer 3 q_proj")
  std::string cut;                // "rows" or "columns"
  std::vector<PackRange> ranges;  // of the whole matrix's rows or columns, ascending, disjoint
  std::string format;             // "bf16", "Q4_1", … (kernels::WeightMatrix::format_name)
  std::int64_t rows = 0, cols = 0;
  std::uint64_t row_bytes = 0;
  std::uint64_t offset = 0;  // a multiple of kPackAlignment
  std::uint64_t bytes = 0;   // rows · row_bytes
  std::string xxh3;          // XXH3-64 of the bytes, 16 hex digits
};

struct PackRank {
  std::string file;  // a plain file name beside the manifest
  std::uint64_t bytes = 0;
  std::vector<PackTensor> tensors;  // keys unique within the rank
};

struct PackManifest {
  int version = kPackVersion;
  int tp = 0;
  PackSource source;
  std::vector<PackRank> ranks;  // tp of them
};

// Throws md::Error naming `origin` for anything but a manifest of this format and version whose
// slices lie inside their rank files.
PackManifest parse_pack_manifest(std::string_view text, std::string_view origin);
std::string pack_manifest_json(const PackManifest& manifest);

// 16 lowercase hex digits.
std::string hex64(std::uint64_t value);

}  // namespace md
