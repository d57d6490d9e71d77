#include "models/model_summary.h"

#include <algorithm>
#include <utility>

#include "base/error.h"

namespace md {

namespace {

constexpr int64_t kDefaultContext = 32768;
constexpr std::size_t kMaxPieces = 4;

// Runs of consecutive layers as (first, last).
std::vector<std::pair<int64_t, int64_t>> runs_of(const std::vector<int64_t>& layers) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t layer : layers) {
    if (!runs.empty() && runs.back().second + 1 == layer) {
      runs.back().second = layer;
    } else {
      runs.emplace_back(layer, layer);
    }
  }
  return runs;
}

std::string run_text(const std::pair<int64_t, int64_t>& run) {
  return run.first == run.second ? fmt::format("{}", run.first)
                                 : fmt::format("{}-{}", run.first, run.second);
}

bool is_progression(const std::vector<int64_t>& layers) {
  if (layers.size() < 4) return false;
  int64_t step = layers[1] - layers[0];
  for (std::size_t i = 2; i < layers.size(); ++i) {
    if (layers[i] - layers[i - 1] != step) return false;
  }
  return step > 1;
}

std::string scaled(double value, const char* const* units, double base) {
  int unit = 0;
  while (value >= base && units[unit + 1] != nullptr) {
    value /= base;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} {}", value, units[0])
                   : fmt::format("{:.2f} {}", value, units[unit]);
}

std::string weights_table(const ModelSummary& s) {
  const ConfigFootprint& f = s.footprint;
  std::string out = fmt::format("  {:<18} {:<30} {:>10} {:>12} {:>12}\n", "kind", "format",
                                "params", "bytes", "read/step");
  for (const WeightGroup& group : f.weights) {
    out += fmt::format("  {:<18} {:<30} {:>10} {:>12} {:>12}\n", weight_kind_name(group.kind),
                       weight_format_name(group.format), format_count(group.params),
                       format_bytes(group.bytes), format_bytes(group.read_bytes_per_token));
  }
  out += fmt::format("  {:<18} {:<30} {:>10} {:>12} {:>12}\n", "total", "",
                     format_count(s.total_params), format_bytes(s.weight_bytes),
                     format_bytes(s.weight_bytes_read_per_token));
  return out;
}

std::string state_table(const ModelSummary& s) {
  std::string out;
  for (const StateGroup& group : s.footprint.state) {
    std::string per_token = group.bytes_per_token > 0
                                ? fmt::format(" ({}/token)", format_bytes(group.bytes_per_token))
                                : "";
    out += fmt::format("  {:<26} {:<52} {:>12}{}\n", group.name, group.layout,
                       format_bytes(group.bytes(s.context)), per_token);
  }
  return out;
}

std::string layer_table(const ConfigFootprint& f) {
  std::string out = fmt::format("  {:<30} {:>5}  {:<28} {}\n", "kind", "count", "layers", "shape");
  for (const LayerKindRow& row : f.layer_kinds) {
    out += fmt::format("  {:<30} {:>5}  {:<28} {}\n", row.kind, row.layers.size(),
                       describe_layers(row.layers), row.shape);
  }
  return out;
}

}  // namespace

std::string format_bytes(int64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", nullptr};
  return scaled(static_cast<double>(bytes), kUnits, 1024.0);
}

std::string format_count(int64_t count) {
  static const char* const kUnits[] = {"", "K", "M", "G", "T", nullptr};
  std::string text = scaled(static_cast<double>(count), kUnits, 1000.0);
  if (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string describe_layers(const std::vector<int64_t>& layers) {
  if (layers.empty()) return "-";
  if (is_progression(layers)) {
    return fmt::format("{}, {}, ..., {} (every {})", layers[0], layers[1], layers.back(),
                       layers[1] - layers[0]);
  }
  std::vector<std::pair<int64_t, int64_t>> runs = runs_of(layers);
  std::vector<std::string> pieces;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    bool head = i < kMaxPieces / 2;
    bool tail = i + kMaxPieces / 2 >= runs.size();
    if (runs.size() <= kMaxPieces || head || tail) {
      pieces.push_back(run_text(runs[i]));
    } else if (pieces.back() != "...") {
      pieces.push_back("...");
    }
  }
  return fmt::format("{}", fmt::join(pieces, ", "));
}

ModelSummary summarize_model(const ModelConfig& config, const SummaryOptions& options) {
  return summarize_footprint(family_of(config), model_footprint(config, options.footprint),
                             options);
}

ModelSummary summarize_footprint(ModelFamily family, ConfigFootprint footprint,
                                 const SummaryOptions& options) {
  if (options.context < 0 || options.sequences < 1) {
    fail("summary: context must be >= 0 and sequences >= 1 (got {} and {})", options.context,
         options.sequences);
  }
  ModelSummary s;
  s.family = family;
  s.footprint = std::move(footprint);
  const ConfigFootprint& f = s.footprint;
  s.context = options.context > 0 ? options.context
                                  : (f.max_context > 0 ? std::min(f.max_context, kDefaultContext)
                                                       : kDefaultContext);
  s.sequences = options.sequences;
  s.total_params = f.total_params();
  s.active_params = f.active_params();
  s.weight_bytes = f.total_weight_bytes();
  s.weight_bytes_read_per_token = f.weight_bytes_read_per_token();
  s.state_bytes_read_per_token = f.state_read_bytes_per_token(s.context);
  s.state_bytes_written_per_token = f.state_written_bytes_per_token();
  s.state_bytes_per_sequence = f.state_bytes(s.context);
  s.memory_bytes = s.weight_bytes + s.sequences * s.state_bytes_per_sequence;
  return s;
}

std::string format_model_summary(const ModelSummary& s) {
  const ConfigFootprint& f = s.footprint;
  std::string out =
      fmt::format("Family: {}\nArchitecture: {}\n", family_name(s.family), f.architecture);
  if (f.max_context > 0) out += fmt::format("Max context: {}\n", f.max_context);
  out += "\nLayers:\n" + layer_table(f);
  out +=
      "\nWeights (read/step = bytes read per " + f.step_name + " at batch 1):\n" + weights_table(s);
  out +=
      fmt::format("  active parameters per {}: {}\n", f.step_name, format_count(s.active_params));
  out += fmt::format("\nPer-sequence state at context {}:\n", s.context) + state_table(s);
  out += fmt::format("  {:<26} {:<52} {:>12}\n", "total", "",
                     format_bytes(s.state_bytes_per_sequence));
  out += fmt::format(
      "\nBytes per {} at batch 1, context {}: weights {} + state read {} + state written {} = {}\n",
      f.step_name, s.context, format_bytes(s.weight_bytes_read_per_token),
      format_bytes(s.state_bytes_read_per_token), format_bytes(s.state_bytes_written_per_token),
      format_bytes(s.bytes_per_token()));
  out += fmt::format("Memory for {} sequence(s) at context {}: weights {} + state {} x {} = {}\n",
                     s.sequences, s.context, format_bytes(s.weight_bytes), s.sequences,
                     format_bytes(s.state_bytes_per_sequence), format_bytes(s.memory_bytes));
  if (f.max_context > 0 && s.context > f.max_context) {
    out += fmt::format("Warning: context {} exceeds the model's maximum {}\n", s.context,
                       f.max_context);
  }
  for (const std::string& note : f.notes) out += "Note: " + note + "\n";
  return out;
}

}  // namespace md
