// The register chains behind measure_fma_peak (kernels/arithmetic_peak.h), written once: each
// path's file instantiates fma_chains<V> with its register traits, which live in an anonymous
// namespace there (so no instantiation is shared between files compiled for different ISAs).
//
//   V::Vec, kLanes      one register of f32 lanes
//   V::kChains          independent chains: at least the fma latency times the fma ports, within
//                       the register file
//   V::set1(x), fma(a, b, c), add(a, b), store(p, v)
#pragma once

#include <cstdint>

namespace md::kernels {

template <class V>
int64_t fma_chains(int64_t iterations, float& sink) {
  using Vec = typename V::Vec;
  const Vec b = V::set1(0.999f), c = V::set1(1e-3f);
  Vec a[V::kChains];
  for (int i = 0; i < V::kChains; ++i) a[i] = V::set1(static_cast<float>(i));
  for (int64_t k = 0; k < iterations; ++k) {
#pragma GCC unroll 16
    for (int i = 0; i < V::kChains; ++i) a[i] = V::fma(a[i], b, c);
  }
  Vec s = a[0];
  for (int i = 1; i < V::kChains; ++i) s = V::add(s, a[i]);
  alignas(64) float lanes[V::kLanes];
  V::store(lanes, s);
  float total = 0;
  for (float lane : lanes) total += lane;
  sink = total;
  return iterations * V::kChains * V::kLanes * 2;  // an fma counts two
}

}  // namespace md::kernels
