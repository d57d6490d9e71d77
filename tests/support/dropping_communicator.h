// Tests' negative control for tensor parallelism: a communicator that loses the other ranks'
// parts of its `drop`-th all-gather (the first all-reduce of layer 0 when drop is 0), as if that
// all-reduce were missing. It still takes part in the collective, so the ranks stay in step.
#pragma once

#include <cstring>
#include <string>

#include "dist/communicator.h"

namespace md::testing {

class DroppingCommunicator final : public dist::Communicator {
 public:
  DroppingCommunicator(dist::Communicator& inner, int drop) : inner_(inner), drop_(drop) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string transport() const override { return inner_.transport(); }
  void all_gather(const void* in, std::size_t bytes, void* out) override {
    inner_.all_gather(in, bytes, out);
    if (calls_++ != drop_) return;
    for (int r = 0; r < size(); ++r) {
      if (r != rank()) std::memset(static_cast<std::byte*>(out) + r * bytes, 0, bytes);
    }
  }
  void broadcast(void* data, std::size_t bytes, int root) override {
    inner_.broadcast(data, bytes, root);
  }
  void barrier() override { inner_.barrier(); }
  void abort(const std::string& why) override { inner_.abort(why); }

 private:
  dist::Communicator& inner_;
  int drop_;
  int calls_ = 0;
};

}  // namespace md::testing
