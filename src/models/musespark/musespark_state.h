// One Muse Spark sequence's state: per layer the keys and values it attends to. A full (NoPE)
// layer keeps every position; a sliding layer keeps a ring of `sliding_window` slots (position p
// in slot p mod window), so its memory does not grow with the context. Keys are stored after the
// QK norm (and RoPE on sliding layers), values as projected, rounded to bf16 when the KV cache type
// is bf16 (held in f32 by this reference state).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kv_cache.h"
#include "models/language_model.h"
#include "models/musespark/musespark_config.h"

namespace md {

struct MuseLayerKv {
  int64_t slots = 0;          // positions held: the window (sliding) or the capacity (full)
  int64_t width = 0;          // kv_heads · head_dim
  std::vector<float> keys;    // [slots][width], grown as positions are written
  std::vector<float> values;  // [slots][width]

  int64_t slot(int64_t position) const { return position % slots; }
  float* key(int64_t position) { return keys.data() + slot(position) * width; }
  float* value(int64_t position) { return values.data() + slot(position) * width; }
  const float* key(int64_t position) const { return keys.data() + slot(position) * width; }
  const float* value(int64_t position) const { return values.data() + slot(position) * width; }
  // Makes room for `position` (a full layer's storage grows with the positions written).
  void reserve(int64_t position);
};

class MuseSparkState final : public SequenceState {
 public:
  MuseSparkState(const MuseSparkConfig& config, int64_t capacity, kernels::KvCacheType kv_type);

  void reset() override;
  std::unique_ptr<SequenceState> clone() const override;
  std::size_t bytes() const override;

  kernels::KvCacheType kv_type() const { return kv_type_; }
  MuseLayerKv& layer(int64_t l) { return layers_[static_cast<std::size_t>(l)]; }
  void advance(int64_t rows) { position_ += rows; }

 private:
  kernels::KvCacheType kv_type_;
  std::vector<MuseLayerKv> layers_;
};

}  // namespace md
