// A block drafter's context rows of a prompt as one program on the drafter's team (the prefill
// of draft_context.h): up to kMaxRows positions' features — fc over their taps, then
// hidden_norm — and, in a separate run, the keys and values of up to kMaxRows positions of the
// window — k_proj and v_proj of their features for every layer, then k_norm, RoPE and the ring
// (kRingAppend, one task per KV head). Each layer's ring tasks wait only for the tiles of their
// head, so the next layer's weights stream while they run.
//
// Bitwise what DraftContext's pooled products give (its reference): kernels::matmul_tile reduces
// every output in an order that depends neither on the tile split nor on the row count, and the
// ring rows go through the function a fused round's window attention stores its new rows with.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/rope.h"
#include "models/drafters/draft_context.h"
#include "program/program.h"

namespace md {

class DraftContextProgram {
 public:
  // The most positions one run takes.
  static constexpr int64_t kMaxRows = 64;
  using Run = std::function<void(program::Program&)>;

  // Built for `workers` workers; `run` executes a step of the program (the drafter's team). The
  // references must outlive this.
  DraftContextProgram(const DraftContextSpec& spec, const kernels::Rope& rope, int workers,
                      Run run);

  // The features of positions [first, first + rows) (rows <= kMaxRows) of `context` from their
  // taps ([rows][taps · hidden]) into context.feature_row(first).
  void features(DraftContext& context, const float* taps, int64_t first, int64_t rows);
  // The keys and values of positions [first, first + rows) of `context`, whose features are
  // present, into every layer's ring.
  void keys(DraftContext& context, int64_t first, int64_t rows);

  // Runs so far (tests check that the program, not the pooled path, ran).
  int64_t runs() const { return runs_; }

 private:
  void run_once(DraftContext& context, int64_t position, int64_t feature_rows, int64_t key_rows);

  Run run_;
  std::unique_ptr<program::Program> program_;
  std::vector<std::vector<float>> k_, v_;  // per layer, [kMaxRows][kv_dim]
  program::BufferId taps_ = program::kNoBuffer, features_ = program::kNoBuffer;
  program::BufferId key_features_ = program::kNoBuffer;
  int64_t runs_ = 0;
};

}  // namespace md
