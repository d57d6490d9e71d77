// The DFlash2 drafter's pieces against direct double-precision formulas: the dynamic block conv
// (S5's direct shift-sum), top-k order, the selector walk (brute-force step-wise argmax and the
// sampled inverse CDF) and attention over split key runs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/attention_runs.h"
#include "models/drafters/dflash2/dflash2_conv.h"
#include "models/drafters/dflash2/dflash2_selector.h"

namespace md::dflash2 {
namespace {

using kernels::attend_runs;
using kernels::KeyRun;

std::vector<float> normals(std::size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<uint16_t> bits;
  for (float v : values) bits.push_back(f32_to_bf16(v));
  return bits;
}

// Largest |a − b| relative to max |b|.
double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

struct ConvCase {
  int64_t hidden, taps, group_size, rows;
};

void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << fmt::format("hidden {}, taps {}, group {}, rows {}", c.hidden, c.taps, c.group_size,
                     c.rows);
}

class BlockConvTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(BlockConvTest, MatchesTheDirectShiftSum) {
  ConvCase p = GetParam();
  BlockConvShape shape{p.hidden, p.taps, p.group_size};
  std::vector<uint16_t> base =
      to_bf16(normals(static_cast<std::size_t>(2 * p.taps * p.hidden), 1, 0.3f));
  std::vector<float> coeffs =
      normals(static_cast<std::size_t>(p.rows * shape.coefficients()), 2, 0.5f);
  std::vector<float> in = normals(static_cast<std::size_t>(p.rows * p.hidden), 3);
  for (int side = 0; side < 2; ++side) {
    std::vector<float> out(in.size());
    apply_block_conv(base.data(), coeffs.data(), side, shape, in.data(), p.rows, out.data());
    std::vector<double> want(in.size());
    for (int64_t t = 0; t < p.rows; ++t) {
      for (int64_t c = 0; c < p.hidden; ++c) {
        double sum = 0;
        for (int64_t tap = 0; tap < p.taps; ++tap) {
          if (t < tap) continue;  // rows before the block count as zero
          double k =
              bf16_to_f32(base[static_cast<std::size_t>((side * p.taps + tap) * p.hidden + c)]) +
              coeffs[static_cast<std::size_t>(t * shape.coefficients() +
                                              (side * p.taps + tap) * shape.groups() +
                                              c / p.group_size)];
          sum += k * in[static_cast<std::size_t>((t - tap) * p.hidden + c)];
        }
        want[static_cast<std::size_t>(t * p.hidden + c)] = sum;
      }
    }
    // Two products and a sum in f32: a few f32 ulps of the largest output.
    EXPECT_LT(relative_error(out, want), 1e-6) << "side " << side;
  }
}

std::string conv_case_name(const ::testing::TestParamInfo<ConvCase>& param) {
  const ConvCase& c = param.param;
  return fmt::format("h{}_taps{}_group{}_rows{}", c.hidden, c.taps, c.group_size, c.rows);
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlockConvTest,
                         ::testing::Values(ConvCase{128, 2, 16, 8}, ConvCase{64, 3, 8, 8},
                                           ConvCase{32, 2, 32, 1}, ConvCase{48, 4, 16, 3}),
                         conv_case_name);

TEST(BlockConv, FirstRowSeesNoPredecessorAndGroupsAreContiguous) {
  BlockConvShape shape{4, 2, 2};  // 2 groups of 2 channels
  std::vector<uint16_t> base(2 * 2 * 4, f32_to_bf16(0.0f));
  // Row 1's side-0 tap-1 coefficient of group 1 (channels 2, 3) is 1; everything else 0.
  std::vector<float> coeffs(2 * static_cast<std::size_t>(shape.coefficients()), 0.0f);
  coeffs[static_cast<std::size_t>(shape.coefficients() + 1 * shape.groups() + 1)] = 1.0f;
  coeffs[static_cast<std::size_t>(0 * shape.coefficients() + 1 * shape.groups() + 1)] = 5.0f;
  std::vector<float> in = {1, 2, 3, 4, 10, 20, 30, 40};
  std::vector<float> out(8);
  apply_block_conv(base.data(), coeffs.data(), 0, shape, in.data(), 2, out.data());
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0, 0, 0, 0, 3, 4}));
}

TEST(TopCandidates, SortsDescendingWithTiesToTheLowerId) {
  std::vector<float> logits = {1, 3, 2, 3, -1, 3, 2};
  std::vector<Candidate> top = top_candidates(logits.data(), 7, 4);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].id, 1);
  EXPECT_EQ(top[1].id, 3);
  EXPECT_EQ(top[2].id, 5);
  EXPECT_EQ(top[3].id, 2);
  EXPECT_EQ(top[3].logit, 2.0f);
}

