// One Kimi K3 sequence as the engine holds it (kimi-k3-dspark.md §6.1, §7.2, §11, §12): the
// reference's per-layer state (KDA short-conv history and delta-rule state, the MLA latent cache)
// plus what verify rows need for rollback: the KDA state after every verified row but the last.
// KDA keeps no earlier positions, so a sequence cannot rewind; only commit() after verify rows
// goes back, to a snapshot.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "models/kimi/kimi_config.h"
#include "models/kimi/kimi_reference.h"
#include "models/language_model.h"

namespace md {

// The recurrent part of a sequence's state: what a verify row's snapshot holds.
struct KimiKdaSnapshot {
  std::vector<std::vector<float>> conv_history;
  std::vector<std::vector<float>> delta_state;
  bool operator==(const KimiKdaSnapshot&) const = default;
};

class KimiState final : public SequenceState {
 public:
  KimiState(const KimiK3Config& config, KimiSequenceState fresh, int64_t capacity);

  void reset() override;
  std::unique_ptr<SequenceState> clone() const override;
  std::size_t bytes() const override;

  KimiSequenceState& data() { return data_; }
  const KimiSequenceState& data() const { return data_; }
  // The position after data() moved on (the reference advances its own counter).
  void sync_position() { position_ = data_.position; }

  // Verify rows: the KDA state before each row is kept (the last row's is the live state), so
  // that commit() can return to any count of kept rows.
  void begin_verify();
  void after_verify_row();  // call after each row but the last
  void end_verify(int64_t rows) { verified_rows_ = rows; }
  int64_t verified_rows() const { return verified_rows_; }
  // The KDA state after `rows` (0..verified_rows()) of the last verify's rows.
  KimiKdaSnapshot kda_after(int64_t rows) const;
  // Keeps the first `kept` verified rows: KDA back to the snapshot after them, the MLA cache
  // entries of the dropped rows cut off, the position back by the dropped rows.
  void commit(int64_t kept);
  // Forgets the verify bookkeeping without going back (a forward() keeps every row).
  void keep_all() {
    snapshots_.clear();
    verified_rows_ = 0;
  }

 private:
  KimiKdaSnapshot kda() const;

  const KimiK3Config* config_;
  KimiSequenceState data_;
  std::vector<KimiKdaSnapshot> snapshots_;  // after 0, 1, … rows of the last verify
  int64_t verified_rows_ = 0;
};

}  // namespace md
