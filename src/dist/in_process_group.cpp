#include "dist/in_process_group.h"

#include <cstring>

#include "base/error.h"

namespace md::dist {

namespace {

constexpr int kSpinRounds = 2000;

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

class InProcessGroup::Rank final : public Communicator {
 public:
  Rank(InProcessGroup& group, int rank) : group_(group), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  std::string transport() const override { return "in-process"; }

  void all_gather(const void* in, std::size_t bytes, void* out) override {
    group_.published_[static_cast<std::size_t>(rank_)] = in;
    group_.arrive_and_wait();
    auto* to = static_cast<std::byte*>(out);
    for (int r = 0; r < size(); ++r) {
      std::memcpy(to + static_cast<std::size_t>(r) * bytes,
                  group_.published_[static_cast<std::size_t>(r)], bytes);
    }
    group_.arrive_and_wait();  // every rank has read every buffer
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    if (root < 0 || root >= size()) md::fail("broadcast from rank {} of {}", root, size());
    group_.published_[static_cast<std::size_t>(rank_)] = data;
    group_.arrive_and_wait();
    if (rank_ != root) {
      std::memcpy(data, group_.published_[static_cast<std::size_t>(root)], bytes);
    }
    group_.arrive_and_wait();
  }

  void barrier() override { group_.arrive_and_wait(); }

  void abort(const std::string& why) override { group_.fail(rank_, why); }

 private:
  InProcessGroup& group_;
  int rank_;
};

InProcessGroup::InProcessGroup(int ranks) {
  if (ranks < 1) md::fail("a group needs at least one rank, not {}", ranks);
  published_.assign(static_cast<std::size_t>(ranks), nullptr);
  for (int r = 0; r < ranks; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
}

InProcessGroup::~InProcessGroup() = default;

Communicator& InProcessGroup::rank(int r) {
  if (r < 0 || r >= size()) md::fail("no rank {} in a group of {}", r, size());
  return *ranks_[static_cast<std::size_t>(r)];
}

void InProcessGroup::arrive_and_wait() {
  // The generation first, then the abort flag: an abort sets the flag before it moves the
  // generation, so a rank either sees the flag here or sees the generation move while it waits.
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  throw_if_aborted();
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == size()) {
    // The last to arrive opens the next generation. Nobody can arrive for it before this store:
    // every other rank is still waiting on this one.
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    throw_if_aborted();  // a rank that aborted meanwhile may not have written what it publishes
    return;
  }
  // The other ranks are usually microseconds away (a step's collectives come every few hundred
  // microseconds): spin a little before sleeping, as a futex wake-up costs about as much.
  for (int spin = 0; spin < kSpinRounds; ++spin) {
    if (generation_.load(std::memory_order_acquire) != generation) break;
    pause();
  }
  while (generation_.load(std::memory_order_acquire) == generation) {
    generation_.wait(generation, std::memory_order_acquire);
  }
  throw_if_aborted();
}

void InProcessGroup::fail(int rank, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (aborted_.load()) return;  // the first failure is the one reported
    abort_message_ = "rank " + std::to_string(rank) + " failed: " + why;
    aborted_.store(true, std::memory_order_release);
  }
  // Wakes every waiting rank; they see the abort and throw.
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
}

void InProcessGroup::recover() {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  arrived_.store(0, std::memory_order_relaxed);
  abort_message_.clear();
  aborted_.store(false, std::memory_order_release);
}

void InProcessGroup::throw_if_aborted() const {
  if (!aborted_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(abort_mutex_);
  throw Error(abort_message_);
}

}  // namespace md::dist
