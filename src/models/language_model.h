// What the engine needs from a causal language model: per-sequence state and a forward pass that
// appends tokens to a sequence and returns logits. Every family implements it; the engine (run,
// chat, serve) is written against it alone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "kernels/bf16_matrix.h"
#include "kernels/kv_cache.h"
#include "models/drafters/speculative_drafter.h"
#include "program/executor.h"

namespace md {

namespace shard {
class SliceSource;  // models/common/slice_source.h
}

// Element type of attention KV caches. Bf16 halves the memory; f32 is for exactness tests.
using KvCacheType = kernels::KvCacheType;

// How decode steps run (program/executor.h): the fused program, op by op, or the reference.
using ExecutorKind = program::ExecutorKind;

// The dense matrices as the checkpoint stores them, or quantised at load to int8 with a scale per
// output row (kernels/int8_rows.h; muse_spark only, the seed's default path: half the bytes).
enum class DenseWeights : std::uint8_t { kAsStored, kInt8 };

struct ModelRunOptions {
  int threads = 0;  // <= 0: one per hardware thread
  KvCacheType kv_cache = KvCacheType::kBf16;
  ExecutorKind executor = ExecutorKind::kMega;
  // What the model's bf16 weights multiply (kernels/bf16_matrix.h); kBf16 is refused at load
  // where it cannot run (kernels::check_matmul_inputs).
  kernels::MatmulInputs matmul_inputs = kernels::MatmulInputs::kF32;
  DenseWeights dense_weights = DenseWeights::kAsStored;
  // The most prompt tokens one fused prefill program run takes (llama.cpp's micro-batch): longer
  // prompts run as chunks of this many. Llama's results do not depend on it; Qwen's chunked delta
  // rule rounds by where its chunks start, so Qwen splits prompts at it on every executor (the
  // reference included) to keep them equal. Families whose prefill is not a program ignore it.
  int64_t prefill_rows = 256;
  // This process's rank of a tensor-parallel model (dist/communicator.h): the model loads its
  // shard of the weights and its steps sum and gather across the ranks; every rank must then
  // make the same calls in the same order. Null (or one rank): the whole model. Families without
  // tensor parallelism refuse more than one rank.
  dist::Communicator* ranks = nullptr;
  // Where such a rank's weight slices come from (models/common/slice_source.h): null, cut from
  // the checkpoint at load; else a pack's rank (pack_reader.h) or a pack being written.
  shard::SliceSource* slices = nullptr;
};

// Throws md::Error naming `model` when `options` ask for a dense-weight quantisation its family
// does not offer.
void require_stored_dense_weights(DenseWeights dense, const std::string& model);
inline void require_stored_dense_weights(const ModelRunOptions& options, const std::string& model) {
  require_stored_dense_weights(options.dense_weights, model);
}
// Throws md::Error naming `model` when tensor-parallel ranks (options.ranks) are to run the
// reference executor: a rank's shard runs the step programs only.
void require_step_programs(const ModelRunOptions& options, const std::string& model);

// The state of one sequence: everything earlier tokens left behind (KV cache, recurrent and conv
// states) and how many tokens it holds. Capacity is fixed when it is created.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  int64_t position() const { return position_; }
  int64_t capacity() const { return capacity_; }
  // Forgets every token (states back to zero; KV blocks back to the pool).
  virtual void reset() = 0;
  // An independent copy (used for snapshots and shared prefills): KV blocks are shared until
  // either side writes into one (kernels::KvCache copies on write).
  virtual std::unique_ptr<SequenceState> clone() const = 0;
  virtual std::size_t bytes() const = 0;
  // The KV blocks among bytes() (kernels::KvCache::append_blocks), which copies share: a holder
  // of many copies counts each block once. None by default (then all of bytes() is its own).
  virtual void append_blocks(std::vector<std::pair<const void*, std::size_t>>& out) const {
    (void)out;
  }

 protected:
  SequenceState(int64_t capacity) : capacity_(capacity) {}
  int64_t position_ = 0;
  int64_t capacity_ = 0;
};

