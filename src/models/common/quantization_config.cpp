#include "models/common/quantization_config.h"

#include "base/error.h"

namespace md {

namespace {

struct WeightScheme {
  std::string_view strategy;
  int64_t group_size;
  bool weights_only;
};

// One compressed-tensors config group: what its weights (and activations) are quantized to.
void check_compressed_group(const ConfigReader& group, std::string_view format,
                            const WeightScheme& scheme) {
  group.expect("format", format);
  ConfigReader weights = group.object("weights");
  weights.expect("num_bits", 4, ConfigReader::Absent::kRefuse);
  weights.expect("type", "float", ConfigReader::Absent::kRefuse);
  weights.expect("strategy", scheme.strategy, ConfigReader::Absent::kRefuse);
  weights.expect("group_size", scheme.group_size, ConfigReader::Absent::kRefuse);
  weights.expect("symmetric", true);
  weights.expect("dynamic", false);
  if (format == "mxfp4-pack-quantized") weights.expect("scale_dtype", "torch.uint8");
  // W4A4 checkpoints carry activation scales; megadecode keeps activations in bf16/f32, which is
  // at least as precise, so they are ignored. Weights-only schemes must not quantize them.
  if (scheme.weights_only) {
    group.forbid("input_activations",
                 fmt::format("{} needs weight-only quantization", group.model()));
  }
}

QuantizationConfig parse_compressed_tensors(const ConfigReader& config, std::string_view format,
                                            const WeightScheme& scheme,
                                            WeightFormat weight_format) {
  config.expect("quant_method", "compressed-tensors", ConfigReader::Absent::kRefuse);
  config.expect("format", format, ConfigReader::Absent::kRefuse);
  config.expect("quantization_status", "compressed");
  config.forbid("kv_cache_scheme", fmt::format("{} keeps an unquantized KV cache", config.model()));
  ConfigReader groups = config.object("config_groups");
  if (groups.json().empty()) config.reject("config_groups", "no quantization group");
  for (const auto& item : groups.json().items()) {
    check_compressed_group(groups.object(item.key()), format, scheme);
  }
  QuantizationConfig result;
  result.method = QuantMethod::kCompressedTensors;
  result.format = weight_format;
  result.group_size = scheme.group_size;
  if (config.has("ignore")) result.ignore = config.string_list("ignore");
  result.source = fmt::format("{}: {}", config.file(), config.path());
  return result;
}

// ModelOpt's fields, either in config.json quantization_config or hf_quant_config.json
// "quantization".
QuantizationConfig parse_modelopt(const ConfigReader& config, std::string source) {
  config.expect("quant_algo", "NVFP4", ConfigReader::Absent::kRefuse);
  config.expect("group_size", 16);
  config.forbid("kv_cache_quant_algo",
                fmt::format("{} keeps an unquantized bf16 KV cache", config.model()));
  QuantizationConfig result;
  result.method = QuantMethod::kModelOpt;
  result.format = WeightFormat::kNVFP4;
  result.group_size = 16;
  if (config.has("exclude_modules")) result.ignore = config.string_list("exclude_modules");
  result.source = std::move(source);
  return result;
}

}  // namespace

std::string_view quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::kNone:
      return "none";
    case QuantMethod::kCompressedTensors:
      return "compressed-tensors";
    case QuantMethod::kModelOpt:
      return "modelopt";
  }
  return "?";
}

QuantizationConfig parse_mxfp4_quantization(const ConfigReader& quantization_config) {
  return parse_compressed_tensors(quantization_config, "mxfp4-pack-quantized",
                                  WeightScheme{"group", 32, true}, WeightFormat::kMXFP4);
}

QuantizationConfig parse_nvfp4_quantization(const ConfigFiles& files, const ConfigReader& root,
                                            const ConfigReader& text) {
  const ConfigReader* holder = text.has("quantization_config") ? &text : &root;
  if (holder->has("quantization_config")) {
    ConfigReader config = holder->object("quantization_config");
    std::string method = config.string_or("quant_method", "");
    if (method == "modelopt") {
      return parse_modelopt(config, fmt::format("{}: {}", config.file(), config.path()));
    }
    if (method == "compressed-tensors") {
      return parse_compressed_tensors(config, "nvfp4-pack-quantized",
                                      WeightScheme{"tensor_group", 16, false},
                                      WeightFormat::kNVFP4);
    }
    config.reject("quant_method", fmt::format("unsupported ({} needs NVFP4 from \"modelopt\" or "
                                              "\"compressed-tensors\")",
                                              config.model()));
  }
  if (!files.quant.is_null()) {
    ConfigReader hf_quant(files.quant_path, files.quant, root.model());
    if (auto producer = hf_quant.optional_object("producer")) producer->expect("name", "modelopt");
    return parse_modelopt(hf_quant.object("quantization"), files.quant_path);
  }
  return QuantizationConfig{};
}

}  // namespace md
