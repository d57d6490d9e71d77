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
#include "program/program.h"

namespace md {

// The recurrent part of a sequence's state: what a verify row's snapshot holds.
struct KimiKdaSnapshot {
  std::vector<std::vector<float>> conv_history;
  std::vector<std::vector<float>> delta_state;
  bool operator==(const KimiKdaSnapshot&) const = default;
};

class KimiState final : public SequenceState, public program::StepState {
 public:
  // `bf16_cache`: the latent cache is KimiSequenceState::latent_cache_bf16 (else latent_cache).
  KimiState(const KimiK3Config& config, KimiSequenceState fresh, int64_t capacity, bool bf16_cache);

  void reset() override;
  std::unique_ptr<SequenceState> clone() const override;
  std::size_t bytes() const override;

  KimiSequenceState& data() { return data_; }
  const KimiSequenceState& data() const { return data_; }
  // The position after data() moved on (the reference advances its own counter).
  void sync_position() { position_ = data_.position; }

  // Verify rows: the KDA state before each row is kept (the last row's is the live state), so
  // that commit() can return to any count of kept rows. Row by row (the reference forward):
  // begin_verify(), then after_verify_row() after each row but the last. At once (a fused step,
  // whose KDA tasks write the snapshots through recurrent_snapshot()): begin_verify_rows(rows).
  // The snapshots' memory is kept for the next verify.
  void begin_verify();
  void after_verify_row();
  void begin_verify_rows(int64_t rows);
  // Room in every MLA layer's latent cache for positions up to `end` (a fused step writes its
  // rows' entries in place).
  void reserve_latent_rows(int64_t end);
  // What a fused step's instructions read and write (program::StepState).
  kernels::KvCache& kv_cache(int64_t slot) override;
  program::RecurrentState recurrent_state(int64_t slot) override;
  program::RecurrentState recurrent_snapshot(int64_t slot, int64_t rows) override;
  program::LatentRows latent_rows(int64_t slot) override;
  void end_verify(int64_t rows) { verified_rows_ = rows; }
  int64_t verified_rows() const { return verified_rows_; }
  // The KDA state after `rows` (0..verified_rows()) of the last verify's rows.
  KimiKdaSnapshot kda_after(int64_t rows) const;
  // Keeps the first `kept` verified rows: KDA back to the snapshot after them, the MLA cache
  // entries of the dropped rows cut off, the position back by the dropped rows.
  void commit(int64_t kept);
  // Forgets the verify bookkeeping without going back (a forward() keeps every row).
  void keep_all() { verified_rows_ = 0; }

 private:
  KimiKdaSnapshot kda() const;
  // The live KDA state copied into snapshots_[index] (reusing its memory).
  void snapshot_into(std::size_t index);

  const KimiK3Config* config_;
  KimiSequenceState data_;
  bool bf16_cache_ = true;
  // After 0, 1, … rows of the last verify (entries beyond verified_rows_ − 1 are spare memory).
  std::vector<KimiKdaSnapshot> snapshots_;
  int64_t verified_rows_ = 0;
  int64_t snapshot_rows_ = 0;  // entries the current verify has written
};

}  // namespace md
