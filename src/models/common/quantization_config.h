// The block-quantized weight formats a checkpoint may declare (compressed-tensors MXFP4/NVFP4,
// ModelOpt NVFP4), parsed and validated against what the kernels implement.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/common/config_files.h"
#include "models/common/config_footprint.h"
#include "models/common/config_reader.h"

namespace md {

enum class QuantMethod : uint8_t { kNone, kCompressedTensors, kModelOpt };
std::string_view quant_method_name(QuantMethod method);

struct QuantizationConfig {
  QuantMethod method = QuantMethod::kNone;
  WeightFormat format = WeightFormat::kBF16;  // kMXFP4 or kNVFP4 when quantized
  int64_t group_size = 0;                     // inputs per block scale
  // Modules left unquantized ("re:" marks a regex), as declared. Not interpreted here: the
  // weight loader decides per tensor from what the checkpoint holds.
  std::vector<std::string> ignore;
  std::string source;  // where it was declared, for messages

  bool quantized() const { return method != QuantMethod::kNone; }
};

// compressed-tensors `mxfp4-pack-quantized`: 4-bit float weights in groups of 32 with uint8
// (e8m0) scales, weights only. `quantization_config` is the object of that name.
QuantizationConfig parse_mxfp4_quantization(const ConfigReader& quantization_config);

// NVFP4 as declared by ModelOpt (config.json quantization_config with quant_method "modelopt",
// or hf_quant_config.json) or by compressed-tensors (`nvfp4-pack-quantized`). `text` is the
// reader holding `quantization_config` (top level or text_config). Returns method kNone when the
// checkpoint declares no quantization.
QuantizationConfig parse_nvfp4_quantization(const ConfigFiles& files, const ConfigReader& root,
                                            const ConfigReader& text);

}  // namespace md
