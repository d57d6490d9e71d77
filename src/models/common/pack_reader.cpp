#include "models/common/pack_reader.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "io/checkpoint_fingerprint.h"
#include "io/content_hash.h"
#include "models/common/tensor_shard.h"

namespace md {

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& file, const std::string& directory) {
  std::error_code error;
  if (!fs::is_regular_file(file, error)) {
    fail("{}: no {} here: not a pack written by megadecode pack", directory, kPackManifestName);
  }
  if (fs::file_size(file, error) > (std::uintmax_t{64} << 20)) {
    fail("{}: {} is larger than any pack's manifest", directory, kPackManifestName);
  }
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) fail("{}: cannot read {}", directory, kPackManifestName);
  return text.str();
}

std::string ranges_text(std::span<const dist::Range> ranges) {
  std::string out;
  for (const dist::Range& r : ranges)
    out += fmt::format("{}[{}, {})", out.empty() ? "" : " ", r.begin, r.end);
  return out;
}

std::string ranges_text(const std::vector<PackRange>& ranges) {
  std::vector<dist::Range> plain;
  for (const PackRange& r : ranges) plain.push_back({r.begin, r.end});
  return ranges_text(plain);
}

bool same_ranges(const std::vector<PackRange>& a, std::span<const dist::Range> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].begin != b[i].begin || a[i].end != b[i].end) return false;
  }
  return true;
}

}  // namespace

PackManifest read_pack_manifest(const std::string& directory, const std::string& model_path,
                                int ranks) {
  const fs::path file = fs::path(directory) / kPackManifestName;
  PackManifest manifest = parse_pack_manifest(read_text(file, directory),
                                              fmt::format("{}/{}", directory, kPackManifestName));
  if (manifest.tp != ranks && ranks == 1) {
    fail(
        "{} was packed for --tp {}; this run has 1 rank (run with --tp {}, or without --weights "
        "and $QWEN_PACKED_WEIGHTS)",
        directory, manifest.tp, manifest.tp);
  }
  if (manifest.tp != ranks) {
    fail(
        "{} was packed for --tp {}; this run has {} ranks (write a pack with megadecode pack "
        "--tp {})",
        directory, manifest.tp, ranks, ranks);
  }
  const CheckpointFingerprint source = fingerprint_checkpoint(model_path);
  if (source.fingerprint != manifest.source.fingerprint || source.bytes != manifest.source.bytes) {
    const std::string revision =
        manifest.source.revision.empty() ? "" : fmt::format(" at {}", manifest.source.revision);
    fail(
        "{} was packed from {}{} ({} bytes, fingerprint {}), not from {} ({} bytes, fingerprint "
        "{}): a pack loads only with the checkpoint it was made from",
        directory, manifest.source.name, revision, manifest.source.bytes,
        manifest.source.fingerprint, source.name, source.bytes, source.fingerprint);
  }
  return manifest;
}

PackReader::PackReader(const std::string& directory, const std::string& model_path, int rank,
                       int ranks)
    : directory_(directory), rank_(rank) {
  PackManifest manifest = read_pack_manifest(directory, model_path, ranks);
  manifest_ = std::move(manifest.ranks.at(static_cast<std::size_t>(rank)));
  for (const PackTensor& t : manifest_.tensors) by_key_.emplace(t.key, &t);
  const fs::path file = fs::path(directory) / manifest_.file;
  std::error_code error;
  if (!fs::is_regular_file(file, error)) {
    fail("{}: rank {}'s file {} is missing", directory, rank, manifest_.file);
  }
  file_ = std::make_shared<const MappedFile>(file.string());
  if (file_->size() != manifest_.bytes) {
    fail(
        "{}: {} is {} bytes but the manifest says {}: truncated or replaced (write the pack "
        "again)",
        directory, manifest_.file, file_->size(), manifest_.bytes);
  }
}

kernels::WeightMatrix PackReader::slice(const kernels::WeightMatrix& whole,
                                        const shard::SliceRequest& request, shard::OwnedBytes&,
                                        const std::string& model) {
  auto it = by_key_.find(request.key);
  if (it == by_key_.end()) {
    fail(
        "{}: rank {} holds no slice \"{}\" of {}: the pack was made for another model (or by "
        "another megadecode version: pack it again)",
        directory_, rank_, request.key, model);
  }
  const PackTensor& t = *it->second;
  const bool by_rows = request.cut == shard::Cut::kRows;
  const int64_t rows = by_rows ? shard::covered(request.ranges) : whole.rows;
  const int64_t cols = by_rows ? whole.cols : shard::covered(request.ranges);
  const std::size_t row_bytes = shard::dense_row_bytes(whole, cols);
  if (t.cut != shard::cut_name(request.cut) || !same_ranges(t.ranges, request.ranges) ||
      t.format != shard::stored_format(whole) || t.rows != rows || t.cols != cols ||
      t.row_bytes != row_bytes) {
    fail(
        "{}: rank {}'s slice \"{}\" is {} {} of a {} [{}, {}] matrix, but {} asks for {} {} of a "
        "{} [{}, {}] one: the pack was made for another model or TP layout (or by another "
        "megadecode version: pack it again)",
        directory_, rank_, request.key, t.cut, ranges_text(t.ranges), t.format, t.rows, t.cols,
        model, shard::cut_name(request.cut), ranges_text(request.ranges),
        shard::stored_format(whole), rows, cols);
  }
  if (!taken_.insert(request.key).second) {
    fail("{}: {} asks for slice \"{}\" twice", directory_, model, request.key);
  }
  const std::uint8_t* data = file_->data() + t.offset;
  if (hex64(content_hash({data, t.bytes})) != t.xxh3) {
    fail(
        "{}: slice \"{}\" in {} does not match its content hash: the pack is corrupt (write it "
        "again)",
        directory_, request.key, manifest_.file);
  }
  kernels::WeightMatrix m = whole;
  m.data = data;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = row_bytes;
  m.packed = nullptr;
  return m;
}

void PackReader::check_all_taken(const std::string& model) const {
  std::vector<std::string> left;
  for (const PackTensor& t : manifest_.tensors) {
    if (!taken_.contains(t.key)) left.push_back(fmt::format("\"{}\"", t.key));
  }
  if (left.empty()) return;
  if (left.size() > 5) left.resize(5);
  fail(
      "{}: rank {} holds {} slice(s) {} did not ask for ({}): the pack was made for another model "
      "(or by another megadecode version: pack it again)",
      directory_, rank_, manifest_.tensors.size() - taken_.size(), model, fmt::join(left, ", "));
}

}  // namespace md
