#include "models/kimi/kimi_state.h"

#include <algorithm>

#include "base/error.h"

namespace md {

KimiState::KimiState(const KimiK3Config& config, KimiSequenceState fresh, int64_t capacity)
    : SequenceState(capacity), config_(&config), data_(std::move(fresh)) {}

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

void KimiState::begin_verify() {
  snapshots_.clear();
  snapshots_.push_back(kda());
  verified_rows_ = 0;
}

void KimiState::after_verify_row() {
  snapshots_.push_back(kda());
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
    KimiKdaSnapshot& back = snapshots_[static_cast<std::size_t>(kept)];
    data_.conv_history = std::move(back.conv_history);
    data_.delta_state = std::move(back.delta_state);
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
