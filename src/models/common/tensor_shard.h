// What each rank of a tensor-parallel model holds (the seed's TP layouts, ARCHITECTURE.md "Tensor
// parallelism"): even shares of heads, FFN columns and vocabulary, and the weight slices that go
// with them. A column-parallel matrix (q, k, v, gate, up, lm_head) keeps its rank's output rows;
// a row-parallel one (o, down) keeps the input columns that match them, and its products are
// summed across ranks (program kAllReduce).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dist/partition.h"
#include "kernels/gguf_matmul.h"
#include "kernels/weight_matrix.h"

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

// An even share of `count` units (`what`: "KDA heads") for rank `rank` of `ranks`, each rank
// taking at least one; md::Error naming `model` otherwise.
Range even_share(int64_t count, int rank, int ranks, const std::string& what,
                 const std::string& model);
// Heads [begin, end) as the rows or channels [begin·width, end·width) that hold them.
inline Range scaled(Range heads, int64_t width) {
  return {heads.begin * width, heads.end * width};
}

// Expert parallelism: the routed experts (of `experts`) that rank `rank` of `ranks` runs, an even
// share (every rank maps them all; it touches the pages of its own). Throws md::Error (naming
// `model`) when some rank would run none.
Range routed_experts(int64_t experts, int rank, int ranks, const std::string& model);
// What a rank running `held` of `experts` routed experts reads of `bytes`, the experts a token
// takes on one rank: its expected share (the experts a token takes fall anywhere).
std::size_t expert_share(std::size_t bytes, Range held, int64_t experts);

// The column unit a row-parallel split of `w` must respect: its format's block (GGUF), else 1.
int64_t column_unit(const kernels::WeightMatrix& w);

// Rows [ranges…] of `w` in order, and input columns [ranges…] in order (bf16 and GGUF formats;
// the others are refused naming `what`): a view where one range is asked for and the format
// allows it (a GGUF block format's column view keeps the rows' stride, the kernels read a row's
// first `cols` elements), else a copy kept in `owned`. Columns must start and end on the
// format's blocks (md::Error otherwise).
kernels::WeightMatrix rows_of(const kernels::WeightMatrix& w, std::span<const Range> ranges,
                              std::vector<std::unique_ptr<std::uint8_t[]>>& owned,
                              const std::string& what);
kernels::WeightMatrix columns_of(const kernels::WeightMatrix& w, std::span<const Range> ranges,
                                 std::vector<std::unique_ptr<std::uint8_t[]>>& owned,
                                 const std::string& what);
// Σ of the ranges' sizes: the rows or columns a cut keeps.
int64_t covered(std::span<const Range> ranges);

// f32 vector rows [ranges…] of `width` values each, in order.
std::vector<float> rows_of(const std::vector<float>& v, int64_t width,
                           std::span<const Range> ranges);

}  // namespace md::shard
