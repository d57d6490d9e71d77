// The order in which the 8-lane kernels (NVFP4, int8 rows) sum their lanes: input k of a row goes
// to lane k mod 8, each lane adds its products in increasing k, and the lanes are then summed as
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). Every path of such a kernel (scalar, AVX2)
// uses it, so they agree bitwise.
#pragma once

namespace md::kernels {

// Internal linkage: this header is compiled with and without -mavx2, and one linked copy of an
// inline function must not carry VEX code into a scalar path.
static inline float lane_sum8(const float* l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

}  // namespace md::kernels
