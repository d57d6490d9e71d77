// The shared layer library's lowering side: what every family's step builder calls to turn its
// layer order into program instructions (projection tiles with a norm prologue and a residual
// epilogue, gated MLP, attention per KV head, lm_head with per-tile argmax and the reduction),
// with each task's dependencies on exactly the producer tiles it reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/weight_matrix.h"
#include "program/program.h"

namespace md {

class StepBuilder {
 public:
  // `grain`: tiles start at multiples of it (a kernel family's register block).
  StepBuilder(int workers, int64_t grain = 1) : workers_(workers), grain_(grain) {}

  int workers() const { return workers_; }

  // A buffer of the program over `data` (or, unbound yet, nullptr: rebind before running).
  program::BufferId buffer(float* data);
  program::BufferId buffer(std::vector<float>& storage) { return buffer(storage.data()); }

  // Appends an instruction; returns its index.
  int32_t add(program::Instruction instruction);
  // Worker scratch that an instruction added with add() needs (moe() and moe_mixed() declare
  // theirs themselves).
  void need_scratch(int64_t floats);

  // Waits for every task of `producer`.
  program::Dependency all(int32_t producer) const;
  // The tiles of projection `producer` that write columns [begin, end) of `buffer` (at most one
  // contiguous run per matrix the instruction holds).
  std::vector<program::Dependency> tiles_writing(int32_t producer, program::BufferId buffer,
                                                 int64_t begin, int64_t end) const;

  // Output-row tiles of `w` (at least `min_tile` rows each) written at out[n·stride + offset + r]
  // (accumulated when `accumulate`).
  void add_tiles(std::vector<program::Tile>& tiles, const kernels::WeightMatrix& w,
                 program::BufferId out, int64_t offset, int64_t stride, bool accumulate,
                 int64_t min_tile = 0) const;

  // Rows of a buffer as they are, or normalised in the prologue.
  static program::RowInput rows(program::BufferId buffer, int64_t stride);
  static program::RowInput normalised(program::BufferId buffer, int64_t width,
                                      program::NormKind norm, const void* weight, float eps);