TEST(TopCandidates, NanRanksLastAndKIsClamped) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits = {nan, -inf, 0.5f, nan};
  std::vector<Candidate> top = top_candidates(logits.data(), 4, 9);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].id, 2);
  EXPECT_EQ(top[1].id, 0);  // NaN and -inf rank alike, by id
  EXPECT_EQ(top[2].id, 1);
  EXPECT_EQ(top[3].id, 3);
}

TEST(TopCandidates, AgreesWithAFullSortOnRandomLogits) {
  // Values rounded to a coarse grid so that ties are frequent.
  std::vector<float> logits = normals(1000, 5);
  for (float& v : logits) v = std::round(v * 8.0f) / 8.0f;
  std::vector<int32_t> order(logits.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
  });
  std::vector<Candidate> top = top_candidates(logits.data(), 1000, 16);
  for (std::size_t k = 0; k < 16; ++k) EXPECT_EQ(top[k].id, order[k]) << k;
}

// A small selector: vocab 40, rank 6, with its codebooks kept as bf16 and as doubles.
struct TinySelector {
  TinySelector() {
    pred = to_bf16(normals(vocab * rank, 21, 0.5f));
    succ = to_bf16(normals(vocab * rank, 22, 0.5f));
    proj = to_bf16(normals(rank * 8, 23, 0.3f));
    w.predecessor_codebook = {pred.data(), vocab, rank};
    w.successor_codebook = {succ.data(), vocab, rank};
    w.hidden_projection = {proj.data(), rank, 8};
  }
  // score[k] = u[k] + Σ_r Pcb[prev][r] ρ[r] Scb[c_k][r], straight from §11.6.
  std::vector<double> scores(int32_t prev, const float* rho,
                             const std::vector<Candidate>& row) const {
    std::vector<double> out;
    for (const Candidate& c : row) {
      double s = c.logit;
      for (int64_t r = 0; r < rank; ++r) {
        s += static_cast<double>(bf16_to_f32(pred[static_cast<std::size_t>(prev * rank + r)])) *
             rho[r] * bf16_to_f32(succ[static_cast<std::size_t>(c.id * rank + r)]);
      }
      out.push_back(s);
    }
    return out;
  }

  static constexpr int64_t vocab = 40, rank = 6;
  std::vector<uint16_t> pred, succ, proj;
  DFlash2SelectorWeights w;
};

std::vector<std::vector<Candidate>> random_rows(int64_t rows, int64_t k, uint64_t seed) {
  std::vector<std::vector<Candidate>> out;
  for (int64_t i = 0; i < rows; ++i) {
    std::vector<float> logits = normals(TinySelector::vocab, seed + static_cast<uint64_t>(i));
    out.push_back(top_candidates(logits.data(), TinySelector::vocab, k));
  }
  return out;
}

TEST(Selector, GreedyWalkIsTheStepwiseArgmaxFromTheAnchor) {
  TinySelector sel;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<std::vector<Candidate>> rows = random_rows(7, 4, 100 + seed * 10);
    std::vector<float> rho = normals(7 * TinySelector::rank, 200 + seed, 2.0f);
    int32_t anchor = static_cast<int32_t>(seed % TinySelector::vocab);
    SelectorPath path = select_path(sel.w, anchor, rows, rho.data(), 0.0f, {});
    ASSERT_EQ(path.tokens.size(), 7u);
    int32_t prev = anchor;
    for (std::size_t i = 0; i < 7; ++i) {
      std::vector<double> s = sel.scores(prev, rho.data() + i * TinySelector::rank, rows[i]);
      std::size_t best = 0;
      for (std::size_t k = 1; k < s.size(); ++k) {
        if (s[k] > s[best]) best = k;
      }
      EXPECT_EQ(path.tokens[i], rows[i][best].id) << "seed " << seed << " row " << i;
      ASSERT_EQ(path.q[i].size(), 1u);
      EXPECT_EQ(path.q[i][0], (std::pair<int32_t, float>{path.tokens[i], 1.0f}));
      prev = path.tokens[i];
    }
  }
}

TEST(Selector, TheBilinearTermChangesThePath) {
  // With the pairwise term the walk must sometimes leave the unary argmax: otherwise the test
  // above would pass for a selector that ignores its codebooks.
  TinySelector sel;
  int differ = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<std::vector<Candidate>> rows = random_rows(7, 4, 100 + seed * 10);
    std::vector<float> rho = normals(7 * TinySelector::rank, 200 + seed, 2.0f);
    SelectorPath path = select_path(sel.w, 3, rows, rho.data(), 0.0f, {});
    for (std::size_t i = 0; i < 7; ++i) differ += path.tokens[i] != rows[i][0].id;
  }
  EXPECT_GT(differ, 10);
}

TEST(Selector, FirstMaximumWinsATie) {
  std::vector<double> scores = {1.0, 3.0, 3.0, 2.0};
  EXPECT_EQ(pick_candidate(scores, 0.0f, 0.0, nullptr), 1);
}

