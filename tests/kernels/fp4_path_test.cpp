// Which body the 4-bit formats' products run is speed only (their tests check that every path
// gives the same bits): the AVX2 one where 512-bit operations run as two halves (AMD Zen 4), the
// best path everywhere else.
#include "kernels/fp4_path.h"

#include <gtest/gtest.h>

#include "kernels/cpu_identity.h"

namespace md::kernels {
namespace {

TEST(Fp4Path, CpusThatSplitWideOpsTakeTheAvx2Body) {
  EXPECT_TRUE(splits_512_bit_ops("AuthenticAMD", 0x19));   // Zen 4 (Zen 3 has no AVX-512)
  EXPECT_FALSE(splits_512_bit_ops("AuthenticAMD", 0x1a));  // Zen 5 server and desktop
  EXPECT_FALSE(splits_512_bit_ops("AuthenticAMD", 0x17));  // Zen 2: no AVX-512
  EXPECT_FALSE(splits_512_bit_ops("GenuineIntel", 0x6));
  EXPECT_FALSE(splits_512_bit_ops("GenuineIntel", 0x19));
  EXPECT_EQ(fp4_path_for(Isa::kAvx512, true), Isa::kAvx2);
  EXPECT_EQ(fp4_path_for(Isa::kAvx512, false), Isa::kAvx512);
  EXPECT_EQ(fp4_path_for(Isa::kAvx2, true), Isa::kAvx2);
  EXPECT_EQ(fp4_path_for(Isa::kScalar, true), Isa::kScalar);  // MEGADECODE_ISA=scalar holds
  const CpuIdentity& cpu = cpu_identity();
  EXPECT_EQ(active_fp4_path(),
            fp4_path_for(active_isa_level(), splits_512_bit_ops(cpu.vendor, cpu.family)));
}

}  // namespace
}  // namespace md::kernels
