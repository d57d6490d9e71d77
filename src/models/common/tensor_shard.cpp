#include "models/common/tensor_shard.h"

#include <cstring>

#include "base/error.h"
#include "base/ggml_type.h"

namespace md::shard {

HeadShard attention_heads(int64_t heads, int64_t kv_heads, int rank, int ranks,
                          const std::string& model) {
  if (kv_heads < 1 || heads % kv_heads != 0) {
    fail("{}: {} query heads do not form groups over {} KV heads", model, heads, kv_heads);
  }
  const int64_t group = heads / kv_heads;
  if (ranks <= kv_heads) {
    const Range kv = even_part(kv_heads, ranks, rank);
    return {{kv.begin * group, kv.end * group}, kv};
  }
  if (ranks % kv_heads != 0) {
    fail(
        "{}: {} ranks cannot share {} KV heads (with more ranks than KV heads, each KV head is "
        "replicated on the same number of ranks: use a multiple of {}, or at most {} ranks)",
        model, ranks, kv_heads, kv_heads, kv_heads);
  }
  const int replicas = static_cast<int>(ranks / kv_heads);
  if (group < replicas) {
    fail("{}: {} ranks leave some rank without a query head ({} per KV head)", model, ranks, group);
  }
  const int64_t kv = rank / replicas;
  const Range share = even_part(group, replicas, rank % replicas);
  return {{kv * group + share.begin, kv * group + share.end}, {kv, kv + 1}};
}

kernels::GgufMatrix rows_of(const kernels::GgufMatrix& w, Range range) {
  if (range.begin < 0 || range.end > w.rows || range.size() < 1) {
    fail("rows {}..{} of a matrix of {} rows", range.begin, range.end, w.rows);
  }
  kernels::GgufMatrix slice = w;
  slice.data = w.row(range.begin);
  slice.rows = range.size();
  slice.packed = nullptr;  // repacked for the slice where needed (set_matmul_inputs)
  return slice;
}

int64_t column_unit(const kernels::GgufMatrix& w) {
  return ggml_type_info(w.type).block_elems;
}

kernels::GgufMatrix columns_of(const kernels::GgufMatrix& w, Range range,
                               std::vector<std::unique_ptr<std::uint8_t[]>>& owned) {
  const GgmlTypeInfo& info = ggml_type_info(w.type);
  const auto unit = static_cast<int64_t>(info.block_elems);
  if (range.begin < 0 || range.end > w.cols || range.size() < 1 || range.begin % unit != 0 ||
      range.end % unit != 0) {
    fail("columns {}..{} of a {} matrix of {} columns (blocks of {})", range.begin, range.end,
         info.name, w.cols, unit);
  }
  const auto offset = static_cast<std::size_t>(range.begin / unit) * info.block_bytes;
  const auto bytes = static_cast<std::size_t>(range.size() / unit) * info.block_bytes;
  kernels::GgufMatrix slice = w;
  slice.cols = range.size();
  slice.packed = nullptr;
  if (w.type != GgmlType::kBF16) {
    // Rows stay row_bytes apart in the mapping: the kernels read a row's first `cols` elements.
    slice.data = w.data + offset;
    return slice;
  }
  // The bf16 kernels read rows exactly one row apart: the slice is copied.
  auto copy = std::make_unique<std::uint8_t[]>(bytes * static_cast<std::size_t>(w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    std::memcpy(copy.get() + static_cast<std::size_t>(r) * bytes, w.row(r) + offset, bytes);
  }
  slice.data = copy.get();
  slice.row_bytes = bytes;
  owned.push_back(std::move(copy));
  return slice;
}

}  // namespace md::shard