enum class LogitRows { kLast, kAll };

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  virtual std::string description() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The longest sequence the model's configuration allows.
  virtual int64_t max_context() const = 0;
  // Token ids that end generation (eos/eot from the model's configuration files).
  virtual std::vector<int32_t> stop_token_ids() const = 0;
  // State memory: bytes that grow with each token of context and bytes per sequence regardless.
  virtual std::size_t state_bytes_per_token() const = 0;
  virtual std::size_t state_bytes_fixed() const = 0;

  virtual std::unique_ptr<SequenceState> new_sequence(int64_t capacity) const = 0;

  // Appends `tokens` to the sequence (positions state.position() onward) and writes f32 logits to
  // `logits`: [1][vocab] for the last token or [tokens.size()][vocab] for every token. Throws
  // md::Error, before changing anything, when the tokens do not fit in the state's capacity or an
  // id is outside the vocabulary.
  virtual void forward(SequenceState& state, std::span<const int32_t> tokens, LogitRows rows,
                       std::vector<float>& logits) = 0;

  // One decode step for independent sequences, one new token each (distinct states): writes
  // [states.size()][vocab] logits. The default runs forward() per sequence; families with a
  // megakernel program run all rows in one step.
  virtual void decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
                      std::vector<float>& logits);

  // Whether a token sequence's state and logits have the same bits however it is split into
  // forward() calls and decode() steps: then a prefix cache may resume a prompt from a state
  // taken anywhere (the end of an earlier prompt or answer). Otherwise only from states taken
  // at the same prefill-chunk boundaries a cold prefill has (engine/prefix_cache.h).
  virtual bool split_invariant() const { return false; }
  // Whether rewind() works: a state can go back to an earlier position (a KV cache can; a
  // recurrent state holds no earlier positions).
  virtual bool can_rewind() const { return false; }
  // Forgets the tokens at positions >= `position` (0..state.position()), so that the sequence
  // continues from there. Throws md::Error where !can_rewind().
  virtual void rewind(SequenceState& state, int64_t position) const;

  // Switches how decode steps run; false when the family has no such executor (every family
  // has the reference).
  virtual bool set_executor(ExecutorKind executor) { return executor == ExecutorKind::kReference; }
  // The fused program a decode step of `rows` independent sequences runs (built now if it was
  // not yet), for listings and profiles; null for families without one.
  virtual program::Program* decode_program(int64_t rows) {
    (void)rows;
    return nullptr;
  }
  // Weight bytes one decode step streams (for bandwidth figures); 0 when unknown.
  virtual std::size_t decode_weight_bytes() const { return 0; }
  // Weight bytes the last decode() read, each expert it ran counted once (rows of a MoE step may
  // choose different experts, so more rows read more; a reference forward per row reads
  // everything per row); 0 for families that report only decode_weight_bytes().
  virtual std::size_t last_step_weight_bytes() const { return 0; }
  // All weight bytes the model keeps resident (mapped or in memory); 0 when unknown.
  virtual std::size_t weight_bytes() const { return 0; }

  // Speculative decoding. Families with verify rows override all of these; the defaults refuse
  // with an md::Error that names the family.
  virtual bool supports_verify() const { return false; }
  // Verify rows: `tokens` at the sequence's next positions in one step, logits for every row;
  // the sequence holds all rows until commit() keeps the first `rows_kept` (0..rows).
  virtual void verify(SequenceState& state, std::span<const int32_t> tokens,
                      std::vector<float>& logits);
  virtual void commit(SequenceState& state, int64_t rows_kept);
  // The 0-based layers whose post-layer residuals every forward()/verify() copies out, and those
  // copies for the rows of the last call, [rows][layers.size() * hidden].
  virtual void set_tap_layers(std::vector<int64_t> layers);
  virtual const std::vector<float>& last_taps() const;
  // The embedding and output head a drafter borrows, and the geometry it is checked against.
  virtual TargetView target_view() const;

 protected:
  // Throws md::Error, naming what is wrong, unless `tokens` (at least one) fit in the state's
  // capacity after its position and every id is below `vocab_size`: forward()'s precondition.
  static void check_append(const SequenceState& state, std::span<const int32_t> tokens,
                           int64_t vocab_size);
  // Throws md::Error unless every tap layer is one of the model's `num_layers` and none is listed
  // twice (a fused step copies a layer's residual to its first slot only): set_tap_layers()'
  // precondition.
  static void check_tap_layers(std::span<const int64_t> layers, int64_t num_layers);
  // Throws md::Error unless a verify left `verified_rows` (> 0) on the sequence and `rows_kept`
  // is one of 0..verified_rows: commit()'s precondition.
  static void check_commit(int64_t verified_rows, int64_t rows_kept);
  // decode() as one forward() per sequence; `after_row(i)` runs after sequence i's forward (a
  // family keeps per-row outputs there, e.g. the drafter taps each forward replaces).
  void decode_each(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
                   std::vector<float>& logits, const std::function<void(std::size_t)>& after_row);
};

}  // namespace md
