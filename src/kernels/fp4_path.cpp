#include "kernels/fp4_path.h"

#include "kernels/cpu_identity.h"

namespace md::kernels {

Isa fp4_path_for(Isa level, bool wide_ops_split) {
  return level >= Isa::kAvx512 && wide_ops_split ? Isa::kAvx2 : level;
}

Isa active_fp4_path() {
  static const Isa path = [] {
    const CpuIdentity& cpu = cpu_identity();
    return fp4_path_for(active_isa_level(), splits_512_bit_ops(cpu.vendor, cpu.family));
  }();
  return path;
}

}  // namespace md::kernels