TEST(Selector, SampledPickIsTheInverseCdfOfTheTemperedSoftmax) {
  std::vector<double> scores = {0.5, 2.0, 1.0, -1.0};
  float temperature = 0.7f;
  std::vector<double> want;
  double total = 0;
  for (double s : scores) total += std::exp(s / temperature);
  for (double s : scores) want.push_back(std::exp(s / temperature) / total);
  std::vector<double> p;
  pick_candidate(scores, temperature, 0.5, &p);
  ASSERT_EQ(p.size(), 4u);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_NEAR(p[k], want[k], 1e-12);
  // Candidate k owns [cdf_{k-1}, cdf_k) of the unit interval, in sorted-candidate order.
  double cdf = 0;
  for (int64_t k = 0; k < 4; ++k) {
    double lo = cdf;
    cdf += want[static_cast<std::size_t>(k)];
    EXPECT_EQ(pick_candidate(scores, temperature, lo + 1e-9, nullptr), k);
    EXPECT_EQ(pick_candidate(scores, temperature, cdf - 1e-9, nullptr), k);
  }
  EXPECT_EQ(pick_candidate(scores, temperature, std::nextafter(1.0, 0.0), nullptr), 3);
}

TEST(Selector, SampledWalkConditionsOnTheDrawnPredecessor) {
  TinySelector sel;
  std::vector<std::vector<Candidate>> rows = random_rows(7, 4, 300);
  std::vector<float> rho = normals(7 * TinySelector::rank, 301, 2.0f);
  std::vector<double> uniforms = {0.9, 0.1, 0.5, 0.99, 0.3, 0.7, 0.2};
  SelectorPath path = select_path(sel.w, 5, rows, rho.data(), 0.7f, uniforms);
  int32_t prev = 5;
  for (std::size_t i = 0; i < 7; ++i) {
    std::vector<double> s = sel.scores(prev, rho.data() + i * TinySelector::rank, rows[i]);
    double top = *std::max_element(s.begin(), s.end()), total = 0;
    for (double v : s) total += std::exp((v - top) / 0.7);
    ASSERT_EQ(path.q[i].size(), rows[i].size());
    double cdf = 0, sum_q = 0;
    int32_t expected = -1;
    for (std::size_t k = 0; k < s.size(); ++k) {
      double p = std::exp((s[k] - top) / 0.7) / total;
      EXPECT_EQ(path.q[i][k].first, rows[i][k].id);
      EXPECT_NEAR(path.q[i][k].second, p, 1e-6);
      sum_q += path.q[i][k].second;
      cdf += p;
      if (expected < 0 && uniforms[i] < cdf) expected = rows[i][k].id;
    }
    EXPECT_NEAR(sum_q, 1.0, 1e-6);
    EXPECT_EQ(path.tokens[i], expected) << "row " << i;
    prev = path.tokens[i];
  }
}

TEST(AttendRuns, SplitRunsEqualOneNaiveSoftmax) {
  const int64_t hd = 16, n = 23;
  std::vector<float> q = normals(hd, 41);
  std::vector<float> k = normals(static_cast<std::size_t>(n * hd), 42);
  std::vector<float> v = normals(static_cast<std::size_t>(n * hd), 43);
  float scale = 0.25f;
  std::vector<double> want(hd, 0.0);
  std::vector<double> s(n);
  double top = -1e300, total = 0;
  for (int64_t t = 0; t < n; ++t) {
    double dot = 0;
    for (int64_t d = 0; d < hd; ++d)
      dot += static_cast<double>(q[static_cast<std::size_t>(d)]) *
             k[static_cast<std::size_t>(t * hd + d)];
    s[static_cast<std::size_t>(t)] = dot * scale;
    top = std::max(top, s[static_cast<std::size_t>(t)]);
  }
  for (double& x : s) total += (x = std::exp(x - top));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t d = 0; d < hd; ++d)
      want[static_cast<std::size_t>(d)] +=
          s[static_cast<std::size_t>(t)] / total * v[static_cast<std::size_t>(t * hd + d)];
  }
  // Three runs: keys 0..9, 10..10, 11..22.
  std::vector<KeyRun> runs = {{k.data(), v.data(), 10, hd},
                              {k.data() + 10 * hd, v.data() + 10 * hd, 1, hd},
                              {k.data() + 11 * hd, v.data() + 11 * hd, 12, hd}};
  std::vector<float> scores(n), out(hd);
  attend_runs(q.data(), runs, hd, scale, scores.data(), out.data());
  EXPECT_LT(relative_error(out, want), 1e-6);
}

TEST(AttendRuns, NoKeysGiveZero) {
  std::vector<float> q(4, 1.0f), out(4, 7.0f), scores(1);
  attend_runs(q.data(), {}, 4, 1.0f, scores.data(), out.data());
  EXPECT_EQ(out, std::vector<float>(4, 0.0f));
}

}  // namespace
}  // namespace md::dflash2
