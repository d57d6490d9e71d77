#include "models/kimi/kimi_state.h"

#include <algorithm>

#include "base/error.h"

namespace md {

KimiState::KimiState(const KimiK3Config& config, KimiSequenceState fresh, int64_t capacity,
                     bool bf16_cache)
    : SequenceState(capacity), config_(&config), data_(std::move(fresh)), bf16_cache_(bf16_cache) {}

void KimiState::reset() {
  for (auto& h : data_.conv_history) std::fill(h.begin(), h.end(), 0.0f);
  for (auto& s : data_.delta_state) std::fill(s.begin(), s.end(), 0.0f);
  for (auto& c : data_.latent_cache) c.clear();
  for (auto& c : data_.latent_cache_bf16) c.clear();
  for (auto& c : data_.kv_cache) c.clear();
  data_.position = 0;
  position_ = 0;
  keep_all();
}

std::unique_ptr<SequenceState> KimiState::clone() const {
  return std::make_unique<KimiState>(*this);
}

std::size_t KimiState::bytes() const {
  std::size_t floats = 0;
  auto add = [&](const std::vector<std::vector<float>>& parts) {
    for (const auto& p : parts) floats += p.size();
  };
  std::size_t halves = 0;
  for (const auto& p : data_.latent_cache_bf16) halves += p.size();
  add(data_.conv_history);
  add(data_.delta_state);
  add(data_.latent_cache);
  add(data_.kv_cache);
  for (const KimiKdaSnapshot& s : snapshots_) {
    add(s.conv_history);
    add(s.delta_state);
  }
  return floats * sizeof(float) + halves * sizeof(uint16_t);
}

KimiKdaSnapshot KimiState::kda() const {
  return {data_.conv_history, data_.delta_state};
}

void KimiState::snapshot_into(std::size_t index) {
  if (snapshots_.size() <= index) snapshots_.resize(index + 1);
  KimiKdaSnapshot& to = snapshots_[index];
  to.conv_history = data_.conv_history;
  to.delta_state = data_.delta_state;
}

void KimiState::begin_verify() {
  snapshot_into(0);
  verified_rows_ = 0;
  snapshot_rows_ = 1;
}

void KimiState::after_verify_row() {
  snapshot_into(static_cast<std::size_t>(snapshot_rows_++));
}

void KimiState::begin_verify_rows(int64_t rows) {
  snapshot_into(0);
  // The fused step writes every entry 1 … rows − 1 whole: only their shape matters here.
  for (int64_t r = 1; r < rows; ++r) {
    if (static_cast<int64_t>(snapshots_.size()) <= r ||
        snapshots_[static_cast<std::size_t>(r)].delta_state.size() != data_.delta_state.size()) {
      snapshot_into(static_cast<std::size_t>(r));
    }
  }
  verified_rows_ = 0;
  snapshot_rows_ = rows;
}

void KimiState::reserve_latent_rows(int64_t end) {
  const auto floats = static_cast<std::size_t>(end * config_->mla_latent_cache_width());
  if (bf16_cache_) {
    for (auto& c : data_.latent_cache_bf16) c.resize(std::max(c.size(), floats));
  } else {
    for (auto& c : data_.latent_cache) c.resize(std::max(c.size(), floats));
  }
}

kernels::KvCache& KimiState::kv_cache(int64_t slot) {
  fail("a Kimi K3 sequence has no paged KV cache (slot {})", slot);
}

program::RecurrentState KimiState::recurrent_state(int64_t slot) {
  const auto s = static_cast<std::size_t>(slot);
  return {data_.conv_history.at(s).data(), data_.delta_state.at(s).data()};
}

program::RecurrentState KimiState::recurrent_snapshot(int64_t slot, int64_t rows) {
  KimiKdaSnapshot& snapshot = snapshots_.at(static_cast<std::size_t>(rows));
  const auto s = static_cast<std::size_t>(slot);
  return {snapshot.conv_history.at(s).data(), snapshot.delta_state.at(s).data()};
}

program::LatentRows KimiState::latent_rows(int64_t slot) {
  const auto s = static_cast<std::size_t>(slot);
  const int64_t width = config_->mla_latent_cache_width();
  if (bf16_cache_) return {nullptr, data_.latent_cache_bf16.at(s).data(), width};
  return {data_.latent_cache.at(s).data(), nullptr, width};
}

KimiKdaSnapshot KimiState::kda_after(int64_t rows) const {
  if (rows < 0 || rows > verified_rows_) {
    fail("the last verify ran {} rows; there is no state after {}", verified_rows_, rows);
  }
  return rows == verified_rows_ ? kda() : snapshots_[static_cast<std::size_t>(rows)];
}

void KimiState::commit(int64_t kept) {
  const int64_t dropped = verified_rows_ - kept;
  if (dropped > 0) {
    // Swapped, not moved: the snapshot's memory serves the next verify.
    KimiKdaSnapshot& back = snapshots_[static_cast<std::size_t>(kept)];
    std::swap(data_.conv_history, back.conv_history);
    std::swap(data_.delta_state, back.delta_state);
    data_.position -= dropped;
    const auto latent = static_cast<std::size_t>(config_->mla_latent_cache_width());
    const auto expanded = static_cast<std::size_t>(config_->mla_kv_cache_width());
    const auto positions = static_cast<std::size_t>(data_.position);
    for (auto& c : data_.latent_cache) c.resize(std::min(c.size(), positions * latent));
    for (auto& c : data_.latent_cache_bf16) c.resize(std::min(c.size(), positions * latent));
    for (auto& c : data_.kv_cache) c.resize(std::min(c.size(), positions * expanded));
    sync_position();
  }
  keep_all();
}

}  // namespace md
