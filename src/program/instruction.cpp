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
    case Opcode::kLmHeadArgmax:
      return "lm_head_argmax";
    case Opcode::kArgmax:
      return "argmax";
    case Opcode::kFamilyKernel:
      return "family_kernel";
  }
  return "?";
}

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
    case Opcode::kAttention:
      return std::get<AttentionOperands>(ins.operands).heads;
    case Opcode::kArgmax:
      return 1;
    default:
      return -1;
  }
}

std::vector<BufferId> buffers_named(const Instruction& ins) {
  std::vector<BufferId> ids;
  if (const RowInput* input = row_input(ins)) ids.push_back(input->buffer);
  if (operand_tasks(ins) >= 0) {  // tile lists sized as the tasks (checked before this)
    for (int64_t t = 0; t < ins.tasks; ++t) {
      for (const Tile* tile : task_tiles(ins, t)) ids.insert(ids.end(), {tile->out, tile->copy_to});
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
    default:
      break;
  }
  return ids;
}

}  // namespace md::program
