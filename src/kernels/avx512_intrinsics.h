// <immintrin.h> for the translation units compiled for AVX-512 (src/kernels/CMakeLists.txt).
// GCC 12's avx512fintrin.h builds "undefined" registers as `__m512 y = y;`, which
// -W(maybe-)uninitialized flag once inlined into the including file (fixed in later GCC); the
// warnings are turned off for the rest of that file.
#pragma once

#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
