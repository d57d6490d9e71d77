// The per-ISA implementations behind kernels/attention.h (one loop nest, attention_tiles.h).
// attention.cpp dispatches to the active one; tests reach the others through
// attention_kernels(isa), and every one gives the same bits.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/attention.h"
#include "kernels/isa.h"

namespace md::kernels {

template <typename T>
using AttendTilesFn = void (*)(std::span<const AttentionQuery> queries,
                               const KeyValueTiles<T>& tiles, int64_t head_dim, float scale);

struct AttentionKernels {
  AttendTilesFn<float> f32;
  AttendTilesFn<uint16_t> bf16;
};

// Defined by attention_scalar.cpp, attention_avx2.cpp and attention_avx512.cpp (the last two only
// on x86-64, each compiled for its instruction set alone).
extern const AttentionKernels kAttentionScalar;
extern const AttentionKernels kAttentionAvx2;
extern const AttentionKernels kAttentionAvx512;

// The implementation for `isa`, which the caller has checked the CPU supports.
const AttentionKernels& attention_kernels(Isa isa);

}  // namespace md::kernels
