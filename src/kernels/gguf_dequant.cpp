#include "kernels/gguf_dequant.h"

#include <cstring>

#include "base/dtype.h"

namespace md::kernels {
namespace {

// Block layouts (ggml's block_* structs, little-endian, packed; `d` scales are f16):
//   Q8_0  d, int8 q[32]                          x = q·d
//   Q4_0  d, u8 qs[16]                           x[j] = (lo(qs[j]) - 8)·d, x[j+16] = (hi - 8)·d
//   Q4_1  d, m, u8 qs[16]                        x = q·d + m, nibbles as Q4_0
//   Q5_0  d, u8 qh[4], u8 qs[16]                 x = (q - 16)·d, q = nibble | bit j of qh << 4
//   Q4_K  d, dmin, u8 scales[12], u8 qs[128]     8 sub-blocks of 32 with 6-bit scale and min
//   Q5_K  d, dmin, u8 scales[12], u8 qh[32], u8 qs[128]   Q4_K's plus a fifth bit per weight
//   Q6_K  u8 ql[128], u8 qh[64], int8 sc[16], d  16 sub-blocks of 16, 6-bit q - 32
constexpr int kQ8_0Bytes = 34;
constexpr int kQ4_0Bytes = 18;
constexpr int kQ4_1Bytes = 20;
constexpr int kQ5_0Bytes = 22;
constexpr int kQ4_KBytes = 144;
constexpr int kQ5_KBytes = 176;
constexpr int kQ6_KBytes = 210;

std::uint16_t load_u16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

float load_f16(const std::uint8_t* p) {
  return f16_to_f32(load_u16(p));
}

void f32_row(const std::uint8_t* src, float* dst, std::int64_t n) {
  std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
}

void f16_row(const std::uint8_t* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = load_f16(src + 2 * i);
}

void bf16_row(const std::uint8_t* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(src + 2 * i));
}

void q8_0_block(const std::uint8_t* block, float* dst) {
  const float d = load_f16(block);
  for (int j = 0; j < 32; ++j)
    dst[j] = static_cast<float>(static_cast<std::int8_t>(block[2 + j])) * d;
}

void q4_0_block(const std::uint8_t* block, float* dst) {
  const float d = load_f16(block);
  const std::uint8_t* qs = block + 2;
  for (int j = 0; j < 16; ++j) {
    dst[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
    dst[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void q4_1_block(const std::uint8_t* block, float* dst) {
  const float d = load_f16(block);
  const float m = load_f16(block + 2);
  const std::uint8_t* qs = block + 4;
  for (int j = 0; j < 16; ++j) {
    dst[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
    dst[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Element j < 16 is the low nibble of qs[j], element j + 16 the high nibble; bit j of the
// little-endian 32-bit qh is element j's fifth bit.
void q5_0_block(const std::uint8_t* block, float* dst) {
  const float d = load_f16(block);
  const std::uint32_t qh =
      static_cast<std::uint32_t>(block[2] | (block[3] << 8) | (block[4] << 16)) |
      (static_cast<std::uint32_t>(block[5]) << 24);
  const std::uint8_t* qs = block + 6;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    dst[j] = static_cast<float>(lo - 16) * d;
    dst[j + 16] = static_cast<float>(hi - 16) * d;
  }
}

// The 12 scale bytes pack eight 6-bit scales and eight 6-bit mins: sub-blocks 0-3 keep theirs in
// the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 keep their low 4 bits in
// bytes 8-11 (scale low nibble, min high nibble) and their top 2 bits in the spare top bits of
// bytes 0-3 (scales) and 4-7 (mins).
void q4_k_scale_min(const std::uint8_t* scales, int sub, int& scale, int& min) {
  if (sub < 4) {
    scale = scales[sub] & 0x3f;
    min = scales[sub + 4] & 0x3f;
  } else {
    scale = (scales[sub + 4] & 0x0f) | ((scales[sub - 4] >> 6) << 4);
    min = (scales[sub + 4] >> 4) | ((scales[sub] >> 6) << 4);
  }
}

// Each 32-byte run of qs holds two sub-blocks: low nibbles the first, high nibbles the second.
void q4_k_block(const std::uint8_t* block, float* dst) {
  const float d = load_f16(block);
  const float dmin = load_f16(block + 2);
  const std::uint8_t* scales = block + 4;
  const std::uint8_t* qs = block + 16;
  for (int pair = 0; pair < 4; ++pair) {
    int scale_lo, min_lo, scale_hi, min_hi;
    q4_k_scale_min(scales, 2 * pair, scale_lo, min_lo);
    q4_k_scale_min(scales, 2 * pair + 1, scale_hi, min_hi);
    const float d_lo = d * static_cast<float>(scale_lo), m_lo = dmin * static_cast<float>(min_lo);
    const float d_hi = d * static_cast<float>(scale_hi), m_hi = dmin * static_cast<float>(min_hi);
    const std::uint8_t* q = qs + 32 * pair;
    float* out = dst + 64 * pair;
    for (int l = 0; l < 32; ++l) {
      out[l] = d_lo * static_cast<float>(q[l] & 0x0f) - m_lo;
      out[l + 32] = d_hi * static_cast<float>(q[l] >> 4) - m_hi;
    }
  }
}

// Q4_K's layout with qh[32] before qs: sub-block g's weight l takes bit g of qh[l] as its fifth
// bit (the nibble as Q4_K's). (d·scale)·q is exact, so each weight rounds once, in the "− m".
void q5_k_block(const std::uint8_t* block, float* dst) {
  const float d = load_f16(block);
  const float dmin = load_f16(block + 2);
  const std::uint8_t* scales = block + 4;
  const std::uint8_t* qh = block + 16;
  const std::uint8_t* qs = block + 48;
  for (int g = 0; g < 8; ++g) {
    int scale, min;
    q4_k_scale_min(scales, g, scale, min);
    const float dg = d * static_cast<float>(scale), mg = dmin * static_cast<float>(min);
    const std::uint8_t* q = qs + 32 * (g / 2);
    for (int l = 0; l < 32; ++l) {
      const int nibble = g % 2 == 0 ? (q[l] & 0x0f) : (q[l] >> 4);
      const int value = nibble | (((qh[l] >> g) & 1) << 4);
      dst[32 * g + l] = dg * static_cast<float>(value) - mg;
    }
  }
}

// Each half of 128 elements uses 64 bytes of ql and 32 of qh. Element 32k + l of the half takes
// its low 4 bits from ql[l + 32(k % 2)] (low nibble for k < 2, high for k >= 2) and its top 2
// bits from bits 2k..2k+1 of qh[l].
void q6_k_block(const std::uint8_t* block, float* dst) {
  const std::uint8_t* ql_all = block;
  const std::uint8_t* qh_all = block + 128;
  const auto* sc = reinterpret_cast<const std::int8_t*>(block + 192);
  const float d = load_f16(block + 208);
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* ql = ql_all + 64 * half;
    const std::uint8_t* qh = qh_all + 32 * half;
    float* out = dst + 128 * half;
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t low_byte = ql[l + 32 * (k % 2)];
        const int low = k < 2 ? (low_byte & 0x0f) : (low_byte >> 4);
        const int high = (qh[l] >> (2 * k)) & 0x03;
        const int e = 32 * k + l;
        const float scale = d * static_cast<float>(sc[(128 * half + e) / 16]);
        out[e] = scale * static_cast<float>((low | (high << 4)) - 32);
      }
    }
  }
}

template <void (*Block)(const std::uint8_t*, float*), int kBytes, int kElems>
void blocks_row(const std::uint8_t* src, float* dst, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kElems; ++b) Block(src + b * kBytes, dst + b * kElems);
}

using RowFn = void (*)(const std::uint8_t*, float*, std::int64_t);

RowFn row_function(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return f32_row;
    case GgmlType::kF16:
      return f16_row;
    case GgmlType::kBF16:
      return bf16_row;
    case GgmlType::kQ8_0:
      return blocks_row<q8_0_block, kQ8_0Bytes, 32>;
    case GgmlType::kQ4_0:
      return blocks_row<q4_0_block, kQ4_0Bytes, 32>;
    case GgmlType::kQ4_1:
      return blocks_row<q4_1_block, kQ4_1Bytes, 32>;
    case GgmlType::kQ5_0:
      return blocks_row<q5_0_block, kQ5_0Bytes, 32>;
    case GgmlType::kQ4_K:
      return blocks_row<q4_k_block, kQ4_KBytes, 256>;
    case GgmlType::kQ5_K:
      return blocks_row<q5_k_block, kQ5_KBytes, 256>;
    case GgmlType::kQ6_K:
      return blocks_row<q6_k_block, kQ6_KBytes, 256>;
    default:
      return nullptr;
  }
}

}  // namespace

bool can_dequantize(GgmlType type) {
  return row_function(type) != nullptr;
}

bool dequantize_row(GgmlType type, const std::uint8_t* src, float* dst, std::int64_t n) {
  RowFn fn = row_function(type);
  if (fn == nullptr || n < 0 || n % ggml_type_info(type).block_elems != 0) return false;
  fn(src, dst, n);
  return true;
}

}  // namespace md::kernels
