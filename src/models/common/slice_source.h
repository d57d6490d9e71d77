// Where a tensor-parallel rank's matrix slices come from: cut from the whole checkpoint at load
// (slice_at_load(), the default), cut and recorded for a pack (pack_writer.h, `megadecode pack`),
// or read from a pack made before (pack_reader.h, `--weights DIR`). The sharding rules
// (tensor_shard.h, the families' *_tensor_shard.cpp) decide what each rank keeps; a source only
// supplies the bytes, so a pack and a cut give a rank the same matrix, bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dist/partition.h"
#include "kernels/weight_matrix.h"

namespace md::shard {

// A column-parallel matrix keeps some output rows; a row-parallel one some input columns.
enum class Cut : std::uint8_t { kRows, kColumns };
std::string_view cut_name(Cut cut);  // "rows", "columns"

// One slice a rank's shard asks for: `key` names the matrix within its model ("layer 3 q_proj"),
// the same on every rank and for every file name the checkpoint may have.
struct SliceRequest {
  std::string key;
  Cut cut = Cut::kRows;
  std::span<const dist::Range> ranges;
};

using OwnedBytes = std::vector<std::unique_ptr<std::uint8_t[]>>;

class SliceSource {
 public:
  virtual ~SliceSource() = default;
  // `whole` cut as `request` says (a view into `whole`, a copy kept in `owned`, or bytes the
  // source keeps alive through storage()). Throws md::Error naming `model` and the key.
  virtual kernels::WeightMatrix slice(const kernels::WeightMatrix& whole,
                                      const SliceRequest& request, OwnedBytes& owned,
                                      const std::string& model) = 0;
  // What the slices point into beyond `whole` and `owned`, for the rank's weights to keep.
  virtual std::shared_ptr<const void> storage() const { return nullptr; }
};

SliceSource& slice_at_load();

// A shard's hand on its source (null: cut at load): the model's name for messages and where
// copies go.
class Slicer {
 public:
  Slicer(SliceSource* source, OwnedBytes& owned, std::string model)
      : source_(source != nullptr ? *source : slice_at_load()),
        owned_(owned),
        model_(std::move(model)) {}

  kernels::WeightMatrix rows(const kernels::WeightMatrix& w, std::span<const dist::Range> ranges,
                             std::string key) {
    return source_.slice(w, {std::move(key), Cut::kRows, ranges}, owned_, model_);
  }
  kernels::WeightMatrix columns(const kernels::WeightMatrix& w, std::span<const dist::Range> ranges,
                                std::string key) {
    return source_.slice(w, {std::move(key), Cut::kColumns, ranges}, owned_, model_);
  }
  kernels::WeightMatrix rows(const kernels::WeightMatrix& w, const dist::Range& range,
                             std::string key) {
    return rows(w, std::span<const dist::Range>(&range, 1), std::move(key));
  }
  kernels::WeightMatrix columns(const kernels::WeightMatrix& w, const dist::Range& range,
                                std::string key) {
    return columns(w, std::span<const dist::Range>(&range, 1), std::move(key));
  }
  std::shared_ptr<const void> storage() const { return source_.storage(); }

 private:
  SliceSource& source_;
  OwnedBytes& owned_;
  std::string model_;
};

// slice_at_load() cuts each slice from the whole matrix (tensor_shard.h rows_of / columns_of).
kernels::WeightMatrix cut(const kernels::WeightMatrix& whole, const SliceRequest& request,
                          OwnedBytes& owned, const std::string& model);

// The stored format's name as a pack records it, whatever the matrix's input mode: "bf16" for bf16
// tensors, the ggml type for GGUF blocks ("Q4_1", "BF16").
std::string stored_format(const kernels::WeightMatrix& w);

// The bytes one row of `like`'s format takes when its `cols` elements lie densely (a pack's
// layout; a view into a checkpoint may keep a longer stride).
std::size_t dense_row_bytes(const kernels::WeightMatrix& like, int64_t cols);

}  // namespace md::shard
