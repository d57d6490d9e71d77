// A fixed-size array of zeros that costs no memory until written: large state buffers come from
// calloc, whose fresh pages the kernel maps lazily.
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace md {

template <typename T>
class ZeroedArray {
 public:
  ZeroedArray() = default;
  explicit ZeroedArray(std::size_t size) : size_(size) {
    if (size == 0) return;
    data_.reset(static_cast<T*>(std::calloc(size, sizeof(T))));
    if (!data_) throw std::bad_alloc();
  }
  ZeroedArray(const ZeroedArray& other) : ZeroedArray(other.size_) {
    if (size_ != 0) std::memcpy(data_.get(), other.data_.get(), size_ * sizeof(T));
  }
  ZeroedArray(ZeroedArray&&) noexcept = default;
  ZeroedArray& operator=(ZeroedArray&&) noexcept = default;
  ZeroedArray& operator=(const ZeroedArray& other) {
    if (this != &other) *this = ZeroedArray(other);
    return *this;
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  T& operator[](std::size_t i) { return data_.get()[i]; }
  const T& operator[](std::size_t i) const { return data_.get()[i]; }
  void zero() {
    if (size_ != 0) std::memset(data_.get(), 0, size_ * sizeof(T));
  }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace md
