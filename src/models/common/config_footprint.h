// What a model config implies before any weight is loaded: parameters and stored bytes per kind of
// weight, the per-sequence state, and the layer table. `megadecode info` is built on it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace md {

// How a weight is stored. Quantized formats count their scales in the bytes.
// The GGUF block formats (kQ8_0 …) are counted from a file's tensors (models/gguf_model_summary).
enum class WeightFormat : uint8_t {
  kBF16,
  kF16,
  kF32,
  kInt8,
  kMXFP4,
  kNVFP4,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ4_K,
  kQ6_K,
  kQ5_0,
  kQ5_K
};
std::string_view weight_format_name(WeightFormat format);
// Bytes per element of the unquantized formats (bf16 2, f16 2, f32 4, int8 1).
int64_t dense_element_bytes(WeightFormat format);

// A [rows, cols] matrix in OCP MXFP4 (compressed-tensors mxfp4-pack-quantized): two e2m1 codes
// per byte plus one e8m0 scale byte per 32 inputs.
int64_t mxfp4_matrix_bytes(int64_t rows, int64_t cols);
// A [rows, cols] matrix in NVFP4: two e2m1 codes per byte plus one e4m3 scale per 16 inputs.
// The f32 global scales are counted separately by the caller (their number is per tensor half).
int64_t nvfp4_matrix_bytes(int64_t rows, int64_t cols);

enum class WeightKind : uint8_t {
  kEmbedding,
  kAttention,        // softmax attention: GQA, MLA, sliding window
  kLinearAttention,  // Gated DeltaNet / KDA
  kMlp,              // dense FFN
  kRouter,
  kMoeProjection,  // latent MoE down/up projections around the experts
  kRoutedExperts,
  kSharedExperts,
  kNorms,  // norm weights, residual gates and mixing vectors
  kLmHead,
  kDraftInput,  // drafter fc over the target taps
  kBlockConv,   // DFlash2 dynamic block convolutions
  kDraftHead,   // DFlash2 candidate selector, DSpark Markov and confidence heads
};
std::string_view weight_kind_name(WeightKind kind);

struct WeightGroup {
  WeightKind kind;
  WeightFormat format;
  int64_t params = 0;  // logical weights (a quantized weight counts once, its scales not at all)
  int64_t bytes = 0;   // stored bytes, scales included
  int64_t read_bytes_per_token = 0;  // bytes one decoded token reads at batch 1
  int64_t active_params = 0;         // parameters one decoded token uses
};

// One piece of per-sequence state. Its size at context C (positions kept) is
// fixed_bytes + bytes_per_token * kept(C), where kept(C) = min(C, window) for a windowed cache.
struct StateGroup {
  std::string name;
  std::string layout;
  int64_t fixed_bytes = 0;      // recurrent / conv state: read and rewritten every step
  int64_t bytes_per_token = 0;  // caches: one row written per step, the kept rows read
  int64_t window = 0;           // > 0: only the last `window` positions are attended
  bool ring = false;            // the cache stores only the window (else the whole context)
  int64_t ring_spare = 0;       // ring slots beyond the window (keys of verify rows until commit)

  int64_t positions_attended(int64_t context) const;
  int64_t positions_stored(int64_t context) const;
  int64_t bytes(int64_t context) const;
  int64_t read_bytes_per_token(int64_t context) const;
  int64_t written_bytes_per_token() const { return fixed_bytes + bytes_per_token; }
};

struct LayerKindRow {
  std::string kind;             // "Gated DeltaNet"
  std::vector<int64_t> layers;  // 0-based indices
  std::string shape;            // "16 k-heads x 128, 48 v-heads x 128, conv 4"
};

// Choices that change the state or weight layout without changing the model.
struct FootprintOptions {
  WeightFormat kv_cache = WeightFormat::kBF16;  // f32 for exactness tests
  // Short-conv history of delta-rule layers: the last kernel-1 raw projections, which are bf16
  // values in every spec's numerics, so bf16 storage is exact.
  WeightFormat conv_state = WeightFormat::kBF16;
  bool mla_absorbed = true;         // Kimi: cache the 576-wide latent instead of per-head K/V
  bool sliding_window_ring = true;  // Muse: sliding layers keep a window-sized ring
  bool dense_int8 = false;  // Muse: --dense-weights int8 (dense matrices int8 per output row)
};

struct ConfigFootprint {
  std::string architecture;  // one line
  // What "per token" reads are counted for: drafters report one draft round instead.
  std::string step_name = "decoded token";
  std::vector<LayerKindRow> layer_kinds;
  std::vector<WeightGroup> weights;
  std::vector<StateGroup> state;
  std::vector<std::string> notes;  // assumptions the numbers rest on
  int64_t max_context = 0;         // 0 when the config states none
  int64_t default_context = 0;     // the context `info` reports at when none is asked for

  int64_t total_params() const;
  int64_t active_params() const;
  int64_t total_weight_bytes() const;
  int64_t weight_bytes_read_per_token() const;
  int64_t params_of(WeightKind kind) const;
  int64_t bytes_of(WeightKind kind) const;
  int64_t state_bytes(int64_t context) const;
  int64_t state_read_bytes_per_token(int64_t context) const;
  int64_t state_written_bytes_per_token() const;
  const StateGroup* find_state(std::string_view name) const;

  // Adds to the group of the same kind and format, or starts one. Active parameters default to
  // the share of `params` that `read_bytes_per_token` is of `bytes`.
  void add_weights(WeightKind kind, WeightFormat format, int64_t params, int64_t bytes,
                   int64_t read_bytes_per_token, int64_t active_params = -1);
  // An unquantized tensor group read whole every token.
  void add_dense(WeightKind kind, WeightFormat format, int64_t params);
  // An embedding table: one row read per token.
  void add_embedding(WeightFormat format, int64_t rows, int64_t cols);
};

}  // namespace md
