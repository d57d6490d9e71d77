// Ranks as threads of one process sharing memory (communicator.h): for tests, and for one host
// without MPI (`--tp N` in a single process). A collective publishes each rank's buffer, waits
// until every rank has, copies what it needs straight from the others' buffers, and waits again
// before returning, so no rank reuses its buffer while another still reads it. Waiting sleeps
// on the futex of an atomic (C++20 wait/notify): ranks share cores with their worker teams.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace md::dist {

class InProcessGroup {
 public:
  explicit InProcessGroup(int ranks);
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const { return static_cast<int>(ranks_.size()); }
  // Rank r's communicator; each is used by one thread at a time.
  Communicator& rank(int r);
  // Clears an abort so that the group can be used again; only once every rank has returned from
  // its collectives (none is waiting in one). In-process ranks that all failed alike (a request
  // every rank refused) go on serving; MPI ranks cannot (their job ends).
  void recover();

 private:
  class Rank;
  friend class Rank;

  // Returns once every rank has arrived (or throws md::Error once any rank aborted).
  void arrive_and_wait();
  void fail(int rank, const std::string& why);
  void throw_if_aborted() const;

  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<const void*> published_;  // each rank's buffer in the current collective
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mutex_;
  std::string abort_message_;
};

}  // namespace md::dist
