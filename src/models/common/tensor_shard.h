// What each rank of a tensor-parallel model holds (the seed's TP layouts, ARCHITECTURE.md "Tensor
// parallelism"): even shares of heads, FFN columns and vocabulary, and the weight slices that go
// with them. A column-parallel matrix (q, k, v, gate, up, lm_head) keeps its rank's output rows;
// a row-parallel one (o, down) keeps the input columns that match them, and its products are
// summed across ranks (program kAllReduce).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/partition.h"
#include "kernels/gguf_matmul.h"

namespace md::shard {

using dist::even_part;
using dist::largest_part;
using dist::Range;

// The attention heads and KV heads a rank computes. With at most as many ranks as KV heads, each
// rank takes whole KV heads with their groups of query heads; with more, each KV head is
// replicated on ranks / kv_heads ranks (which must divide evenly), each taking a share of its
// group. Throws md::Error (naming `model`) where the heads cannot be shared so.
struct HeadShard {
  Range heads, kv_heads;
};
HeadShard attention_heads(int64_t heads, int64_t kv_heads, int rank, int ranks,
                          const std::string& model);

// Rows [range) of `w` (a view into the same bytes).
kernels::GgufMatrix rows_of(const kernels::GgufMatrix& w, Range range);
// Input columns [range) of `w`: a view where the format allows (row_bytes may exceed a row of
// the slice), otherwise a copy kept in `owned`. The range must start and end on the format's
// blocks (md::Error otherwise).
kernels::GgufMatrix columns_of(const kernels::GgufMatrix& w, Range range,
                               std::vector<std::unique_ptr<std::uint8_t[]>>& owned);
// The column unit a row-parallel split of `w` must respect: its format's block.
int64_t column_unit(const kernels::GgufMatrix& w);

}  // namespace md::shard
