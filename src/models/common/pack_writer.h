// The other side of pack_reader.h: cuts a rank's slices from the whole checkpoint as a load would
// (slice_source.h cut()), remembers them, and once the rank's model is loaded writes them densely
// into its rank file, each row its format's own length and each slice on a 64-byte boundary,
// hashing as it goes. The slices point into the loaded model's weights, which must be alive when
// write() runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "io/pack_manifest.h"
#include "models/common/slice_source.h"

namespace md {

class PackWriter final : public shard::SliceSource {
 public:
  kernels::WeightMatrix slice(const kernels::WeightMatrix& whole,
                              const shard::SliceRequest& request, shard::OwnedBytes& owned,
                              const std::string& model) override;

  // The bytes write() will put in its file (slices and their alignment padding).
  std::uint64_t file_bytes() const;

  // progress(bytes written, file_bytes()) now and then. Throws md::Error naming `file` when it
  // cannot be written.
  using Progress = std::function<void(std::uint64_t, std::uint64_t)>;
  PackRank write(const std::filesystem::path& file, const Progress& progress) const;

 private:
  struct Recorded {
    std::string key;
    shard::Cut cut;
    std::vector<dist::Range> ranges;
    kernels::WeightMatrix matrix;
  };
  std::vector<Recorded> recorded_;
  std::set<std::string, std::less<>> keys_;
};

}  // namespace md
