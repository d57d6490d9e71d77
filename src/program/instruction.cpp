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

namespace {

std::size_t tile_bytes(const Tile& tile) {
  return tile.weight.bytes(tile.begin, tile.end);
}

}  // namespace

std::size_t task_weight_bytes(const Instruction& ins, int64_t task) {
  auto t = static_cast<std::size_t>(task);
  switch (ins.opcode()) {
    case Opcode::kProjection:
      return tile_bytes(std::get<ProjectionOperands>(ins.operands).tiles[t]);
    case Opcode::kLmHeadArgmax:
      return tile_bytes(std::get<LmHeadOperands>(ins.operands).tiles[t]);
    case Opcode::kGateUpSilu: {
      const auto& op = std::get<GateUpOperands>(ins.operands);
      return tile_bytes(op.gate[t]) + tile_bytes(op.up[t]);
    }
    default:
      return 0;
  }
}

std::size_t weight_bytes(const Instruction& ins) {
  std::size_t bytes = 0;
  for (int64_t t = 0; t < ins.tasks; ++t) bytes += task_weight_bytes(ins, t);
  return bytes;
}

}  // namespace md::program
