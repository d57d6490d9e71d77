// How a dimension is shared among ranks: even parts in whole units. Both the model loaders (which
// weight rows and columns a rank keeps, models/common/tensor_shard.h) and the collectives that
// put the parts back together (program kArgmax over a vocabulary split) compute it, so it lives
// below both.
#pragma once

#include <cstdint>

namespace md::dist {

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Part `part` of `parts` of [0, total), in whole units of `unit` (total a multiple of it): the
// first total/unit % parts parts take one unit more than the rest. Throws md::Error for
// arguments that do not describe a split.
Range even_part(int64_t total, int parts, int part, int64_t unit = 1);
// The largest part's size (part 0's).
int64_t largest_part(int64_t total, int parts, int64_t unit = 1);

}  // namespace md::dist
