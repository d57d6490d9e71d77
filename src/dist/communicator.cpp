#include "dist/communicator.h"

namespace md::dist {

void Communicator::all_reduce_sum(float* data, int64_t n) {
  const int ranks = size();
  if (ranks == 1 || n <= 0) return;
  const auto count = static_cast<std::size_t>(n);
  gathered_.resize(count * static_cast<std::size_t>(ranks));
  all_gather(data, count * sizeof(float), gathered_.data());
  for (std::size_t i = 0; i < count; ++i) {
    float sum = gathered_[i];
    for (int r = 1; r < ranks; ++r) sum += gathered_[static_cast<std::size_t>(r) * count + i];
    data[i] = sum;
  }
}

}  // namespace md::dist
