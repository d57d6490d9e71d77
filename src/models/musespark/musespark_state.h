// One Muse Spark sequence's state: per layer the keys and values it attends to. A full (NoPE)
// layer keeps every position; a sliding layer keeps a ring of `sliding_window` + 8 slots
// (position p in slot p mod slots), so its memory does not grow with the context: the 8 spare
// slots hold what a block of verify rows overwrites until commit decides how many rows stay. Keys
// are stored after the QK norm (and RoPE on sliding layers), values as projected, in the KV cache
// type (bf16 or f32).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kv_cache.h"
#include "models/language_model.h"
#include "models/musespark/musespark_config.h"

namespace md {

// One layer's keys and values, [slots][kv_heads · head_dim] each, in bf16 or f32.
class MuseLayerKv {
 public:
  MuseLayerKv(int64_t slots, int64_t width, kernels::KvCacheType type)
      : slots_(slots), width_(width), type_(type) {}

  // Stores the row of `position` (slot position mod slots), rounded to bf16 in a bf16 cache.
  void write(int64_t position, const float* key, const float* value);
  // `n` elements from `offset` of a stored row as f32: in place for f32, converted into
  // `scratch` for bf16.
  const float* key(int64_t position, int64_t offset, int64_t n, float* scratch) const {
    return read(keys_f32_, keys_bf16_, position, offset, n, scratch);
  }
  const float* value(int64_t position, int64_t offset, int64_t n, float* scratch) const {
    return read(values_f32_, values_bf16_, position, offset, n, scratch);
  }
  std::size_t bytes() const;
  void clear();

 private:
  int64_t slot(int64_t position) const { return position % slots_; }
  // Makes room for `position` (a full layer's storage grows with the positions written).
  void reserve(int64_t position);
  const float* read(const std::vector<float>& f32, const std::vector<uint16_t>& bf16,
                    int64_t position, int64_t offset, int64_t n, float* scratch) const;

  int64_t slots_ = 0;  // positions held: the window (sliding) or the capacity (full)
  int64_t width_ = 0;  // kv_heads · head_dim
  kernels::KvCacheType type_;
  std::vector<float> keys_f32_, values_f32_;
  std::vector<uint16_t> keys_bf16_, values_bf16_;
};

class MuseSparkState final : public SequenceState {
 public:
  MuseSparkState(const MuseSparkConfig& config, int64_t capacity, kernels::KvCacheType kv_type);

  void reset() override;
  std::unique_ptr<SequenceState> clone() const override;
  std::size_t bytes() const override;

  MuseLayerKv& layer(int64_t l) { return layers_[static_cast<std::size_t>(l)]; }
  void advance(int64_t rows) { position_ += rows; }

  // Verify rows: the sequence holds `rows` unconfirmed positions until commit keeps some.
  void hold_verified(int64_t rows) { verified_rows_ = rows; }
  int64_t verified_rows() const { return verified_rows_; }
  // Keeps the first `kept` verified rows: the others' keys and values stay in their slots,
  // never read (attention reads positions up to the current one) and later overwritten.
  void commit(int64_t kept);

 private:
  std::vector<MuseLayerKv> layers_;
  int64_t verified_rows_ = 0;
};

}  // namespace md
