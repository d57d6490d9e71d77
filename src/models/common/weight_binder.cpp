#include "models/common/weight_binder.h"

#include <fmt/ranges.h>

#include <cstring>

#include "base/dtype.h"
#include "base/error.h"
#include "base/log.h"

namespace md {

WeightBinder::WeightBinder(const Checkpoint& checkpoint, std::string family, OwnedWeights& owned)
    : checkpoint_(checkpoint), family_(std::move(family)), owned_(owned) {}

const TensorView& WeightBinder::find(const std::string& name) const {
  const TensorView* tensor = checkpoint_.find(name);
  if (tensor == nullptr) {
    fail("checkpoint {}: tensor '{}' is missing ({} needs it)", checkpoint_.path(), name, family_);
  }
  return *tensor;
}

void WeightBinder::check_shape(const TensorView& tensor, const std::vector<int64_t>& shape) const {
  if (!std::equal(tensor.shape.begin(), tensor.shape.end(), shape.begin(), shape.end())) {
    fail("{}: tensor '{}' has shape [{}] but the config implies [{}]", tensor.file, tensor.name,
         fmt::join(tensor.shape, ", "), fmt::join(shape, ", "));
  }
}

const uint16_t* WeightBinder::bf16(const std::string& name, std::vector<int64_t> shape) {
  const TensorView& tensor = find(name);
  if (tensor.dtype != DType::kBF16) {
    fail("{}: tensor '{}' is {} but {} reads it as BF16", tensor.file, name,
         dtype_name(tensor.dtype), family_);
  }
  check_shape(tensor, shape);
  if (reinterpret_cast<uintptr_t>(tensor.data) % alignof(uint16_t) == 0) {
    return reinterpret_cast<const uint16_t*>(tensor.data);
  }
  log::warn("{}: tensor '{}' is not 2-byte aligned in the file; copying it", tensor.file, name);
  auto copy = std::make_unique<uint16_t[]>(tensor.numel());
  std::memcpy(copy.get(), tensor.data, tensor.nbytes);
  owned_.push_back(std::move(copy));
  return owned_.back().get();
}

kernels::Bf16Matrix WeightBinder::matrix(const std::string& name, int64_t rows, int64_t cols) {
  return {bf16(name, {rows, cols}), rows, cols};
}

std::vector<float> WeightBinder::f32_vector(const std::string& name, int64_t n) {
  return f32_tensor(name, {n});
}

std::vector<float> WeightBinder::f32_tensor(const std::string& name,
                                            const std::vector<int64_t>& shape) {
  const TensorView& tensor = find(name);
  check_shape(tensor, shape);
  return widen(tensor);
}

std::vector<float> WeightBinder::f32_values(const std::string& name, int64_t count) {
  const TensorView& tensor = find(name);
  if (static_cast<int64_t>(tensor.numel()) != count) {
    fail("{}: tensor '{}' has shape [{}] ({} elements) but the config implies {} elements",
         tensor.file, tensor.name, fmt::join(tensor.shape, ", "), tensor.numel(), count);
  }
  return widen(tensor);
}

std::vector<float> WeightBinder::widen(const TensorView& tensor) const {
  const auto n = static_cast<int64_t>(tensor.numel());
  std::vector<float> values(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* at = tensor.data + i * static_cast<int64_t>(dtype_size(tensor.dtype));
    if (tensor.dtype == DType::kF32) {
      std::memcpy(&values[static_cast<std::size_t>(i)], at, sizeof(float));
    } else if (tensor.dtype == DType::kBF16) {
      uint16_t bits;
      std::memcpy(&bits, at, sizeof bits);
      values[static_cast<std::size_t>(i)] = bf16_to_f32(bits);
    } else {
      fail("{}: tensor '{}' is {} but {} accepts F32 or BF16 here", tensor.file, tensor.name,
           dtype_name(tensor.dtype), family_);
    }
  }
  return values;
}

const std::uint8_t* WeightBinder::bytes(const std::string& name, DType dtype,
                                        const std::vector<int64_t>& shape) {
  const TensorView& tensor = find(name);
  if (tensor.dtype != dtype) {
    fail("{}: tensor '{}' is {} but {} reads it as {}", tensor.file, name, dtype_name(tensor.dtype),
         family_, dtype_name(dtype));
  }
  check_shape(tensor, shape);
  return tensor.data;
}

}  // namespace md
