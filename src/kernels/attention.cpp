#include "kernels/attention.h"

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

}  // namespace

void attend_tiles(std::span<const AttentionQuery> queries, const KeyValueTiles<float>& tiles,
                  int64_t head_dim, float scale) {
  active().f32(queries, tiles, head_dim, scale);
}

void attend_tiles(std::span<const AttentionQuery> queries, const KeyValueTiles<uint16_t>& tiles,
                  int64_t head_dim, float scale) {
  active().bf16(queries, tiles, head_dim, scale);
}

template <typename T>
RegroupedTiles<T>::RegroupedTiles(const T* keys, const T* values, int64_t n_keys, int64_t stride,
                                  int64_t head_dim) {
  const int64_t tiles = (n_keys + kAttentionTileKeys - 1) / kAttentionTileKeys;
  const int64_t tile_elems = kAttentionTileKeys * head_dim;
  keys_.resize(static_cast<std::size_t>(tiles * tile_elems));
  values_.resize(keys_.size());
  for (int64_t t = 0; t < n_keys; ++t) {
    const int64_t tile = t / kAttentionTileKeys * tile_elems, slot = t % kAttentionTileKeys;
    for (int64_t d = 0; d < head_dim; ++d) {
      keys_[static_cast<std::size_t>(tile + d * kAttentionTileKeys + slot)] = keys[t * stride + d];
      values_[static_cast<std::size_t>(tile + slot * head_dim + d)] = values[t * stride + d];
    }
  }
  for (int64_t b = 0; b < tiles; ++b) {
    key_at_.push_back(keys_.data() + b * tile_elems);
    value_at_.push_back(values_.data() + b * tile_elems);
  }
}

template class RegroupedTiles<float>;
template class RegroupedTiles<uint16_t>;

namespace {

template <typename T>
void attend_row_major(const float* q, const T* keys, const T* values, int64_t n_keys,
                      int64_t stride, int64_t head_dim, float scale, float* out) {
  const AttentionQuery query{q, n_keys, out};
  attend_tiles({&query, 1}, RegroupedTiles<T>(keys, values, n_keys, stride, head_dim).view(),
               head_dim, scale);
}

}  // namespace

void attend(const float* q, const float* keys, const float* values, int64_t n_keys, int64_t stride,
            int64_t head_dim, float scale, float* out) {
  attend_row_major(q, keys, values, n_keys, stride, head_dim, scale, out);
}

void attend(const float* q, const uint16_t* keys, const uint16_t* values, int64_t n_keys,
            int64_t stride, int64_t head_dim, float scale, float* out) {
  attend_row_major(q, keys, values, n_keys, stride, head_dim, scale, out);
}

}  // namespace md::kernels
