// A lock-free Prometheus histogram with fixed bucket bounds. Observing is a binary search plus two
// relaxed atomic adds, cheap enough for the engine's per-token step loop.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace md::server {

class Histogram {
 public:
  // A consistent-enough copy for rendering: `cumulative` has one entry per bound plus a final
  // +Inf entry, and `count` is that final entry, so `_count` always equals the +Inf bucket.
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };

  // `bounds` must be finite and strictly increasing; the +Inf bucket is implicit.
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)),
        buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Records `times` observations of `value`. A NaN or infinite value is dropped, because it would
  // poison `_sum` for the life of the process; a negative one (a clock or caller bug) counts as 0.
  void observe(double value, uint64_t times = 1) {
    if (times == 0 || !std::isfinite(value)) return;
    value = std::max(value, 0.0);
    // Prometheus buckets are "less than or equal": the first bound >= value owns it.
    const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
    const auto index = static_cast<std::size_t>(it - bounds_.begin());
    buckets_[index].fetch_add(times, std::memory_order_relaxed);
    sum_.fetch_add(value * static_cast<double>(times), std::memory_order_relaxed);
  }

  Snapshot snapshot() const {
    Snapshot s;
    s.bounds = bounds_;
    s.cumulative.reserve(bounds_.size() + 1);
    uint64_t running = 0;
    for (std::size_t i = 0; i <= bounds_.size(); ++i) {
      running += buckets_[i].load(std::memory_order_relaxed);
      s.cumulative.push_back(running);
    }
    s.count = running;
    s.sum = sum_.load(std::memory_order_relaxed);
    return s;
  }

  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  // Per-bucket (not cumulative) counts, so one observation touches one counter.
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0.0};
};

}  // namespace md::server
