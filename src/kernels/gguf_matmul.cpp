#include "kernels/gguf_matmul.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/gguf_matmul_kernels.h"
#include "kernels/gguf_matmul_q8.h"
#include "kernels/isa.h"

namespace md::kernels {

namespace {

// Threads split the output rows at multiples of this (a multiple of every path's register
// block), so that no thread starts or ends inside one. Results do not depend on the split.
constexpr int64_t kThreadRowGrain = 16;

const GgufMatmulKernels& active() {
  static const GgufMatmulKernels& kernels = gguf_matmul_kernels(active_isa_level());
  return kernels;
}

// The q8 mode quantises the tile's activation rows on entry, into this thread's scratch (grown,
// never shrunk). Every tile of a product quantises the same rows to the same bits, so no tile
// depends on which one ran first. The scratch also keeps the rows it last quantised: the tiles a
// worker takes of one instruction read the same rows, and comparing them (a memcmp that fails in
// the first bytes for other rows) costs less than quantising again.
struct Q8Scratch {
  std::vector<float> rows;  // the quantised rows as they were, cols apart
  std::vector<std::int8_t> qs;
  std::vector<float> scales, sums;
  int64_t cols = 0, n_rows = 0;

  bool holds(const float* x, int64_t x_stride, int64_t n, int64_t c) const {
    if (c != cols || n != n_rows) return false;
    for (int64_t r = 0; r < n; ++r) {
      if (std::memcmp(rows.data() + r * c, x + r * x_stride, static_cast<std::size_t>(c) * 4) !=
          0) {
        return false;
      }
    }
    return true;
  }
  void quantise(const float* x, int64_t x_stride, int64_t n, int64_t c) {
    const auto need = static_cast<std::size_t>(n * c);
    if (qs.size() < need) qs.resize(need), rows.resize(need);
    if (scales.size() < need / kQ8Block)
      scales.resize(need / kQ8Block), sums.resize(need / kQ8Block);
    const int64_t blocks = c / kQ8Block;
    for (int64_t r = 0; r < n; ++r) {
      std::memcpy(rows.data() + r * c, x + r * x_stride, static_cast<std::size_t>(c) * 4);
      quantize_q8_row(x + r * x_stride, c, qs.data() + r * c, scales.data() + r * blocks,
                      sums.data() + r * blocks);
    }
    cols = c, n_rows = n;
  }
};

void q8_tile(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
             int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  thread_local Q8Scratch scratch;
  if (!scratch.holds(x, x_stride, n_rows, w.cols)) scratch.quantise(x, x_stride, n_rows, w.cols);
  gguf_q8_tile(
      w, row_begin, row_end,
      Q8Rows{scratch.qs.data(), scratch.scales.data(), scratch.sums.data(), w.cols, n_rows}, out);
}

}  // namespace

const GgufMatmulKernels& gguf_matmul_kernels(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kAvx512:
      return kGgufMatmulAvx512;
    case Isa::kAvx2:
      return kGgufMatmulAvx2;
    case Isa::kScalar:
      break;
  }
#else
  (void)isa;
#endif
  return kGgufMatmulScalar;
}

bool gguf_matmul_supports(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

bool gguf_matmul_accepts(const GgufMatrix& w) {
  if (!gguf_matmul_supports(w.type) || w.rows < 0 || w.cols <= 0 || w.data == nullptr) {
    return false;
  }
  const GgmlTypeInfo& info = ggml_type_info(w.type);
  if (w.cols % info.block_elems != 0) return false;
  // bf16 rows are read as a Bf16Matrix: densely packed.
  if (w.type == GgmlType::kBF16) {
    return w.row_bytes == static_cast<std::size_t>(w.cols) * 2 &&
           reinterpret_cast<std::uintptr_t>(w.data) % alignof(uint16_t) == 0;
  }
  const auto blocks = static_cast<std::size_t>(w.cols / info.block_elems);
  return w.row_bytes >= blocks * info.block_bytes;
}

Bf16Matrix bf16_view(const GgufMatrix& w) {
  return {reinterpret_cast<const uint16_t*>(w.data), w.rows, w.cols, w.inputs};
}

void gguf_matmul_tile(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                      int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  if (row_begin >= row_end || n_rows <= 0) return;
  if (w.type == GgmlType::kBF16) {  // the one bf16 path (matmul.h), whatever the container
    matmul_tile(bf16_view(w), row_begin, row_end, x, x_stride, n_rows, out);
    return;
  }
  if (w.inputs == MatmulInputs::kQ8 && gguf_q8_supports(w.type)) {
    q8_tile(w, row_begin, row_end, x, x_stride, n_rows, out);
    return;
  }
  active().tile_for(w.type)(w, row_begin, row_end, x, x_stride, n_rows, out);
}

void gguf_matmul(const GgufMatrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool) {
  const MatmulOut out{y, w.rows, false};
  if (pool == nullptr || pool->size() == 1) {
    gguf_matmul_tile(w, 0, w.rows, x, w.cols, n_rows, out);
    return;
  }
  const int64_t grains = (w.rows + kThreadRowGrain - 1) / kThreadRowGrain;
  pool->parallel_for_work(grains, w.rows * w.cols * n_rows, [&](int64_t begin, int64_t end) {
    const int64_t last = end * kThreadRowGrain < w.rows ? end * kThreadRowGrain : w.rows;
    gguf_matmul_tile(w, begin * kThreadRowGrain, last, x, w.cols, n_rows, out);
  });
}

}  // namespace md::kernels
