// Looks up a family's tensors in a checkpoint by name and checks each one's dtype and shape
// against what the config implies, with errors that name the tensor, the file and the mismatch.
// Bf16 weights are returned as pointers into the mapped files (read in place).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/bf16_matrix.h"

namespace md {

// Storage for the rare tensor whose bytes are not 2-byte aligned in the file and so cannot be
// read in place as bf16, and for weights made at load (int8 quantisation, synthetic shapes); it
// must outlive the bound pointers.
using OwnedWeights = std::vector<std::unique_ptr<uint16_t[]>>;

// `bytes` of new storage appended to `owned` (16-byte aligned, so any weight type fits).
inline void* owned_bytes(OwnedWeights& owned, std::size_t bytes) {
  owned.push_back(std::make_unique<uint16_t[]>((bytes + 1) / 2));
  return owned.back().get();
}

class WeightBinder {
 public:
  // `family` names the model kind in messages ("qwen3_5").
  WeightBinder(const Checkpoint& checkpoint, std::string family, OwnedWeights& owned);

  bool contains(std::string_view name) const { return checkpoint_.contains(name); }

  // A bf16 tensor of exactly `shape`.
  const uint16_t* bf16(const std::string& name, std::vector<int64_t> shape);
  kernels::Bf16Matrix matrix(const std::string& name, int64_t rows, int64_t cols);
  // A small f32 vector of length n stored as F32 or BF16, widened to f32.
  std::vector<float> f32_vector(const std::string& name, int64_t n);
  // An F32 or BF16 tensor of exactly `shape`, widened to f32 (row-major).
  std::vector<float> f32_tensor(const std::string& name, const std::vector<int64_t>& shape);
  // The same for a tensor of `count` elements in any shape (scales whose stored shape varies
  // between producers, e.g. [E, 2] or [2E]).
  std::vector<float> f32_values(const std::string& name, int64_t count);
  // The bytes of a tensor of exactly `dtype` and `shape`, read in place (U8 codes, F8 scales).
  const std::uint8_t* bytes(const std::string& name, DType dtype,
                            const std::vector<int64_t>& shape);

  const Checkpoint& checkpoint() const { return checkpoint_; }

 private:
  const TensorView& find(const std::string& name) const;
  void check_shape(const TensorView& tensor, const std::vector<int64_t>& shape) const;
  std::vector<float> widen(const TensorView& tensor) const;

  const Checkpoint& checkpoint_;
  std::string family_;
  OwnedWeights& owned_;
};

}  // namespace md