  int32_t projection(std::string name, program::RowInput input, std::vector<program::Tile> tiles,
                     std::vector<program::Dependency> waits);
  // A row-parallel projection into the residual stream: `tiles` add into the stream (and may copy
  // its finished rows out, a drafter's tap). With a communicator of more than one rank (tensor
  // parallelism) they write partial products into `partial` instead, and an all_reduce sums them
  // across the ranks into the stream (and makes the copy). Returns the instruction after which the
  // stream is complete.
  int32_t residual_projection(const std::string& name, program::RowInput input,
                              std::vector<program::Tile> tiles,
                              std::vector<program::Dependency> waits, dist::Communicator* ranks,
                              program::BufferId partial);
  // The same for a row-parallel projection that writes (not adds) its output, e.g. a branch a
  // gated join reads: the tiles' own `accumulate` says which, on one rank as on many.
  int32_t summed_projection(const std::string& name, program::RowInput input,
                            std::vector<program::Tile> tiles,
                            std::vector<program::Dependency> waits, dist::Communicator* ranks,
                            program::BufferId partial);
  // act(x·gateᵀ) · (x·upᵀ) into `gate_out` (`up_out` is the up half's scratch), [rows][I].
  int32_t gate_up_silu(std::string name, program::RowInput input, const kernels::WeightMatrix& gate,
                       const kernels::WeightMatrix& up, program::BufferId gate_out,
                       program::BufferId up_out, std::vector<program::Dependency> waits,
                       kernels::GatedActivation act = {});
  // Attention: a KV append per KV head (waiting for the tiles of `qkv` that write its key and
  // value), then one task per query head (waiting for its query and gate tiles and its KV head's
  // append), both besides `waits`. Returns the attention instruction.
  int32_t attention(std::string name, const program::AttentionOperands& operands, int32_t qkv,
                    std::vector<program::Dependency> waits);
  // A Gated DeltaNet core, one task per key head, each waiting (besides `waits`) only for the
  // tiles of `in_proj` that write its channels of q, k, v, z, b and a.
  int32_t delta_net(std::string name, const program::DeltaNetOperands& operands, int32_t in_proj,
                    std::vector<program::Dependency> waits);
  // A sparse MoE block after its router projection `router` (which writes the router logits and
  // the shared gate's logit that `route` reads, and publishes the normalised rows `experts`
  // reads) and the shared expert's gate_up_silu `shared` (whose output `down` reads): the routing,
  // the chosen experts' gate|up, their down plus the shared expert's added into the residual.
  // Tile sizes are set here, and the worker scratch the three need is added to what build()
  // provides; the plan `route` names is shared by the three. Returns the down instruction.
  // With a communicator of more than one rank, expert parallelism: every rank routes every row
  // alike but runs only its experts (shard::routed_experts); the down writes the rank's partial
  // sum (its experts and its share of the shared expert) into `partial` ([rows][down.hidden]) and
  // an all_reduce adds the ranks' parts into `down.out` (and makes the copy); then the all_reduce
  // is returned.
  int32_t moe(const std::string& name, program::MoeRouteOperands route,
              program::MoeExpertsOperands experts, program::MoeDownOperands down, int32_t router,
              int32_t shared, dist::Communicator* ranks = nullptr,
              program::BufferId partial = program::kNoBuffer);
  // A latent MoE block whose experts are each normalised before they mix (Muse Spark): the
  // routing (waiting for `route_waits`: the router logits' tiles), the chosen experts' gate|up
  // (besides the routing, waiting for `input_waits`: the rows they read), their down into
  // `down.each` per (expert, row), and the mix per row (of `rows`) into `mix.out`. Tile sizes, the
  // plan and the worker scratch are set here. Returns the mix instruction.
  // With a communicator of more than one rank, expert parallelism: every rank routes every row
  // alike but runs and mixes only its experts (shard::routed_experts), writing the partial mix
  // into `partial` ([rows][mix.width]), and an all_reduce sums the ranks' parts into `mix.out`;
  // then the all_reduce is returned.
  int32_t moe_mixed(const std::string& name, program::MoeRouteOperands route,
                    program::MoeExpertsOperands experts, program::MoeDownOperands down,
                    program::MoeMixOperands mix, int64_t rows,
                    std::vector<program::Dependency> route_waits,
                    std::vector<program::Dependency> input_waits,
                    dist::Communicator* ranks = nullptr,
                    program::BufferId partial = program::kNoBuffer);
  // The lm_head tiles (at least `min_tile` rows each; their logits softcapped when `softcap`
  // says) with their per-tile argmax, then the reduction to one greedy token per input row (of at
  // most `row_capacity`, the length of `greedy`). `tile_max` / `tile_arg` are resized to fit.
  // With a vocabulary shard (tensor parallelism), `w` holds the rank's rows of the vocabulary, its
  // tiles write shard.local, and the reduction goes on across the ranks, gathering into `logits`.
  // Returns the reduction's index.
  int32_t lm_head_argmax(program::RowInput input, const kernels::WeightMatrix& w,
                         program::BufferId logits, int64_t min_tile, std::vector<float>& tile_max,
                         std::vector<int32_t>& tile_arg, int32_t* greedy,
                         std::vector<program::Dependency> waits,
                         const program::LogitSoftcap& softcap = {},
                         int64_t row_capacity = program::kMaxStepRows,
                         const program::VocabShard& shard = {});

  // `max_rows`: the most step rows (and count-register rows) a run will have. Workers get
  // `scratch_floats` of scratch, or more where an instruction added here needs more.
  std::unique_ptr<program::Program> build(std::size_t scratch_floats,
                                          int64_t max_rows = program::kMaxStepRows);

 private:
  // The routing and the chosen experts' gate|up of a MoE block; returns the gate|up instruction.
  int32_t routed_experts(const std::string& name, const program::MoeRouteOperands& route,
                         program::MoeExpertsOperands experts,
                         std::vector<program::Dependency> route_waits,
                         std::vector<program::Dependency> input_waits);
  // The sum across the ranks that completes `name`, once `after` has written every part.
  int32_t all_reduce(const std::string& name, const program::AllReduceOperands& sum, int32_t after);
  int workers_;
  int64_t grain_;
  int64_t scratch_floats_ = 0;  // the most any instruction's tasks declared (moe)
  std::vector<float*> buffers_;
  std::vector<program::Instruction> instructions_;
};

}  // namespace md
