// A model spread over MPI ranks, driven by rank 0 (`mpirun -np N megadecode run|chat|serve
// --tp N`): rank 0 owns the tokenizer, the terminal or the HTTP server and the scheduler, and
// sees the model as a RankStreamModel; the other ranks only follow (follow_rank_stream). Before
// rank 0 makes a call on its shard it broadcasts it — an opcode and its arguments: sequence ids,
// tokens — so that every rank makes the same call on its own shard in the same order, and their
// step programs meet in the same collectives.
//
// Sequences are named by ids rank 0 hands out. A state that rank 0 clones, resets or drops
// (the prefix cache and the scheduler do, sometimes off the engine's thread) is queued and
// announced before the next call. Rank 0 checks a call's inputs before announcing it (the checks
// every rank's shard would make), so a refused request is refused on rank 0 alone and the others
// never start it; a rank whose call still fails ends the job with its message (dist abort),
// since the others would wait for it in a collective forever.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "models/language_model.h"

namespace md {

class RankStreamModel final : public LanguageModel {
 public:
  // `shard`: rank 0's shard (loaded with options.ranks = &world). Announces the end of the
  // stream when destroyed. `other_ranks_decode_bytes`: Σ decode_weight_bytes() of ranks 1..
  // (gather_decode_weight_bytes), for the figures of what all ranks stream; 0: unknown.
  RankStreamModel(std::unique_ptr<LanguageModel> shard, dist::Communicator& world,
                  std::size_t other_ranks_decode_bytes = 0);
  ~RankStreamModel() override;

  std::string description() const override;
  int64_t vocab_size() const override { return shard_->vocab_size(); }
  int64_t max_context() const override { return shard_->max_context(); }
  std::vector<int32_t> stop_token_ids() const override { return shard_->stop_token_ids(); }
  // Rank 0's shard; the other ranks hold as much again each (their own heads).
  std::size_t state_bytes_per_token() const override { return shard_->state_bytes_per_token(); }
  std::size_t state_bytes_fixed() const override { return shard_->state_bytes_fixed(); }
  std::unique_ptr<SequenceState> new_sequence(int64_t capacity) const override;
  void forward(SequenceState& state, std::span<const int32_t> tokens, LogitRows rows,
               std::vector<float>& logits) override;
  void decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  bool split_invariant() const override { return shard_->split_invariant(); }
  bool can_rewind() const override { return shard_->can_rewind(); }
  void rewind(SequenceState& state, int64_t position) const override;
  bool set_executor(ExecutorKind executor) override;
  program::Program* decode_program(int64_t rows) override { return shard_->decode_program(rows); }
  // What all ranks stream: rank 0's shard and the others' one-row figure (exact for dense
  // models; a MoE step's other ranks are counted at their one-row estimate).
  std::size_t decode_weight_bytes() const override {
    return shard_->decode_weight_bytes() + other_ranks_decode_bytes_;
  }
  std::size_t last_step_weight_bytes() const override {
    const std::size_t mine = shard_->last_step_weight_bytes();
    return mine > 0 ? mine + other_ranks_decode_bytes_ : 0;
  }
  std::size_t weight_bytes() const override { return shard_->weight_bytes(); }
  bool supports_verify() const override { return shard_->supports_verify(); }
  void verify(SequenceState& state, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  void commit(SequenceState& state, int64_t rows_kept) override;
  void set_tap_layers(std::vector<int64_t> layers) override;
  const std::vector<float>& last_taps() const override { return shard_->last_taps(); }
  TargetView target_view() const override { return shard_->target_view(); }

  // The queue of announcements the next call sends first, and the sequence ids; shared with the
  // states, which may outlive the model (a server's scheduler drops its states after it).
  class Announcements;

 private:
  class State;
  // Sends the queued announcements, then this one.
  void announce(int64_t op, std::vector<int64_t> arguments) const;
  // Runs `call` on rank 0's shard; a failure there (after the inputs were checked) ends the job.
  template <typename Call>
  void on_shard(const char* what, Call&& call) const;

  std::unique_ptr<LanguageModel> shard_;
  dist::Communicator& world_;
  std::shared_ptr<Announcements> announcements_;
  std::size_t other_ranks_decode_bytes_;
};

// Σ over ranks 1.. of their shards' decode_weight_bytes(): a collective every rank calls once,
// after loading its shard (rank 0 passes the result to RankStreamModel).
std::size_t gather_other_ranks_decode_bytes(const LanguageModel& shard, dist::Communicator& world);

// Ranks 1..: makes the calls rank 0 announces on `shard` until it announces the end. A call that
// fails here ends the job with this rank's message.
void follow_rank_stream(LanguageModel& shard, dist::Communicator& world);

// Every rank's `identity` (binary version, model, options) compared at start-up: md::Error on
// every rank, naming the first rank that differs from rank 0, when they are not all the same.
void check_same_everywhere(dist::Communicator& world, const std::string& identity);

}  // namespace md
