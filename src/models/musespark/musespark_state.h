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
#include "kernels/kv_rows.h"
#include "models/language_model.h"
#include "models/musespark/musespark_config.h"
#include "program/program.h"

namespace md {

class MuseSparkState final : public SequenceState, public program::StepState {
 public:
  MuseSparkState(const MuseSparkConfig& config, int64_t capacity, kernels::KvCacheType kv_type);

  void reset() override;
  std::unique_ptr<SequenceState> clone() const override;
  std::size_t bytes() const override;

  kernels::KvRows& layer(int64_t l) { return layers_[static_cast<std::size_t>(l)]; }
  // The fused step's view of the same storage (row_attention).
  kernels::KvRows& kv_rows(int64_t l) override { return layer(l); }
  kernels::KvCache& kv_cache(int64_t slot) override;
  void advance(int64_t rows) { position_ += rows; }

  // Verify rows: the sequence holds `rows` unconfirmed positions until commit keeps some.
  void hold_verified(int64_t rows) { verified_rows_ = rows; }
  int64_t verified_rows() const { return verified_rows_; }
  // Keeps the first `kept` verified rows: the others' keys and values stay in their slots,
  // never read (attention reads positions up to the current one) and later overwritten.
  void commit(int64_t kept);

 private:
  std::vector<kernels::KvRows> layers_;
  int64_t verified_rows_ = 0;
};

}  // namespace md
