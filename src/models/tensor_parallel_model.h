// A model spread over N in-process ranks (dist/in_process_group.h): N shards of one model, each
// loaded with its rank's communicator (ModelRunOptions::ranks) and run on its own thread, every
// call made on every rank at once. Rank 0's results are the model's: the ranks' all-reduces and
// gathers leave every rank the same bits. What `--tp N` runs on one host without MPI, and what
// the tests compare against one rank.
//
// A call that every rank refuses (bad tokens, a full context: each rank checks the same inputs)
// is rethrown as rank 0's error and the ranks go on. A rank that fails alone aborts the group, so
// that the others leave their collectives with its message instead of waiting forever; the
// group is then recovered once every rank has returned.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/in_process_group.h"
#include "models/language_model.h"

namespace md {

class TensorParallelModel final : public LanguageModel {
 public:
  using Loader = std::function<std::unique_ptr<LanguageModel>(const ModelRunOptions&)>;

  // `load` opens one rank's shard with the options it is given. options.threads are shared among
  // the ranks (at least one worker each). Throws md::Error for fewer than one rank, or whatever a
  // rank's load throws (naming the rank).
  TensorParallelModel(int ranks, const ModelRunOptions& options, const Loader& load);
  ~TensorParallelModel() override;

  int ranks() const { return static_cast<int>(models_.size()); }
  LanguageModel& rank(int r) { return *models_[static_cast<std::size_t>(r)]; }

  std::string description() const override;
  int64_t vocab_size() const override { return models_[0]->vocab_size(); }
  int64_t max_context() const override { return models_[0]->max_context(); }
  std::vector<int32_t> stop_token_ids() const override { return models_[0]->stop_token_ids(); }
  // Every rank's state memory: the ranks hold their own KV heads.
  std::size_t state_bytes_per_token() const override;
  std::size_t state_bytes_fixed() const override;
  std::unique_ptr<SequenceState> new_sequence(int64_t capacity) const override;
  void forward(SequenceState& state, std::span<const int32_t> tokens, LogitRows rows,
               std::vector<float>& logits) override;
  void decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  bool split_invariant() const override { return models_[0]->split_invariant(); }
  bool can_rewind() const override { return models_[0]->can_rewind(); }
  void rewind(SequenceState& state, int64_t position) const override;
  bool set_executor(ExecutorKind executor) override;
  program::Program* decode_program(int64_t rows) override {
    return models_[0]->decode_program(rows);
  }
  // Summed over the ranks: what the ranks stream together per step.
  std::size_t decode_weight_bytes() const override;
  std::size_t last_step_weight_bytes() const override;
  std::size_t weight_bytes() const override { return models_[0]->weight_bytes(); }
  bool supports_verify() const override { return models_[0]->supports_verify(); }
  void verify(SequenceState& state, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  void commit(SequenceState& state, int64_t rows_kept) override;
  // Every rank copies the same taps (after the sums across ranks): rank 0's are returned.
  void set_tap_layers(std::vector<int64_t> layers) override;
  const std::vector<float>& last_taps() const override { return models_[0]->last_taps(); }
  TargetView target_view() const override { return models_[0]->target_view(); }

 private:
  class Threads;
  class States;

  // body(r) on rank r's thread for every rank at once; returns when all have returned.
  void on_every_rank(const std::function<void(int)>& body);
  // Σ over the ranks of figure(rank's model).
  template <typename Figure>
  std::size_t sum_over_ranks(Figure figure) const;

  std::unique_ptr<dist::InProcessGroup> group_;
  std::vector<std::unique_ptr<LanguageModel>> models_;
  std::unique_ptr<Threads> threads_;
  std::vector<std::vector<float>> logits_;  // ranks 1.. write theirs here (the same as rank 0's)
};

}  // namespace md
