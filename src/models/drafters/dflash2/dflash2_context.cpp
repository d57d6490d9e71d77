#include "models/drafters/dflash2/dflash2_context.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/matmul.h"
#include "kernels/norms.h"
#include "models/drafters/dflash2/dflash2_head_math.h"

namespace md::dflash2 {

namespace {

// Context rows are projected this many at a time, so a long prompt needs no scratch beyond
// the features themselves and the K/V scratch stays small.
constexpr int64_t kRowChunk = 64;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

}  // namespace

ContextStore::ContextStore(const DFlash2Config& config, const DFlash2Weights& weights,
                           const kernels::Rope& rope, ThreadPool* pool)
    : config_(config),
      weights_(weights),
      rope_(rope),
      pool_(pool),
      capacity_(config.sliding_window),
      slot_position_(size(capacity_), -1) {
  int64_t ring = config.num_key_value_heads * capacity_ * config.head_dim;
  keys_.assign(size(config.num_layers), std::vector<float>(size(ring)));
  values_.assign(size(config.num_layers), std::vector<float>(size(ring)));
}

void ContextStore::append(std::span<const float> taps, int64_t rows) {
  int64_t width = config_.fc_in_features();
  if (rows < 0 || static_cast<int64_t>(taps.size()) != rows * width) {
    fail("DFlash2 context: {} tap values for {} rows, expected {} per row ({} taps x {})",
         taps.size(), rows, width, config_.num_taps(), config_.hidden_size);
  }
  int64_t h = config_.hidden_size;
  auto eps = static_cast<float>(config_.rms_norm_eps);
  features_.resize(size((length_ + rows) * h));
  for (int64_t begin = 0; begin < rows; begin += kRowChunk) {
    int64_t n = std::min(kRowChunk, rows - begin);
    float* y = features_.data() + (length_ + begin) * h;
    kernels::matmul(weights_.fc, taps.data() + begin * width, n, y, pool_);
    for (int64_t t = 0; t < n; ++t) {
      kernels::rms_norm(y + t * h, weights_.hidden_norm, h, eps, kernels::NormWeight::kPlain,
                        y + t * h);
    }
  }
  length_ += rows;
}

void ContextStore::truncate(int64_t length) {
  if (length < 0 || length > length_) {
    fail("DFlash2 context: cannot truncate {} positions to {}", length_, length);
  }
  length_ = length;
  features_.resize(size(length * config_.hidden_size));
  for (int64_t& position : slot_position_) {
    if (position >= length) position = -1;
  }
}

std::span<const float> ContextStore::feature(int64_t position) const {
  auto h = size(config_.hidden_size);
  return std::span<const float>(features_).subspan(size(position) * h, h);
}

void ContextStore::prepare_keys(int64_t first) {
  first = std::max<int64_t>(first, 0);
  if (length_ - first > capacity_) {
    fail("DFlash2 context: {} key positions requested, the ring holds {}", length_ - first,
         capacity_);
  }
  // Positions are committed in order, so what is missing is a suffix (new positions) or, after a
  // truncation, whatever followed the cut: recomputing from the first missing one covers both.
  // Recomputing a present position rewrites the same values (matmul rows do not depend on the
  // batch), so the cache never depends on how appends and truncations were interleaved.
  for (int64_t p = first; p < length_; ++p) {
    if (slot_position_[size(slot(p))] != p) {
      compute_keys(p, length_);
      return;
    }
  }
}

void ContextStore::compute_keys(int64_t first, int64_t end) {
  const DFlash2Config& c = config_;
  int64_t hd = c.head_dim;
  auto eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> k(size(kRowChunk * c.kv_dim()));
  std::vector<float> v(size(kRowChunk * c.kv_dim()));
  std::vector<float> cos_values(size(hd / 2));
  std::vector<float> sin_values(size(hd / 2));
  for (int64_t begin = first; begin < end; begin += kRowChunk) {
    int64_t n = std::min(kRowChunk, end - begin);
    // Context rows enter the layers' k/v projections directly: no input norm and no block conv.
    const float* x = features_.data() + begin * c.hidden_size;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const DFlash2LayerWeights& w = weights_.layers[size(l)];
      kernels::matmul(w.k_proj, x, n, k.data(), pool_);
      kernels::matmul(w.v_proj, x, n, v.data(), pool_);
      for (int64_t t = 0; t < n; ++t) {
        int64_t position = begin + t;
        rope_.angles(position, cos_values.data(), sin_values.data());
        for (int64_t kv = 0; kv < c.num_key_value_heads; ++kv) {
          float* key = k.data() + t * c.kv_dim() + kv * hd;
          normalise_and_rotate(key, w.k_norm, hd, eps, rope_, cos_values.data(), sin_values.data());
          int64_t at = (kv * capacity_ + slot(position)) * hd;
          std::copy(key, key + hd, keys_[size(l)].begin() + at);
          const float* value = v.data() + t * c.kv_dim() + kv * hd;
          std::copy(value, value + hd, values_[size(l)].begin() + at);
        }
      }
    }
    mark_keys(begin, begin + n);
  }
}

void ContextStore::mark_keys(int64_t first, int64_t end) {
  for (int64_t p = first; p < end; ++p) slot_position_[size(slot(p))] = p;
}

int64_t ContextStore::extend(int64_t rows) {
  if (rows < 0) fail("DFlash2 context: cannot extend by {} positions", rows);
  int64_t first = length_;
  length_ += rows;
  features_.resize(size(length_ * config_.hidden_size));
  return first;
}

std::vector<KeyRun> ContextStore::key_runs(int64_t layer, int64_t kv_head, int64_t first,
                                           int64_t end) const {
  std::vector<KeyRun> runs(size(kMaxKeyRuns));
  runs.resize(size(key_runs(layer, kv_head, first, end, runs.data())));
  return runs;
}

int64_t ContextStore::key_runs(int64_t layer, int64_t kv_head, int64_t first, int64_t end,
                               KeyRun* out) const {
  return ring(layer).runs(kv_head, first, end, out);
}

kernels::KvRing ContextStore::ring(int64_t layer) const {
  // The rings are the store's own storage; the view hands out writable pointers for the fused
  // round, which writes the new positions' K/V through it.
  auto& self = const_cast<ContextStore&>(*this);
  return {self.keys_[size(layer)].data(), self.values_[size(layer)].data(), capacity_,
          config_.head_dim};
}

kernels::KvCache& ContextStore::kv_cache(int64_t slot) {
  fail("a DFlash2 context has no KV cache (slot {}), only sliding-window rings", slot);
}

}  // namespace md::dflash2
