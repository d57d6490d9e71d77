// A thread's scratch array for the per-ISA kernel files, 64-byte aligned (an unaligned 64-byte
// load costs two), grown and never shrunk.
//
// A template of the ISA's traits V (which live in an anonymous namespace), not a std::vector or a
// plain class: the members of anything else instantiated in an ISA's file are weak symbols
// compiled for that ISA, and the linker may give one of them to every other user — AVX-512 code
// run on an AVX2-only CPU (docs/DECISIONS.md, "Matmul paths are chosen at run time").
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>

namespace md::kernels {

template <class V, class T>
class IsaScratch {
  static_assert(std::is_trivially_destructible_v<T> && std::is_trivially_default_constructible_v<T>,
                "raw storage, released without destructors");

 public:
  // At least n elements, uninitialised where they were never written.
  T* at_least(std::size_t n) {
    if (n > size_) {
      data_.reset(static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t{64})));
      size_ = n;
    }
    return data_.get();
  }

 private:
  struct Release {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<T[], Release> data_;
  std::size_t size_ = 0;
};

}  // namespace md::kernels
