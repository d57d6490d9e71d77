// A fixed-size array of zeros that costs no memory until written: large state buffers (KV caches
// sized for a long context) come from calloc, whose fresh pages the kernel maps lazily.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
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
  // Elements [begin, end) read as zeros again, and the pages wholly inside the range go back to
  // the system (MADV_DONTNEED: a private anonymous page is zero-filled when next touched), so a
  // buffer costs memory for what is written since, not for what was written once.
  void release(std::size_t begin, std::size_t end) {
    end = std::min(end, size_);
    if (begin >= end) return;
    auto* first = reinterpret_cast<char*>(data_.get() + begin);
    auto* last = reinterpret_cast<char*>(data_.get() + end);
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    auto* inner_first =
        reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(first) + page - 1) / page * page);
    auto* inner_last =
        reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(last) / page * page);
    if (inner_first >= inner_last ||
        madvise(inner_first, static_cast<std::size_t>(inner_last - inner_first), MADV_DONTNEED) !=
            0) {
      std::memset(first, 0, static_cast<std::size_t>(last - first));
      return;
    }
    std::memset(first, 0, static_cast<std::size_t>(inner_first - first));
    std::memset(inner_last, 0, static_cast<std::size_t>(last - inner_last));
  }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace md
