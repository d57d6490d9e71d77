#include "models/common/config_footprint.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace md {

std::string_view weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kF16:
      return "f16";
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kInt8:
      return "int8";
    case WeightFormat::kMXFP4:
      return "mxfp4 (e2m1 + e8m0/32)";
    case WeightFormat::kNVFP4:
      return "nvfp4 (e2m1 + e4m3/16 + f32)";
    case WeightFormat::kQ8_0:
      return "Q8_0";
    case WeightFormat::kQ4_0:
      return "Q4_0";
    case WeightFormat::kQ4_1:
      return "Q4_1";
    case WeightFormat::kQ4_K:
      return "Q4_K";
    case WeightFormat::kQ6_K:
      return "Q6_K";
    case WeightFormat::kQ5_0:
      return "Q5_0";
    case WeightFormat::kQ5_K:
      return "Q5_K";
  }
  return "?";
}

int64_t dense_element_bytes(WeightFormat format) {
  switch (format) {
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
      return 2;
    case WeightFormat::kF32:
      return 4;
    case WeightFormat::kInt8:
      return 1;
    default:
      fail("dense_element_bytes: {} is a block-quantized format", weight_format_name(format));
  }
}

int64_t mxfp4_matrix_bytes(int64_t rows, int64_t cols) {
  return rows * (cols / 2 + cols / 32);
}

int64_t nvfp4_matrix_bytes(int64_t rows, int64_t cols) {
  return rows * (cols / 2 + cols / 16);
}

std::string_view weight_kind_name(WeightKind kind) {
  switch (kind) {
    case WeightKind::kEmbedding:
      return "embedding";
    case WeightKind::kAttention:
      return "attention";
    case WeightKind::kLinearAttention:
      return "linear attention";
    case WeightKind::kMlp:
      return "dense mlp";
    case WeightKind::kRouter:
      return "router";
    case WeightKind::kMoeProjection:
      return "moe latent proj";
    case WeightKind::kRoutedExperts:
      return "routed experts";
    case WeightKind::kSharedExperts:
      return "shared experts";
    case WeightKind::kNorms:
      return "norms & gates";
    case WeightKind::kLmHead:
      return "lm_head";
    case WeightKind::kDraftInput:
      return "draft fc";
    case WeightKind::kBlockConv:
      return "block conv";
    case WeightKind::kDraftHead:
      return "draft head";
  }
  return "?";
}

int64_t StateGroup::positions_attended(int64_t context) const {
  return window > 0 ? std::min(context, window) : context;
}

int64_t StateGroup::positions_stored(int64_t context) const {
  return ring ? std::min(context, window + ring_spare) : context;
}

int64_t StateGroup::bytes(int64_t context) const {
  return fixed_bytes + bytes_per_token * positions_stored(context);
}

int64_t StateGroup::read_bytes_per_token(int64_t context) const {
  return fixed_bytes + bytes_per_token * positions_attended(context);
}

int64_t ConfigFootprint::total_params() const {
  int64_t sum = 0;
  for (const WeightGroup& group : weights) sum += group.params;
  return sum;
}

int64_t ConfigFootprint::active_params() const {
  int64_t sum = 0;
  for (const WeightGroup& group : weights) sum += group.active_params;
  return sum;
}

int64_t ConfigFootprint::total_weight_bytes() const {
  int64_t sum = 0;
  for (const WeightGroup& group : weights) sum += group.bytes;
  return sum;
}

int64_t ConfigFootprint::weight_bytes_read_per_token() const {
  int64_t sum = 0;
  for (const WeightGroup& group : weights) sum += group.read_bytes_per_token;
  return sum;
}

int64_t ConfigFootprint::params_of(WeightKind kind) const {
  int64_t sum = 0;
  for (const WeightGroup& group : weights) sum += group.kind == kind ? group.params : 0;
  return sum;
}

int64_t ConfigFootprint::bytes_of(WeightKind kind) const {
  int64_t sum = 0;
  for (const WeightGroup& group : weights) sum += group.kind == kind ? group.bytes : 0;
  return sum;
}

int64_t ConfigFootprint::state_bytes(int64_t context) const {
  int64_t sum = 0;
  for (const StateGroup& group : state) sum += group.bytes(context);
  return sum;
}

int64_t ConfigFootprint::state_read_bytes_per_token(int64_t context) const {
  int64_t sum = 0;
  for (const StateGroup& group : state) sum += group.read_bytes_per_token(context);
  return sum;
}

int64_t ConfigFootprint::state_written_bytes_per_token() const {
  int64_t sum = 0;
  for (const StateGroup& group : state) sum += group.written_bytes_per_token();
  return sum;
}

const StateGroup* ConfigFootprint::find_state(std::string_view name) const {
  for (const StateGroup& group : state) {
    if (group.name == name) return &group;
  }
  return nullptr;
}

void ConfigFootprint::add_weights(WeightKind kind, WeightFormat format, int64_t params,
                                  int64_t bytes, int64_t read_bytes_per_token,
                                  int64_t active_params) {
  if (active_params < 0) {
    // In double: params x bytes overflows int64 for whole expert sets.
    active_params = bytes == 0 ? 0
                               : std::llround(static_cast<double>(params) *
                                              static_cast<double>(read_bytes_per_token) /
                                              static_cast<double>(bytes));
  }
  auto it = std::find_if(weights.begin(), weights.end(), [&](const WeightGroup& group) {
    return group.kind == kind && group.format == format;
  });
  if (it == weights.end()) {
    weights.push_back(WeightGroup{kind, format, 0, 0, 0, 0});
    it = weights.end() - 1;
  }
  it->params += params;
  it->bytes += bytes;
  it->read_bytes_per_token += read_bytes_per_token;
  it->active_params += active_params;
}

void ConfigFootprint::add_dense(WeightKind kind, WeightFormat format, int64_t params) {
  int64_t bytes = params * dense_element_bytes(format);
  add_weights(kind, format, params, bytes, bytes);
}

void ConfigFootprint::add_embedding(WeightFormat format, int64_t rows, int64_t cols) {
  int64_t element = dense_element_bytes(format);
  add_weights(WeightKind::kEmbedding, format, rows * cols, rows * cols * element, cols * element);
}

}  // namespace md
