#include "models/common/step_builder.h"

#include <algorithm>
#include <array>

#include "base/error.h"
#include "dist/communicator.h"
#include "models/common/tensor_shard.h"
#include "program/projection_tiles.h"

namespace md {

using program::Dependency;
using program::Instruction;
using program::Tile;

program::BufferId StepBuilder::buffer(float* data) {
  buffers_.push_back(data);
  return static_cast<program::BufferId>(buffers_.size() - 1);
}

int32_t StepBuilder::add(Instruction instruction) {
  instructions_.push_back(std::move(instruction));
  return static_cast<int32_t>(instructions_.size() - 1);
}

Dependency StepBuilder::all(int32_t producer) const {
  return {producer, 0, instructions_[static_cast<std::size_t>(producer)].tasks};
}

std::vector<Dependency> StepBuilder::tiles_writing(int32_t producer, program::BufferId buffer,
                                                   int64_t begin, int64_t end) const {
  const auto& tiles = std::get<program::ProjectionOperands>(
                          instructions_[static_cast<std::size_t>(producer)].operands)
                          .tiles;
  std::vector<Dependency> runs;
  for (std::size_t t = 0; t < tiles.size(); ++t) {
    const Tile& tile = tiles[t];
    bool overlaps = tile.out == buffer && tile.out_offset + tile.begin < end &&
                    tile.out_offset + tile.end > begin;
    if (!overlaps) continue;
    auto task = static_cast<int64_t>(t);
    if (!runs.empty() && runs.back().end == task) {
      runs.back().end = task + 1;
    } else {
      runs.push_back({producer, task, task + 1});
    }
  }
  if (runs.empty()) fail("step builder: no tile of #{} writes the columns a task reads", producer);
  return runs;
}

void StepBuilder::add_tiles(std::vector<Tile>& tiles, const kernels::WeightMatrix& w,
                            program::BufferId out, int64_t offset, int64_t stride, bool accumulate,
                            int64_t min_tile) const {
  int64_t tile = std::max(min_tile, program::projection_tile_rows(w.rows, workers_, grain_));
  for (int64_t r = 0; r < w.rows; r += tile) {
    Tile t;
    t.weight = w;
    t.begin = r;
    t.end = std::min(w.rows, r + tile);
    t.out = out;
    t.out_offset = offset;
    t.out_stride = stride;
    t.accumulate = accumulate;
    tiles.push_back(t);
  }
}

program::RowInput StepBuilder::rows(program::BufferId buffer, int64_t stride) {
  program::RowInput input;
  input.buffer = buffer;
  input.stride = stride;
  return input;
}

program::RowInput StepBuilder::normalised(program::BufferId buffer, int64_t width,
                                          program::NormKind norm, const void* weight, float eps) {
  program::RowInput input = rows(buffer, width);
  input.norm = norm;
  input.norm_weight = weight;
  input.eps = eps;
  return input;
}

int32_t StepBuilder::projection(std::string name, program::RowInput input, std::vector<Tile> tiles,
                                std::vector<Dependency> waits) {
  auto tasks = static_cast<int64_t>(tiles.size());
  return add({std::move(name),
              tasks,
              program::ProjectionOperands{input, std::move(tiles), {}},
              std::move(waits),
              {}});
}

int32_t StepBuilder::gate_up_silu(std::string name, program::RowInput input,
                                  const kernels::WeightMatrix& gate,
                                  const kernels::WeightMatrix& up, program::BufferId gate_out,
                                  program::BufferId up_out, std::vector<Dependency> waits,
                                  kernels::GatedActivation act) {
  program::GateUpOperands op{input, {}, {}, act};
  add_tiles(op.gate, gate, gate_out, 0, gate.rows, false);
  add_tiles(op.up, up, up_out, 0, up.rows, false);
  auto tasks = static_cast<int64_t>(op.gate.size());
  return add({std::move(name), tasks, std::move(op), std::move(waits), {}});
}

int32_t StepBuilder::attention(std::string name, const program::AttentionOperands& op, int32_t qkv,
                               std::vector<Dependency> waits) {
  const int64_t hd = op.head_dim, group = op.heads / op.kv_heads;
  const int64_t q_width = op.output_gate ? 2 * hd : hd;
  // KV head g's append reads the tiles of its key and value.
  std::vector<std::vector<Dependency>> append_waits;
  for (int64_t g = 0; g < op.kv_heads; ++g) {
    std::vector<Dependency> reads = tiles_writing(qkv, op.k, g * hd, (g + 1) * hd);
    auto values = tiles_writing(qkv, op.v, g * hd, (g + 1) * hd);
    reads.insert(reads.end(), values.begin(), values.end());
    append_waits.push_back(std::move(reads));
  }
  int32_t append = add({name + ".kv_append", op.kv_heads, program::KvAppendOperands{op}, waits,
                        std::move(append_waits)});
  // Query head h reads the tiles of its query (and gate) and its KV head's append; a row block of
  // KV head g (row_block mode) those of every query head of g's group.
  auto head_reads = [&](int64_t first_head, int64_t heads) {
    std::vector<Dependency> reads =
        tiles_writing(qkv, op.q, first_head * q_width, (first_head + heads) * q_width);
    reads.push_back({append, first_head / group, first_head / group + 1});
    return reads;
  };
  std::vector<std::vector<Dependency>> task_waits;
  if (op.row_block == 0) {
    for (int64_t h = 0; h < op.heads; ++h) task_waits.push_back(head_reads(h, 1));
  } else {
    for (int64_t t = 0; t < op.row_blocks * op.kv_heads; ++t)
      task_waits.push_back(head_reads(t % op.kv_heads * group, group));
  }
  const auto tasks = static_cast<int64_t>(task_waits.size());
  return add({std::move(name), tasks, op, std::move(waits), std::move(task_waits)});
}

int32_t StepBuilder::delta_net(std::string name, const program::DeltaNetOperands& op,
                               int32_t in_proj, std::vector<Dependency> waits) {
  const int64_t dk = op.key_dim, dv = op.value_dim;
  const int64_t key_width = op.key_heads * dk;
  // Key head kh reads its q and k channels and each of its value heads' v, z, b and a.
  std::vector<std::vector<Dependency>> head_waits;
  for (int64_t kh = 0; kh < op.key_heads; ++kh) {
    std::vector<std::array<int64_t, 2>> reads = {{kh * dk, dk}, {key_width + kh * dk, dk}};
    for (int64_t m = 0; m < op.group(); ++m) {
      const int64_t j = op.value_head(kh, m);
      reads.push_back({2 * key_width + j * dv, dv});
      reads.push_back({op.z_offset() + j * dv, dv});
      reads.push_back({op.b_offset() + j, 1});
      reads.push_back({op.a_offset() + j, 1});
    }
    std::vector<Dependency> head;
    for (const auto& [first, count] : reads) {
      for (const Dependency& tile : tiles_writing(in_proj, op.in, first, first + count)) {
        const bool listed = std::any_of(head.begin(), head.end(), [&](const Dependency& d) {
          return d.producer == tile.producer && d.begin == tile.begin && d.end == tile.end;
        });
        if (!listed) head.push_back(tile);
      }
    }
    head_waits.push_back(std::move(head));
  }
  return add({std::move(name), op.key_heads, op, std::move(waits), std::move(head_waits)});
}

void StepBuilder::need_scratch(int64_t floats) {
  scratch_floats_ = std::max(scratch_floats_, floats);
}

int32_t StepBuilder::routed_experts(const std::string& name, const program::MoeRouteOperands& route,
                                    program::MoeExpertsOperands experts,
                                    std::vector<Dependency> route_waits,
                                    std::vector<Dependency> input_waits) {
  const int32_t routed = add({name + ".route", 1, route, std::move(route_waits), {}});
  // A row's gate|up work is top-k experts' rows: tiled as one matrix of that many rows would be.
  experts.tile_rows = std::min(
      experts.intermediate,
      program::projection_tile_rows(route.experts_per_token * experts.intermediate, workers_));
  experts.plan = route.plan;
  need_scratch(std::max(route.scratch_floats(), experts.scratch_floats()));
  input_waits.push_back(all(routed));
  const int64_t expert_tasks = route.plan->slots() * experts.tiles_per_expert();
  return add({name + ".experts_gate|up+silu", expert_tasks, experts, std::move(input_waits), {}});
}

int32_t StepBuilder::moe(const std::string& name, program::MoeRouteOperands route,
                         program::MoeExpertsOperands experts, program::MoeDownOperands down,
                         int32_t router, int32_t shared, dist::Communicator* ranks,
                         program::BufferId partial) {
  const bool parted = dist::tensor_parallel(ranks);
  const program::MoeDownOperands whole = down;
  if (parted) {
    // The all_reduce sums whole rows of the stream: [rows][hidden], one after another.
    if (partial == program::kNoBuffer || down.out_stride != down.hidden) {
      fail("{}: expert parallelism needs a partial buffer and rows of the stream's own width",
           name);
    }
    const dist::Range mine =
        shard::routed_experts(route.experts, ranks->rank(), ranks->size(), name);
    route.owned_begin = mine.begin;
    route.owned_end = mine.end;
    down.out = partial;
    down.out_stride = down.hidden;
    down.accumulate = false;
    down.copy_to = program::kNoBuffer;
  }
  const int32_t gate_up = routed_experts(name, route, experts, {all(router)}, {});
  down.tile_rows = program::projection_tile_rows(down.hidden, workers_);
  down.plan = route.plan;
  need_scratch(down.scratch_floats());
  const int32_t summed =
      add({name + (parted ? ".experts_down+shared+partial" : ".experts_down+shared+residual"),
           down.tiles(),
           down,
           {all(gate_up), all(shared)},
           {}});
  if (!parted) return summed;
  return all_reduce(name,
                    {.partial = partial,
                     .out = whole.out,
                     .width = down.hidden,
                     .comm = ranks,
                     .copy_to = whole.copy_to,
                     .copy_offset = whole.copy_offset,
                     .copy_stride = whole.copy_stride,
                     .accumulate = true},
                    summed);
}

int32_t StepBuilder::moe_mixed(const std::string& name, program::MoeRouteOperands route,
                               program::MoeExpertsOperands experts, program::MoeDownOperands down,
                               program::MoeMixOperands mix, int64_t rows,
                               std::vector<Dependency> route_waits,
                               std::vector<Dependency> input_waits, dist::Communicator* ranks,
                               program::BufferId partial) {
  const bool parted = dist::tensor_parallel(ranks);
  const program::BufferId out = mix.out;
  if (parted) {
    if (partial == program::kNoBuffer) fail("{}: expert parallelism needs a partial buffer", name);
    const dist::Range mine =
        shard::routed_experts(route.experts, ranks->rank(), ranks->size(), name);
    route.owned_begin = mine.begin;
    route.owned_end = mine.end;
    mix.out = partial;
  }
  const int32_t gate_up =
      routed_experts(name, route, experts, std::move(route_waits), std::move(input_waits));
  down.tile_rows = program::projection_tile_rows(down.hidden, workers_);
  down.plan = route.plan;
  const int32_t each = add({name + ".experts_down", down.tiles(), down, {all(gate_up)}, {}});
  mix.plan = route.plan;
  const int32_t mixed = add({name + ".norm+mix", rows, mix, {all(each)}, {}});
  if (!parted) return mixed;
  return all_reduce(
      name,
      {.partial = partial, .out = out, .width = mix.width, .comm = ranks, .accumulate = false},
      mixed);
}

int32_t StepBuilder::lm_head_argmax(program::RowInput input, const kernels::WeightMatrix& w,
                                    program::BufferId logits, int64_t min_tile,
                                    std::vector<float>& tile_max, std::vector<int32_t>& tile_arg,
                                    int32_t* greedy, std::vector<Dependency> waits,
                                    const program::LogitSoftcap& softcap, int64_t row_capacity,
                                    const program::VocabShard& shard) {
  program::LmHeadOperands op{input, {}, nullptr, nullptr, softcap, row_capacity};
  // A rank's tiles write its part of the vocabulary; the reduction gathers the parts into
  // `logits`.
  const program::BufferId head_out = shard.comm != nullptr ? shard.local : logits;
  add_tiles(op.tiles, w, head_out, 0, w.rows, false, min_tile);
  const auto tiles = static_cast<int64_t>(op.tiles.size());
  tile_max.assign(static_cast<std::size_t>(tiles * row_capacity), 0.0f);
  tile_arg.assign(static_cast<std::size_t>(tiles * row_capacity), 0);
  op.tile_max = tile_max.data();
  op.tile_arg = tile_arg.data();
  int32_t head = add({"lm_head+argmax", tiles, std::move(op), std::move(waits), {}});
  return add({"argmax",
              1,
              program::ArgmaxOperands{tile_max.data(), tile_arg.data(), tiles, greedy, row_capacity,
                                      input.first_row, shard},
              {all(head)},
              {}});
}

int32_t StepBuilder::residual_projection(const std::string& name, program::RowInput input,
                                         std::vector<program::Tile> tiles,
                                         std::vector<Dependency> waits, dist::Communicator* ranks,
                                         program::BufferId partial) {
  return summed_projection(name + "+residual", input, std::move(tiles), std::move(waits), ranks,
                           partial);
}

int32_t StepBuilder::summed_projection(const std::string& name, program::RowInput input,
                                       std::vector<program::Tile> tiles,
                                       std::vector<Dependency> waits, dist::Communicator* ranks,
                                       program::BufferId partial) {
  if (!dist::tensor_parallel(ranks) || tiles.empty()) {
    return projection(name, input, std::move(tiles), std::move(waits));
  }
  // Every tile of one projection writes the same stream (whole rows) and copies to the same tap.
  const program::Tile first = tiles.front();
  if (first.out_offset != 0) fail("{}: a summed output is written from its first column", name);
  for (const program::Tile& tile : tiles) {
    if (tile.accumulate != first.accumulate) {
      fail("{}: a summed projection's tiles must all add or all write", name);
    }
  }
  for (program::Tile& tile : tiles) {
    tile.out = partial;
    tile.accumulate = false;
    tile.copy_to = program::kNoBuffer;
  }
  const int32_t products = projection(name, input, std::move(tiles), std::move(waits));
  return all_reduce(name,
                    {.partial = partial,
                     .out = first.out,
                     .width = first.out_stride,
                     .comm = ranks,
                     .copy_to = first.copy_to,
                     .copy_offset = first.copy_offset,
                     .copy_stride = first.copy_stride,
                     .accumulate = first.accumulate},
                    products);
}

int32_t StepBuilder::all_reduce(const std::string& name, const program::AllReduceOperands& sum,
                                int32_t after) {
  return add({name + ".all_reduce", 1, sum, {all(after)}, {}});
}

std::unique_ptr<program::Program> StepBuilder::build(std::size_t scratch_floats, int64_t max_rows) {
  const std::size_t scratch = std::max(scratch_floats, static_cast<std::size_t>(scratch_floats_));
  return std::make_unique<program::Program>(std::move(instructions_), std::move(buffers_), workers_,
                                            scratch, max_rows);
}

}  // namespace md
