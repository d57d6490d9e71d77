// What a gated MLP applies to its gate and up projections: act(g) · u with a configured
// activation (SwiGLU and its relatives, kernels/activations.h), or Kimi K3's SiTU(g, u), which
// transforms both (kernels/situ.h). The instructions that run gated MLPs and MoE experts carry
// one, so a family picks its activation as plain data.
#pragma once

#include <cstdint>

#include "kernels/activations.h"
#include "kernels/situ.h"

namespace md::kernels {

struct GatedActivation {
  Activation act = Activation::kSilu;  // act(g) · u, unless `situ`
  bool situ = false;                   // SiTU(g, u) with situ_params instead
  SituParams situ_params;

  GatedActivation() = default;
  // Every act(g) · u configuration converts, so families that name an activation need not
  // spell the struct.
  GatedActivation(Activation a) : act(a) {}  // NOLINT(google-explicit-constructor)
  static GatedActivation siTU(SituParams params) {
    GatedActivation a;
    a.situ = true;
    a.situ_params = params;
    return a;
  }
};

// g[i] = act(g[i]) · u[i], or SiTU(g[i], u[i]), for i in [0, n): the same bits as the scalar
// functions per element.
inline void gated_product(const GatedActivation& a, float* g, const float* u, int64_t n) {
  if (a.situ) {
    situ_rows(g, u, n, a.situ_params, g);
  } else {
    gated_product(a.act, g, u, n);
  }
}

}  // namespace md::kernels
