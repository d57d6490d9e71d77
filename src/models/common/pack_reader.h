// One tensor-parallel rank's matrix slices read from a weight pack (`megadecode pack`,
// ARCHITECTURE.md "Weight packs"). Opening checks the manifest against the run — the pack's TP
// size against the ranks, its source fingerprint against the checkpoint being loaded, the rank
// file's size against the manifest — and maps the rank file once. Each slice the shard asks for
// is then checked (the key exists; cut, ranges, format, shape and row length are what the shard
// rules give; the bytes match their XXH3 content hash) and handed out in place: no copy.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <unordered_map>

#include "base/mapped_file.h"
#include "io/pack_manifest.h"
#include "models/common/slice_source.h"

namespace md {

// `directory`'s manifest, checked for a run of `ranks` ranks of the checkpoint at `model_path`:
// md::Error saying which of them does not match.
PackManifest read_pack_manifest(const std::string& directory, const std::string& model_path,
                                int ranks);

class PackReader final : public shard::SliceSource {
 public:
  PackReader(const std::string& directory, const std::string& model_path, int rank, int ranks);
  // by_key_ points into manifest_.
  PackReader(const PackReader&) = delete;
  PackReader& operator=(const PackReader&) = delete;

  kernels::WeightMatrix slice(const kernels::WeightMatrix& whole,
                              const shard::SliceRequest& request, shard::OwnedBytes& owned,
                              const std::string& model) override;
  std::shared_ptr<const void> storage() const override { return file_; }

  // After the model is loaded: a pack holding slices the model did not ask for was made for
  // another model (md::Error naming some).
  void check_all_taken(const std::string& model) const;

 private:
  std::string directory_;
  int rank_;
  PackRank manifest_;
  std::unordered_map<std::string, const PackTensor*> by_key_;
  std::shared_ptr<const MappedFile> file_;
  std::set<std::string, std::less<>> taken_;
};

}  // namespace md
