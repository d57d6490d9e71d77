#include "program/instruction.h"

namespace md::program {

std::string_view opcode_name(Opcode op) {
  switch (op) {
    case Opcode::kEmbed:
      return "embed";
    case Opcode::kRopeAngles:
      return "rope_angles";
    case Opcode::kProjection:
      return "projection";
    case Opcode::kGateUpSilu:
      return "gate_up_silu";
    case Opcode::kKvAppend:
      return "kv_append";
    case Opcode::kAttention:
      return "attention";
    case Opcode::kDeltaNet:
      return "delta_net";
    case Opcode::kLmHeadArgmax:
      return "lm_head_argmax";
    case Opcode::kArgmax:
      return "argmax";
    case Opcode::kNormRows:
      return "norm_rows";
    case Opcode::kBlockConv:
      return "block_conv";
    case Opcode::kWindowAttention:
      return "window_attention";
    case Opcode::kTopK:
      return "top_k";
    case Opcode::kMoeRoute:
      return "moe_route";
    case Opcode::kMoeExperts:
      return "moe_experts";
    case Opcode::kMoeDown:
      return "moe_down";
    case Opcode::kRowAttention:
      return "row_attention";
    case Opcode::kGatedResidual:
      return "gated_residual";
    case Opcode::kMoeMix:
      return "moe_mix";
    case Opcode::kResidualMix:
      return "residual_mix";
    case Opcode::kKda:
      return "kda";
    case Opcode::kLatentAppend:
      return "latent_append";
    case Opcode::kLatentAttention:
      return "latent_attention";
    case Opcode::kRingAppend:
      return "ring_append";
    case Opcode::kAllReduce:
      return "all_reduce";
    case Opcode::kFamilyKernel:
      return "family_kernel";
  }
  return "?";
}

namespace {

// kv_b holds every head's key and value rows over the latent; the norm and W_UK_hᵀ are there.
bool latent_operands_fit(const LatentAttentionOperands& op) {
  return op.key_absorb != nullptr && op.latent_norm != nullptr && op.heads > 0 &&
         op.kv_b.rows == op.heads * (op.nope + op.v_head_dim) && op.kv_b.cols == op.rank;
}

}  // namespace

TaskTiles task_tiles(const Instruction& ins, int64_t task) {
  auto t = static_cast<std::size_t>(task);
  switch (ins.opcode()) {
    case Opcode::kProjection:
      return {{&std::get<ProjectionOperands>(ins.operands).tiles[t], nullptr}, 1};
    case Opcode::kLmHeadArgmax:
      return {{&std::get<LmHeadOperands>(ins.operands).tiles[t], nullptr}, 1};
    case Opcode::kGateUpSilu: {
      const auto& op = std::get<GateUpOperands>(ins.operands);
      return {{&op.gate[t], &op.up[t]}, 2};
    }
    default:
      return {};
  }
}

std::size_t task_weight_bytes(const Instruction& ins, int64_t task) {
  std::size_t bytes = 0;
  for (const Tile* tile : task_tiles(ins, task))
    bytes += tile->weight.bytes(tile->begin, tile->end);
  return bytes;
}

std::size_t weight_bytes(const Instruction& ins) {
  std::size_t bytes = 0;
  for (int64_t t = 0; t < ins.tasks; ++t) bytes += task_weight_bytes(ins, t);
  return bytes;
}

const RowInput* row_input(const Instruction& ins) {
  switch (ins.opcode()) {
    case Opcode::kProjection:
      return &std::get<ProjectionOperands>(ins.operands).input;
    case Opcode::kGateUpSilu:
      return &std::get<GateUpOperands>(ins.operands).input;
    case Opcode::kLmHeadArgmax:
      return &std::get<LmHeadOperands>(ins.operands).input;
    default:
      return nullptr;
  }
}

int64_t operand_tasks(const Instruction& ins) {
  switch (ins.opcode()) {
    case Opcode::kProjection:
      return static_cast<int64_t>(std::get<ProjectionOperands>(ins.operands).tiles.size());
    case Opcode::kLmHeadArgmax:
      return static_cast<int64_t>(std::get<LmHeadOperands>(ins.operands).tiles.size());
    case Opcode::kGateUpSilu: {
      const auto& op = std::get<GateUpOperands>(ins.operands);
      return op.gate.size() == op.up.size() ? static_cast<int64_t>(op.gate.size()) : -2;
    }
    case Opcode::kKvAppend:
      return std::get<KvAppendOperands>(ins.operands).attention.kv_heads;
    case Opcode::kAttention: {
      const auto& op = std::get<AttentionOperands>(ins.operands);
      if (op.row_block == 0) return op.heads;
      return op.row_block > 0 && op.row_blocks > 0 ? op.kv_heads * op.row_blocks : -2;
    }
    case Opcode::kDeltaNet:
      return std::get<DeltaNetOperands>(ins.operands).key_heads;
    case Opcode::kBlockConv: {
      const auto& op = std::get<BlockConvOperands>(ins.operands);
      return op.chunk > 0 ? (op.hidden + op.chunk - 1) / op.chunk : -2;
    }
    case Opcode::kWindowAttention:
      return std::get<WindowAttentionOperands>(ins.operands).kv_heads;
    case Opcode::kRingAppend:
      return std::get<RingAppendOperands>(ins.operands).kv_heads;
    case Opcode::kRowAttention: {
      const auto& op = std::get<RowAttentionOperands>(ins.operands);
      return op.kv_heads > 0 && op.heads % op.kv_heads == 0 ? op.kv_heads : -2;
    }
    case Opcode::kMoeMix:
      return std::get<MoeMixOperands>(ins.operands).plan == nullptr ? -2 : -1;
    case Opcode::kResidualMix: {
      const auto& op = std::get<ResidualMixOperands>(ins.operands);
      const bool fits = op.weight != nullptr && op.block_count >= 0 &&
                        op.block_count + 1 <= kMaxResidualCandidates && op.block_rows > 0 &&
                        op.push_to < kMaxResidualCandidates;
      return fits ? -1 : -2;
    }
    case Opcode::kKda: {
      const auto& op = std::get<KdaOperands>(ins.operands);
      const bool fits =
          op.conv_kernel >= 2 && op.head_dim > 0 && op.in_stride >= op.b_offset() + op.heads &&
          op.out_stride >= op.channels() && op.exp_a_log != nullptr && op.dt_bias != nullptr &&
          op.norm != nullptr && op.conv_weight[0] != nullptr && op.conv_weight[1] != nullptr &&
          op.conv_weight[2] != nullptr;
      return fits ? op.heads : -2;
    }
    case Opcode::kLatentAppend:
      return latent_operands_fit(std::get<LatentAppendOperands>(ins.operands).attention) ? -1 : -2;
    case Opcode::kLatentAttention: {
      const auto& op = std::get<LatentAttentionOperands>(ins.operands);
      return latent_operands_fit(op) ? op.heads : -2;
    }
    case Opcode::kArgmax:
    case Opcode::kMoeRoute:
    case Opcode::kAllReduce:
      return 1;
    case Opcode::kMoeExperts: {
      const auto& op = std::get<MoeExpertsOperands>(ins.operands);
      if (op.experts == nullptr || op.plan == nullptr || op.tile_rows <= 0) return -2;
      return op.plan->slots() * op.tiles_per_expert();
    }
    case Opcode::kMoeDown: {
      const auto& op = std::get<MoeDownOperands>(ins.operands);
      return op.experts == nullptr || op.plan == nullptr || op.tile_rows <= 0 ? -2 : op.tiles();
    }
    default:
      return -1;
  }
}

std::vector<BufferId> buffers_named(const Instruction& ins) {
  std::vector<BufferId> ids;
  if (const RowInput* input = row_input(ins)) {
    ids.push_back(input->buffer);
    ids.push_back(input->publish);
  }
  if (operand_tasks(ins) >= 0) {  // tile lists sized as the tasks (checked before this)
    for (int64_t t = 0; t < ins.tasks; ++t) {
      for (const Tile* tile : task_tiles(ins, t)) {
        ids.insert(ids.end(), {tile->out, tile->copy_to, tile->extra_out});
      }
    }
  }
  switch (ins.opcode()) {
    case Opcode::kEmbed:
      ids.push_back(std::get<EmbedOperands>(ins.operands).out);
      break;
    case Opcode::kRopeAngles:
      ids.push_back(std::get<RopeOperands>(ins.operands).out);
      break;
    case Opcode::kKvAppend: {
      const auto& op = std::get<KvAppendOperands>(ins.operands).attention;
      ids.insert(ids.end(), {op.k, op.v, op.angles});
      break;
    }
    case Opcode::kAttention: {
      const auto& op = std::get<AttentionOperands>(ins.operands);
      ids.insert(ids.end(), {op.q, op.out, op.angles});
      break;
    }
    case Opcode::kDeltaNet: {
      const auto& op = std::get<DeltaNetOperands>(ins.operands);
      ids.insert(ids.end(), {op.in, op.out});
      break;
    }
    case Opcode::kProjection:
      ids.push_back(std::get<ProjectionOperands>(ins.operands).extra.buffer);
      break;
    case Opcode::kNormRows:
      ids.push_back(std::get<NormRowsOperands>(ins.operands).buffer);
      break;
    case Opcode::kBlockConv: {
      const auto& op = std::get<BlockConvOperands>(ins.operands);
      ids.insert(ids.end(), {op.coefficients, op.in, op.out, op.residual});
      break;
    }
    case Opcode::kWindowAttention: {
      const auto& op = std::get<WindowAttentionOperands>(ins.operands);
      ids.insert(ids.end(), {op.q, op.k, op.v, op.out, op.context_k, op.context_v});
      break;
    }
    case Opcode::kRingAppend: {
      const auto& op = std::get<RingAppendOperands>(ins.operands);
      ids.insert(ids.end(), {op.k, op.v});
      break;
    }
    case Opcode::kAllReduce: {
      const auto& op = std::get<AllReduceOperands>(ins.operands);
      ids.insert(ids.end(), {op.partial, op.out, op.copy_to});
      break;
    }
    case Opcode::kArgmax: {
      const auto& op = std::get<ArgmaxOperands>(ins.operands);
      if (op.shard.comm != nullptr) ids.insert(ids.end(), {op.shard.local, op.shard.gathered});
      break;
    }
    case Opcode::kTopK:
      ids.push_back(std::get<TopKOperands>(ins.operands).logits);
      break;
    case Opcode::kMoeRoute:
      ids.push_back(std::get<MoeRouteOperands>(ins.operands).logits);
      break;
    case Opcode::kMoeExperts: {
      const auto& op = std::get<MoeExpertsOperands>(ins.operands);
      ids.insert(ids.end(), {op.input, op.act});
      break;
    }
    case Opcode::kMoeDown: {
      const auto& op = std::get<MoeDownOperands>(ins.operands);
      ids.insert(ids.end(), {op.act, op.shared_act, op.out, op.copy_to, op.each});
      break;
    }
    case Opcode::kRowAttention: {
      const auto& op = std::get<RowAttentionOperands>(ins.operands);
      ids.insert(ids.end(), {op.q, op.k, op.v, op.gate, op.out, op.angles});
      break;
    }
    case Opcode::kGatedResidual: {
      const auto& op = std::get<GatedResidualOperands>(ins.operands);
      ids.insert(ids.end(), {op.branch, op.stream, op.copy_to});
      break;
    }
    case Opcode::kMoeMix: {
      const auto& op = std::get<MoeMixOperands>(ins.operands);
      ids.insert(ids.end(), {op.each, op.out});
      break;
    }
    case Opcode::kResidualMix: {
      const auto& op = std::get<ResidualMixOperands>(ins.operands);
      ids.insert(ids.end(), {op.prefix, op.blocks, op.out, op.copy_to});
      if (op.update != PrefixUpdate::kNone) ids.push_back(op.sub);
      break;
    }
    case Opcode::kKda: {
      const auto& op = std::get<KdaOperands>(ins.operands);
      ids.insert(ids.end(), {op.in, op.out});
      break;
    }
    case Opcode::kLatentAppend:
      ids.push_back(std::get<LatentAppendOperands>(ins.operands).attention.ckv);
      break;
    case Opcode::kLatentAttention: {
      const auto& op = std::get<LatentAttentionOperands>(ins.operands);
      ids.insert(ids.end(), {op.q, op.gate, op.out});
      break;
    }
    default:
      break;
  }
  return ids;
}

std::vector<RowCount> counts_named(const Instruction& ins) {
  std::vector<RowCount> counts;
  if (const RowInput* input = row_input(ins)) counts.push_back(input->rows_from);
  switch (ins.opcode()) {
    case Opcode::kProjection:
      counts.push_back(std::get<ProjectionOperands>(ins.operands).extra.rows_from);
      break;
    case Opcode::kNormRows:
      counts.push_back(std::get<NormRowsOperands>(ins.operands).rows_from);
      break;
    case Opcode::kWindowAttention:
      counts.push_back(std::get<WindowAttentionOperands>(ins.operands).context_rows_from);
      break;
    case Opcode::kRingAppend:
      counts.push_back(std::get<RingAppendOperands>(ins.operands).rows_from);
      break;
    default:
      break;
  }
  return counts;
}

}  // namespace md::program
