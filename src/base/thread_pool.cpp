#include "base/thread_pool.h"

#include <algorithm>

namespace md {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = hardware_threads();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

int ThreadPool::hardware_threads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

void ThreadPool::run_share(int index, int parts) {
  int64_t begin = n_ * index / parts;
  int64_t end = n_ * (index + 1) / parts;
  if (begin < end) (*body_)(begin, end);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  int parts = static_cast<int>(std::min<int64_t>(size(), n));
  if (parts == 1) {
    body(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    body_ = &body;
    n_ = n;
    parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  wake_.notify_all();
  run_share(0, parts);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  body_ = nullptr;
}

void ThreadPool::parallel_for_work(int64_t n, int64_t work,
                                   const std::function<void(int64_t, int64_t)>& body) {
  constexpr int64_t kMinimumParallelWork = int64_t{1} << 20;
  if (work < kMinimumParallelWork) {
    if (n > 0) body(0, n);
    return;
  }
  parallel_for(n, body);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    int parts = 0;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      parts = parts_;
    }
    if (index < parts) {
      run_share(index, parts);
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_all();
    }
  }
}

}  // namespace md
