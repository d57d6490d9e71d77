#include "kernels/attention.h"

#include <algorithm>
#include <vector>

#include "kernels/attention_kernels.h"
#include "kernels/isa.h"

namespace md::kernels {

const AttentionKernels& attention_kernels(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kAvx512:
      return kAttentionAvx512;
    case Isa::kAvx2:
      return kAttentionAvx2;
    case Isa::kScalar:
      break;
  }
#else
  (void)isa;
#endif
  return kAttentionScalar;
}

namespace {

const AttentionKernels& active() {
  static const AttentionKernels& kernels = attention_kernels(active_isa_level());
  return kernels;
}

// Keys held row by row, regrouped into the tiles of attention.h (zeros past the last key), and
// value rows copied into whole tiles alike.
template <typename T>
void attend_rows(const float* q, const T* keys, const T* values, int64_t n_keys, int64_t stride,
                 int64_t head_dim, float scale, float* out) {
  const int64_t tiles = (n_keys + kAttentionTileKeys - 1) / kAttentionTileKeys;
  const auto tile_elems = static_cast<std::size_t>(kAttentionTileKeys * head_dim);
  std::vector<T> key_tiles(static_cast<std::size_t>(tiles) * tile_elems),
      value_tiles(key_tiles.size());
  std::vector<const T*> key_at(static_cast<std::size_t>(tiles)), value_at(key_at.size());
  for (int64_t t = 0; t < n_keys; ++t) {
    const std::size_t tile = static_cast<std::size_t>(t / kAttentionTileKeys) * tile_elems;
    const int64_t slot = t % kAttentionTileKeys;
    for (int64_t d = 0; d < head_dim; ++d) {
      key_tiles[tile + static_cast<std::size_t>(d * kAttentionTileKeys + slot)] =
          keys[t * stride + d];
    }
    std::copy_n(values + t * stride, head_dim,
                value_tiles.begin() + static_cast<std::ptrdiff_t>(tile) + slot * head_dim);
  }
  for (std::size_t b = 0; b < key_at.size(); ++b) {
    key_at[b] = key_tiles.data() + b * tile_elems;
    value_at[b] = value_tiles.data() + b * tile_elems;
  }
  const AttentionQuery query{q, n_keys, out};
  attend_tiles({&query, 1}, KeyValueTiles<T>{key_at.data(), value_at.data()}, head_dim, scale);
}

}  // namespace

void attend_tiles(std::span<const AttentionQuery> queries, const KeyValueTiles<float>& tiles,
                  int64_t head_dim, float scale) {
  active().f32(queries, tiles, head_dim, scale);
}

void attend_tiles(std::span<const AttentionQuery> queries, const KeyValueTiles<uint16_t>& tiles,
                  int64_t head_dim, float scale) {
  active().bf16(queries, tiles, head_dim, scale);
}

void attend(const float* q, const float* keys, const float* values, int64_t n_keys, int64_t stride,
            int64_t head_dim, float scale, float* out) {
  attend_rows(q, keys, values, n_keys, stride, head_dim, scale, out);
}

void attend(const float* q, const uint16_t* keys, const uint16_t* values, int64_t n_keys,
            int64_t stride, int64_t head_dim, float scale, float* out) {
  attend_rows(q, keys, values, n_keys, stride, head_dim, scale, out);
}

}  // namespace md::kernels
