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

Range even_share(int64_t count, int rank, int ranks, const std::string& what,
                 const std::string& model) {
  if (count < ranks) {
    fail("{}: {} ranks cannot share {} {} (each rank takes at least one: use at most {} ranks)",
         model, ranks, count, what, count);
  }
  return even_part(count, ranks, rank);
}

Range routed_experts(int64_t experts, int rank, int ranks, const std::string& model) {
  return even_share(experts, rank, ranks, "routed experts", model);
}

std::size_t expert_share(std::size_t bytes, Range held, int64_t experts) {
  return bytes * static_cast<std::size_t>(held.size()) / static_cast<std::size_t>(experts);
}

int64_t column_unit(const kernels::WeightMatrix& w) {
  return w.format == kernels::WeightFormat::kGguf ? ggml_type_info(w.gguf_type).block_elems : 1;
}

namespace {

// Elements and bytes of one block of the matrix's format (bf16: one element, two bytes).
std::pair<int64_t, std::size_t> block_of(const kernels::WeightMatrix& w, const std::string& what) {
  switch (w.format) {
    case kernels::WeightFormat::kBf16:
      return {1, 2};
    case kernels::WeightFormat::kGguf: {
      const GgmlTypeInfo& info = ggml_type_info(w.gguf_type);
      return {info.block_elems, info.block_bytes};
    }
    default:
      fail("{}: tensor parallelism slices bf16 and GGUF matrices, not {}", what, w.format_name());
  }
}

}  // namespace

int64_t covered(std::span<const Range> ranges) {
  int64_t n = 0;
  for (const Range& r : ranges) n += r.size();
  return n;
}

kernels::WeightMatrix rows_of(const kernels::WeightMatrix& w, std::span<const Range> ranges,
                              std::vector<std::unique_ptr<std::uint8_t[]>>& owned,
                              const std::string& what) {
  (void)block_of(w, what);
  for (const Range& r : ranges) {
    if (r.begin < 0 || r.end > w.rows || r.size() < 0) {
      fail("{}: rows {}..{} of a matrix of {} rows", what, r.begin, r.end, w.rows);
    }
  }
  kernels::WeightMatrix slice = w;
  slice.rows = covered(ranges);
  slice.packed = nullptr;
  if (ranges.size() == 1) {
    slice.data = w.row(ranges[0].begin);
    return slice;
  }
  auto copy = std::make_unique<std::uint8_t[]>(w.row_bytes * static_cast<std::size_t>(slice.rows));
  std::size_t at = 0;
  for (const Range& r : ranges) {
    const std::size_t bytes = w.row_bytes * static_cast<std::size_t>(r.size());
    if (bytes > 0) std::memcpy(copy.get() + at, w.row(r.begin), bytes);
    at += bytes;
  }
  slice.data = copy.get();
  owned.push_back(std::move(copy));
  return slice;
}

kernels::WeightMatrix columns_of(const kernels::WeightMatrix& w, std::span<const Range> ranges,
                                 std::vector<std::unique_ptr<std::uint8_t[]>>& owned,
                                 const std::string& what) {
  const auto [unit, unit_bytes] = block_of(w, what);
  for (const Range& r : ranges) {
    if (r.begin < 0 || r.end > w.cols || r.begin % unit != 0 || r.end % unit != 0) {
      fail("{}: columns {}..{} of a {} matrix of {} columns (blocks of {})", what, r.begin, r.end,
           w.format_name(), w.cols, unit);
    }
  }
  kernels::WeightMatrix slice = w;
  slice.cols = covered(ranges);
  slice.packed = nullptr;
  const std::size_t row_bytes = static_cast<std::size_t>(slice.cols / unit) * unit_bytes;
  // (GGUF BF16 goes to the bf16 kernels, which read rows exactly one row apart: copied.)
  if (ranges.size() == 1 && w.format == kernels::WeightFormat::kGguf &&
      w.gguf_type != GgmlType::kBF16) {
    // Rows stay row_bytes apart in the mapping; the kernels read a row's first `cols` elements.
    slice.data = w.data + static_cast<std::size_t>(ranges[0].begin / unit) * unit_bytes;
    return slice;
  }
  auto copy = std::make_unique<std::uint8_t[]>(row_bytes * static_cast<std::size_t>(w.rows));
  for (int64_t row = 0; row < w.rows; ++row) {
    std::size_t at = static_cast<std::size_t>(row) * row_bytes;
    for (const Range& r : ranges) {
      const std::size_t bytes = static_cast<std::size_t>(r.size() / unit) * unit_bytes;
      std::memcpy(copy.get() + at,
                  w.row(row) + static_cast<std::size_t>(r.begin / unit) * unit_bytes, bytes);
      at += bytes;
    }
  }
  slice.data = copy.get();
  slice.row_bytes = row_bytes;
  owned.push_back(std::move(copy));
  return slice;
}

std::vector<float> rows_of(const std::vector<float>& v, int64_t width,
                           std::span<const Range> ranges) {
  std::vector<float> out;
  for (const Range& r : ranges) {
    out.insert(out.end(), v.begin() + r.begin * width, v.begin() + r.end * width);
  }
  return out;
}

}  // namespace md::shard
