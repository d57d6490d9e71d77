#include "cli/bench_matrix_tiles.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "base/cache_aligned.h"
#include "base/thread_pool.h"
#include "engine/generation.h"
#include "kernels/arithmetic_peak.h"
#include "kernels/isa.h"
#include "kernels/weight_matrix.h"
#include "program/instruction.h"

namespace md::cli {

namespace {

// The layer matrix with the most elements that a 1-row step streams (projections and gate/up;
// the output head is left out: a prefill multiplies only its last row by it).
const kernels::WeightMatrix* largest_layer_matrix(const program::Program& program) {
  const kernels::WeightMatrix* largest = nullptr;
  for (const program::Instruction& ins : program.instructions()) {
    if (ins.opcode() != program::Opcode::kProjection &&
        ins.opcode() != program::Opcode::kGateUpSilu) {
      continue;
    }
    for (int64_t t = 0; t < ins.tasks; ++t) {
      for (const program::Tile* tile : program::task_tiles(ins, t)) {
        const kernels::WeightMatrix& w = tile->weight;
        if (largest == nullptr || w.rows * w.cols > largest->rows * largest->cols) largest = &w;
      }
    }
  }
  return largest;
}

}  // namespace

std::optional<MatrixTileFigure> measure_matrix_tiles(LanguageModel& model, int threads,
                                                     double seconds) {
  program::Program* program = model.decode_program(1);
  if (program == nullptr) return std::nullopt;
  const kernels::WeightMatrix* w = largest_layer_matrix(*program);
  if (w == nullptr) return std::nullopt;
  MatrixTileFigure figure{std::string(w->format_name()),    w->rows, w->cols,
                          engine::Generator::kPrefillChunk, 1e30,    0};
  CacheAligned<float> x(static_cast<std::size_t>(figure.inputs * w->cols));
  CacheAligned<float> y(static_cast<std::size_t>(figure.inputs * w->rows));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  ThreadPool pool(threads);
  using Clock = std::chrono::steady_clock;
  kernels::matmul(*w, x.data(), figure.inputs, y.data(), &pool);  // warm: scratch, caches
  const Clock::time_point start = Clock::now();
  for (int pass = 0;
       pass < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds; ++pass) {
    const Clock::time_point t0 = Clock::now();
    kernels::matmul(*w, x.data(), figure.inputs, y.data(), &pool);
    figure.seconds =
        std::min(figure.seconds, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  figure.peak = kernels::measure_fma_peak(kernels::active_isa_level(), threads, seconds / 2);
  return figure;
}

}  // namespace md::cli
