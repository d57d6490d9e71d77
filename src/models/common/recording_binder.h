// A WeightBinder that remembers what it bound, so that a checkpoint's tensors nobody asked for
// can be refused: for checkpoints whose config must account for every tensor (the drafters).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "models/common/weight_binder.h"

namespace md {

class RecordingBinder {
 public:
  // `family` names the model kind in messages.
  RecordingBinder(const Checkpoint& checkpoint, std::string family, OwnedWeights& owned)
      : family_(family), bind_(checkpoint, std::move(family), owned) {}

  bool contains(std::string_view name) const { return bind_.contains(name); }
  const uint16_t* bf16(const std::string& name, std::vector<int64_t> shape) {
    bound_.insert(name);
    return bind_.bf16(name, std::move(shape));
  }
  kernels::Bf16Matrix matrix(const std::string& name, int64_t rows, int64_t cols) {
    bound_.insert(name);
    return bind_.matrix(name, rows, cols);
  }
  std::vector<float> f32_vector(const std::string& name, int64_t n) {
    bound_.insert(name);
    return bind_.f32_vector(name, n);
  }
  const std::uint8_t* bytes(const std::string& name, DType dtype,
                            const std::vector<int64_t>& shape) {
    bound_.insert(name);
    return bind_.bytes(name, dtype, shape);
  }

  // A tensor the config does not account for (an extra layer, a head the config switches off)
  // means the config and the weights disagree about the model: md::Error naming up to 5.
  void refuse_unbound() const;

 private:
  std::string family_;
  WeightBinder bind_;
  std::set<std::string, std::less<>> bound_;
};

}  // namespace md
