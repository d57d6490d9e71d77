// Element types found in checkpoints, and exact conversions of the narrow float formats to f32.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace md {

enum class DType : std::uint8_t {
  kBF16,
  kF16,
  kF32,
  kF64,
  kF8E4M3,
  kF8E5M2,
  kU8,
  kI8,
  kI16,
  kI32,
  kI64,
  kBool
};

// Safetensors spelling ("BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType type);
std::optional<DType> dtype_from_name(std::string_view name);
std::size_t dtype_size(DType type);

inline float bf16_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// Round-to-nearest-even, NaN preserved as a quiet NaN.
inline std::uint16_t f32_to_bf16(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

float f16_to_f32(std::uint16_t bits);
// OCP FP8 E4M3 (fn variant: no infinities, 0x7f/0xff are NaN), as torch.float8_e4m3fn.
float f8e4m3_to_f32(std::uint8_t bits);
float f8e5m2_to_f32(std::uint8_t bits);

}  // namespace md
