#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <string>

namespace md::kernels {
namespace {

TEST(Isa, ForcedPathIsLoweredToWhatTheCpuHas) {
  EXPECT_EQ(resolve_isa("scalar", Isa::kAvx512), Isa::kScalar);
  EXPECT_EQ(resolve_isa("avx2", Isa::kAvx512), Isa::kAvx2);
  EXPECT_EQ(resolve_isa("avx512", Isa::kAvx512), Isa::kAvx512);
  EXPECT_EQ(resolve_isa("avx512", Isa::kAvx2), Isa::kAvx2);
  EXPECT_EQ(resolve_isa("avx2", Isa::kScalar), Isa::kScalar);
  EXPECT_EQ(resolve_isa("", Isa::kAvx2), Isa::kAvx2);
  EXPECT_EQ(resolve_isa("sse9", Isa::kAvx2), Isa::kAvx2);  // unknown: warned about, ignored
}

TEST(Isa, ActivePathIsAvailableAndNamed) {
  std::vector<Isa> available = available_isas();
  ASSERT_FALSE(available.empty());
  EXPECT_EQ(available.front(), Isa::kScalar);
  EXPECT_EQ(available.back(), best_isa());
  EXPECT_LE(active_isa_level(), best_isa());
  EXPECT_EQ(std::string(active_isa()), isa_name(active_isa_level()));
}

}  // namespace
}  // namespace md::kernels
