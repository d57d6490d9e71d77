// Q4_0, Q4_1 and Q8_0 rows regrouped for the q8 integer-dot path (gguf_matmul_q8.h): in the
// file, each block keeps its f16 scale (and minimum) next to its quant bytes, so a kernel that
// works on several rows converts one scale at a time. Packed, the rows go in groups of eight,
// and for each block column b a group stores
//   d[8] (f16), then for Q4_1 m[8] (f16), then the eight rows' quant bytes (16 nibble bytes, or
//   32 int8 for Q8_0) in row order
// — the same bytes as the file's eight blocks (160 for Q4_1, 144 for Q4_0, 272 for Q8_0), so that
// one vector conversion yields the eight rows' scales. A last group with fewer than eight rows is
// padded with zero blocks. Packing changes no value: the packed path follows the same numerics
// contract bitwise (tests).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gguf_matmul.h"

namespace md::kernels {

constexpr int kQ8PackRows = 8;

// Whether `type` is packed for the q8 path (Q4_0, Q4_1, Q8_0).
bool gguf_q8_packs(GgmlType type);

// Bytes of one packed group (eight rows, every block column), and of the whole packed matrix.
std::size_t gguf_q8_group_bytes(const GgufMatrix& w);
std::size_t gguf_q8_packed_bytes(const GgufMatrix& w);

// Writes w's rows, packed as above, to `out` (gguf_q8_packed_bytes(w) bytes).
void pack_gguf_q8_rows(const GgufMatrix& w, std::uint8_t* out);

}  // namespace md::kernels
