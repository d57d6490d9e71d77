#include "kernels/logit_softcap.h"

#include <cmath>
#include <limits>

namespace md::kernels {

void softcap_logits(float* logits, int64_t begin, int64_t end, int64_t valid, float multiplier,
                    float cap) {
  for (int64_t i = begin; i < end; ++i) {
    logits[i] = i >= valid ? -std::numeric_limits<float>::infinity()
                           : cap * std::tanh(logits[i] * multiplier / cap);
  }
}

}  // namespace md::kernels
