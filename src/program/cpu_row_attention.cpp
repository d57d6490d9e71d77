#include "program/cpu_row_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/activations.h"
#include "kernels/attention_runs.h"
#include "kernels/norms.h"

namespace md::program {

namespace {

// A worker's gathered keys and values of one head and its softmax scores: sized by the longest
// span a task has attended over (a full layer's grows with the context, so it is not part of the
// program's fixed worker scratch).
struct HeadSpan {
  std::vector<float> keys, values, scores;

  void fit(int64_t count, int64_t head_dim) {
    const auto floats = static_cast<std::size_t>(count * head_dim);
    if (keys.size() < floats) keys.resize(floats), values.resize(floats);
    if (scores.size() < static_cast<std::size_t>(count))
      scores.resize(static_cast<std::size_t>(count));
  }
};

thread_local HeadSpan span_of_worker;

}  // namespace

void run_row_attention_kv_head(const RowAttentionOperands& op, int64_t g, const Program& program) {
  const int64_t hd = op.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* q = program.buffer(op.q);
  float* k = program.buffer(op.k);
  const float* v = program.buffer(op.v);
  const float* gate = program.buffer(op.gate);
  float* out = program.buffer(op.out);
  HeadSpan& span = span_of_worker;
  for (int64_t n = 0; n < program.rows(); ++n) {
    const StepRow& row = program.row(n);
    const float* angles =
        op.rope != nullptr ? program.buffer(op.angles) + n * op.rope->rotary_dim() : nullptr;
    const auto prepare = [&](float* x) {
      if (op.rope != nullptr) op.rope->apply(x, angles, angles + op.rope->rotary_dim() / 2);
    };
    for (int64_t h = g * op.group(); h < (g + 1) * op.group(); ++h) {
      float* qh = q + n * op.q_stride + h * hd;
      kernels::rms_norm_unweighted(qh, hd, op.norm_eps, qh);
      for (int64_t d = 0; d < hd; ++d) qh[d] *= op.q_scale;
      prepare(qh);
    }
    float* key = k + n * op.kv_stride + g * hd;
    kernels::rms_norm_unweighted(key, hd, op.norm_eps, key);
    prepare(key);
    kernels::KvRows& kv = row.state->kv_rows(op.layer);
    kv.write_part(row.position, g * hd, hd, key, v + n * op.kv_stride + g * hd);

    const int64_t first = op.window > 0 ? std::max<int64_t>(0, row.position - op.window + 1) : 0;
    const int64_t count = row.position - first + 1;
    span.fit(count, hd);
    kv.gather(g * hd, hd, first, row.position, span.keys.data(), span.values.data());
    const kernels::KeyRun run{span.keys.data(), span.values.data(), count, hd};
    for (int64_t h = g * op.group(); h < (g + 1) * op.group(); ++h) {
      float* o = out + n * op.q_stride + h * hd;
      kernels::attend_runs(q + n * op.q_stride + h * hd, {&run, 1}, hd, scale, span.scores.data(),
                           o);
      kernels::rms_norm_unweighted(o, hd, op.norm_eps, o);
      const float* gh = gate + n * op.q_stride + h * hd;
      for (int64_t d = 0; d < hd; ++d) o[d] *= kernels::sigmoid(gh[d]);
    }
  }
}

}  // namespace md::program
