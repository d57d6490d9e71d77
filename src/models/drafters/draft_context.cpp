#include "models/drafters/draft_context.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/matmul.h"
#include "kernels/norms.h"
#include "models/drafters/draft_context_program.h"

namespace md {

namespace {

// Context rows are projected this many at a time (a program's run, or the pool's products), so
// a long prompt needs no scratch beyond the features themselves and the K/V scratch stays small.
constexpr int64_t kRowChunk = DraftContextProgram::kMaxRows;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

}  // namespace

DraftContext::DraftContext(const DraftContextSpec& spec, const kernels::Rope& rope,
                           ThreadPool* pool, DraftContextProgram* program)
    : spec_(spec),
      rope_(rope),
      pool_(pool),
      program_(program),
      capacity_(spec.window),
      slot_position_(size(capacity_), -1) {
  int64_t ring = spec.kv_heads * capacity_ * spec.head_dim;
  keys_.assign(size(spec.num_layers()), std::vector<float>(size(ring)));
  values_.assign(size(spec.num_layers()), std::vector<float>(size(ring)));
}

void DraftContext::append(std::span<const float> taps, int64_t rows) {
  int64_t width = spec_.fc_in_features();
  if (rows < 0 || static_cast<int64_t>(taps.size()) != rows * width) {
    fail("{} context: {} tap values for {} rows, expected {} per row ({} taps x {})", spec_.family,
         taps.size(), rows, width, spec_.num_taps, spec_.hidden_size);
  }
  int64_t h = spec_.hidden_size;
  const float eps = spec_.eps;
  features_.resize(size((length_ + rows) * h));
  for (int64_t begin = 0; begin < rows; begin += kRowChunk) {
    int64_t n = std::min(kRowChunk, rows - begin);
    if (program_ != nullptr) {
      program_->features(*this, taps.data() + begin * width, length_ + begin, n);
      continue;
    }
    float* y = features_.data() + (length_ + begin) * h;
    kernels::matmul(*spec_.fc, taps.data() + begin * width, n, y, pool_);
    for (int64_t t = 0; t < n; ++t) {
      kernels::rms_norm(y + t * h, spec_.hidden_norm, h, eps, kernels::NormWeight::kPlain,
                        y + t * h);
    }
  }
  length_ += rows;
}

void DraftContext::truncate(int64_t length) {
  if (length < 0 || length > length_) {
    fail("{} context: cannot truncate {} positions to {}", spec_.family, length_, length);
  }
  length_ = length;
  features_.resize(size(length * spec_.hidden_size));
  for (int64_t& position : slot_position_) {
    if (position >= length) position = -1;
  }
}

std::span<const float> DraftContext::feature(int64_t position) const {
  auto h = size(spec_.hidden_size);
  return std::span<const float>(features_).subspan(size(position) * h, h);
}

void DraftContext::prepare_keys(int64_t first) {
  first = std::max<int64_t>(first, 0);
  if (length_ - first > capacity_) {
    fail("{} context: {} key positions requested, the ring holds {}", spec_.family, length_ - first,
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

void DraftContext::compute_keys(int64_t first, int64_t end) {
  if (program_ != nullptr) {
    for (int64_t begin = first; begin < end; begin += kRowChunk) {
      program_->keys(*this, begin, std::min(kRowChunk, end - begin));
    }
    return;
  }
  const DraftContextSpec& c = spec_;
  int64_t hd = c.head_dim;
  const float eps = c.eps;
  std::vector<float> k(size(kRowChunk * c.kv_dim()));
  std::vector<float> v(size(kRowChunk * c.kv_dim()));
  std::vector<float> cos_values(size(hd / 2));
  std::vector<float> sin_values(size(hd / 2));
  for (int64_t begin = first; begin < end; begin += kRowChunk) {
    int64_t n = std::min(kRowChunk, end - begin);
    // Context rows enter the layers' k/v projections directly: no input norm and no block conv.
    const float* x = features_.data() + begin * c.hidden_size;
    for (int64_t l = 0; l < c.num_layers(); ++l) {
      const DraftContextLayer& w = c.layers[size(l)];
      kernels::matmul(*w.k_proj, x, n, k.data(), pool_);
      kernels::matmul(*w.v_proj, x, n, v.data(), pool_);
      for (int64_t t = 0; t < n; ++t) {
        int64_t position = begin + t;
        rope_.angles(position, cos_values.data(), sin_values.data());
        for (int64_t kv = 0; kv < c.kv_heads; ++kv) {
          float* key = k.data() + t * c.kv_dim() + kv * hd;
          // k_norm (plain RMSNorm over the head), then RoPE at the position's angles.
          kernels::rms_norm(key, w.k_norm, hd, eps, kernels::NormWeight::kPlain, key);
          rope_.apply(key, cos_values.data(), sin_values.data());
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

void DraftContext::mark_keys(int64_t first, int64_t end) {
  for (int64_t p = first; p < end; ++p) slot_position_[size(slot(p))] = p;
}

int64_t DraftContext::extend(int64_t rows) {
  if (rows < 0) fail("{} context: cannot extend by {} positions", spec_.family, rows);
  int64_t first = length_;
  length_ += rows;
  features_.resize(size(length_ * spec_.hidden_size));
  return first;
}

std::vector<kernels::KeyRun> DraftContext::key_runs(int64_t layer, int64_t kv_head, int64_t first,
                                                    int64_t end) const {
  std::vector<kernels::KeyRun> runs(size(kMaxKeyRuns));
  runs.resize(size(key_runs(layer, kv_head, first, end, runs.data())));
  return runs;
}

int64_t DraftContext::key_runs(int64_t layer, int64_t kv_head, int64_t first, int64_t end,
                               kernels::KeyRun* out) const {
  return ring(layer).runs(kv_head, first, end, out);
}

kernels::KvRing DraftContext::ring(int64_t layer) const {
  // The rings are the store's own storage; the view hands out writable pointers for the fused
  // round, which writes the new positions' K/V through it.
  auto& self = const_cast<DraftContext&>(*this);
  return {self.keys_[size(layer)].data(), self.values_[size(layer)].data(), capacity_,
          spec_.head_dim};
}

kernels::KvCache& DraftContext::kv_cache(int64_t slot) {
  fail("a {} context has no KV cache (slot {}), only sliding-window rings", spec_.family, slot);
}

}  // namespace md
