// A fixed team of worker threads for data-parallel loops (matmul rows, heads). The caller's
// thread takes part, so a pool of N threads runs N-1 workers. Not the megakernel executor: each
// parallel_for is one fork/join, which is what the op-by-op reference path wants.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace md {

class ThreadPool {
 public:
  // threads <= 0 means one per hardware thread.
  explicit ThreadPool(int threads = 1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls body(begin, end) on disjoint contiguous ranges covering [0, n), statically balanced,
  // and returns when all are done. Ranges never depend on timing, so results are reproducible.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body);

  // Like parallel_for, but runs inline when the loop is too small for a fork/join to pay off
  // (`work` is a rough count of multiply-adds; waking the team costs ~10-50 µs).
  void parallel_for_work(int64_t n, int64_t work,
                         const std::function<void(int64_t, int64_t)>& body);

  static int hardware_threads();

 private:
  void worker_loop(int index);
  void run_share(int index, int parts);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace md
