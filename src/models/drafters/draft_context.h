// A block drafter's memory of committed target positions (DFlash2, qwen38-dflash2.md §11.3,
// §11.5; DSpark, kimi-k3-dspark.md §13.3–§13.4): the context feature ctx_p = RMSNorm(fc · taps_p,
// hidden_norm) of every position, and per draft layer the context keys and values (K after k_norm
// and RoPE, V as projected; no input norm) of the positions the sliding window can still reach.
// Both drafters describe their tensors to it in a DraftContextSpec.
//
// Why both: ctx_p (hidden floats per position) is the smallest exact record of a position — its
// K/V over all layers is 2 · layers · kv_dim floats — so it is kept for every position, which
// lets truncate_context() rewind to any length. K/V are cached in a ring of `sliding_window`
// slots per layer, so a round computes K/V only for newly committed positions (the real window
// is 2048 positions; recomputing it every round would cost 2048 rows of k/v projections per
// layer). A slot whose position was truncated away is recomputed from ctx_p when next needed.
//
// Two ways in: append() computes the features of a batch of positions itself (a prompt's
// prefill) and leaves their K/V to prepare_keys() — with the pool's products (the reference) or,
// given a DraftContextProgram, as programs on the drafter's team —; the fused round
// (dflash2_step.h) instead extend()s the store by the few positions a verify step committed and
// writes their features and K/V itself, in the same program as the block forward, then records them
// with mark_keys().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention_runs.h"
#include "kernels/bf16_matrix.h"
#include "kernels/kv_ring.h"
#include "kernels/rope.h"
#include "program/program.h"

namespace md {

// What the store reads of a drafter: its widths, the fc projection and hidden norm, and per
// layer the key and value projections and the key norm (bf16, plain weights). Pointers into the
// drafter's weights, which must outlive the spec.
struct DraftContextLayer {
  const kernels::Bf16Matrix* k_proj = nullptr;
  const kernels::Bf16Matrix* v_proj = nullptr;
  const uint16_t* k_norm = nullptr;  // [head_dim]
};
struct DraftContextSpec {
  std::string family;  // for messages
  int64_t hidden_size = 0, num_taps = 0, kv_heads = 0, head_dim = 0, window = 0;
  float eps = 0;
  const kernels::Bf16Matrix* fc = nullptr;  // [hidden, taps · hidden]
  const uint16_t* hidden_norm = nullptr;    // [hidden]
  std::vector<DraftContextLayer> layers;

  int64_t fc_in_features() const { return num_taps * hidden_size; }
  int64_t kv_dim() const { return kv_heads * head_dim; }
  int64_t num_layers() const { return static_cast<int64_t>(layers.size()); }
};

class DraftContextProgram;

// To a fused round's window_attention it is the block's sequence state: kv_ring(layer).
class DraftContext final : public program::StepState {
 public:
  // The references must outlive the store. With `program` set, append() and prepare_keys() run
  // their rows as its programs; otherwise as products on `pool`.
  DraftContext(const DraftContextSpec& spec, const kernels::Rope& rope, ThreadPool* pool,
               DraftContextProgram* program = nullptr);

  int64_t length() const { return length_; }
  // `taps`: rows × (num_taps · hidden) floats for positions length() .. length()+rows-1.
  void append(std::span<const float> taps, int64_t rows);
  void truncate(int64_t length);
  // ctx_p (hidden floats), for tests.
  std::span<const float> feature(int64_t position) const;

  // Makes the K/V of positions [first, length()) present in every layer's ring; needs
  // length() - first <= sliding_window.
  void prepare_keys(int64_t first);
  // The keys and values of positions [first, end) of one layer and KV head, as at most two runs
  // (the ring wraps), in position order. prepare_keys(first) must have run since the last change.
  std::vector<kernels::KeyRun> key_runs(int64_t layer, int64_t kv_head, int64_t first,
                                        int64_t end) const;
  // The same into `out` (room for kMaxKeyRuns), without allocating; returns the run count.
  static constexpr int64_t kMaxKeyRuns = kernels::KvRing::kMaxRuns;
  int64_t key_runs(int64_t layer, int64_t kv_head, int64_t first, int64_t end,
                   kernels::KeyRun* out) const;

  // For a caller that computes new positions itself: adds `rows` positions after length() whose
  // features it then writes at feature_row(); their ring slots keep what they held (positions a
  // window older, out of every query's reach) until it writes K/V there and calls mark_keys().
  // Returns the first new position.
  int64_t extend(int64_t rows);
  float* feature_row(int64_t position) { return features_.data() + position * spec_.hidden_size; }
  int64_t slot(int64_t position) const { return position % capacity_; }
  // One layer's rings as the shared kernels see them.
  kernels::KvRing ring(int64_t layer) const;
  kernels::KvRing kv_ring(int64_t layer) override { return ring(layer); }
  kernels::KvCache& kv_cache(int64_t slot) override;
  // Records that every layer's ring now holds the K/V of positions [first, end).
  void mark_keys(int64_t first, int64_t end);

 private:
  void compute_keys(int64_t first, int64_t end);

  const DraftContextSpec& spec_;
  const kernels::Rope& rope_;
  ThreadPool* pool_;
  DraftContextProgram* program_;
  int64_t capacity_;  // ring slots per layer
  int64_t length_ = 0;
  std::vector<float> features_;         // [length][hidden]
  std::vector<int64_t> slot_position_;  // the position each ring slot holds, -1 when none
  // Per layer: [kv_heads][capacity][head_dim], so that one head's run of keys is contiguous.
  std::vector<std::vector<float>> keys_;
  std::vector<std::vector<float>> values_;
};

}  // namespace md
