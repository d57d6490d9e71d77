// The machine's f32 fused-multiply-add peak, measured the way the many-row matrix tiles use it:
// independent fma chains in the widest registers of the active path (kernels/isa.h), on every
// thread at once. bench reports the tiles' arithmetic rate as a fraction of it.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace md::kernels {

// Floating-point operations per second (an fma counts two) of `threads` threads running
// independent chains on `isa`'s registers: the best of the passes that fit in `seconds`, at
// least two.
double measure_fma_peak(Isa isa, int threads, double seconds);

// One thread's chains for `iterations` rounds; returns the operations done (the chains' sum goes
// to `sink` so that nothing is optimised away). Per path; measure_fma_peak picks one.
int64_t fma_chains_scalar(int64_t iterations, float& sink);
int64_t fma_chains_avx2(int64_t iterations, float& sink);    // x86-64 only: AVX2 and FMA
int64_t fma_chains_avx512(int64_t iterations, float& sink);  // x86-64 only: AVX-512F

}  // namespace md::kernels
