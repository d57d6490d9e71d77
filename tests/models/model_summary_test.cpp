#include "models/model_summary.h"

#include <gtest/gtest.h>

#include "config_test_util.h"

namespace md {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
constexpr int64_t kGiB = 1024 * kMiB;
constexpr double kGiBf = static_cast<double>(kGiB);

ModelConfig load(const char* fixture) {
  return load_model_config(test::config_fixture_dir(fixture));
}

ModelSummary summarize(const ModelConfig& config, int64_t context, int64_t sequences = 1,
                       FootprintOptions footprint = {}) {
  return summarize_model(config, SummaryOptions{context, sequences, footprint});
}

const StateGroup& state(const ModelSummary& s, const char* name) {
  const StateGroup* group = s.footprint.find_state(name);
  EXPECT_NE(group, nullptr) << name;
  static const StateGroup kNone;
  return group ? *group : kNone;
}

// qwen38-dflash2.md §2 (parameter count) and §9 (state sizes).
TEST(ModelSummary, Qwen38_27BMatchesTheSpec) {
  ModelSummary s = summarize(load("qwen38-27b"), 32768);
  const ConfigFootprint& f = s.footprint;
  const int64_t h = 5120;
  EXPECT_EQ(f.params_of(WeightKind::kLinearAttention), 48 * int64_t{115875936});
  EXPECT_EQ(f.params_of(WeightKind::kAttention), 16 * int64_t{104857600});
  EXPECT_EQ(f.params_of(WeightKind::kMlp), 64 * int64_t{267386880});
  EXPECT_EQ(f.params_of(WeightKind::kEmbedding), int64_t{248320} * h);
  EXPECT_EQ(f.params_of(WeightKind::kLmHead), int64_t{248320} * h);
  // "A GDN layer holds 383.27 M parameters; an attention layer holds 372.26 M."
  int64_t mlp_layer = f.params_of(WeightKind::kMlp) / 64;
  int64_t gdn_layer = f.params_of(WeightKind::kLinearAttention) / 48 + mlp_layer + 2 * h + 128;
  int64_t attention_layer = f.params_of(WeightKind::kAttention) / 16 + mlp_layer + 2 * h + 512;
  EXPECT_EQ(gdn_layer, 383273184);
  EXPECT_EQ(attention_layer, 372255232);
  // "The whole text model holds 26.90 G parameters, about 53.8 GB in bf16."
  EXPECT_EQ(s.total_params, 26895998464);
  EXPECT_EQ(s.active_params, s.total_params - int64_t{248320} * h + h);
  EXPECT_NEAR(static_cast<double>(s.weight_bytes) / 1e9, 53.8, 0.05);
  EXPECT_EQ(s.weight_bytes, 2 * s.total_params + 48 * 48 * 2);  // A_log is f32
  // Everything but the embedding table is read per token, plus one embedding row.
  EXPECT_EQ(s.weight_bytes_read_per_token, s.weight_bytes - 2 * int64_t{248320} * h + 2 * h);

  // §9: 64 KiB of KV per token (2 GiB at 32k, 16 GiB at 262144), 144 MiB recurrent state,
  // conv state 2.81 MiB with 3 columns.
  EXPECT_EQ(state(s, "KV cache").bytes_per_token, 64 * kKiB);
  EXPECT_EQ(state(s, "KV cache").bytes(32768), 2 * kGiB);
  EXPECT_EQ(state(s, "KV cache").bytes(262144), 16 * kGiB);
  EXPECT_EQ(state(s, "GDN recurrent state").fixed_bytes, 144 * kMiB);
  EXPECT_EQ(state(s, "GDN conv state").fixed_bytes, 2949120);  // 2.8125 MiB
  int64_t recurrent = 144 * kMiB + 2949120;
  EXPECT_EQ(s.state_bytes_per_sequence, 2 * kGiB + recurrent);
  EXPECT_EQ(s.state_bytes_read_per_token, 2 * kGiB + recurrent);
  EXPECT_EQ(s.state_bytes_written_per_token, 64 * kKiB + recurrent);
  EXPECT_EQ(s.bytes_per_token(),
            s.weight_bytes_read_per_token + 2 * kGiB + 64 * kKiB + 2 * recurrent);
  EXPECT_EQ(s.memory_bytes, s.weight_bytes + s.state_bytes_per_sequence);

  ModelSummary four = summarize(load("qwen38-27b"), 32768, 4);
  EXPECT_EQ(four.memory_bytes, s.weight_bytes + 4 * s.state_bytes_per_sequence);
  // Exactness configuration: f32 KV cache and conv history.
  ModelSummary exact = summarize(load("qwen38-27b"), 32768, 1,
                                 FootprintOptions{WeightFormat::kF32, WeightFormat::kF32});
  EXPECT_EQ(state(exact, "KV cache").bytes_per_token, 128 * kKiB);
  EXPECT_EQ(state(exact, "GDN conv state").fixed_bytes, 2 * 2949120);
}

TEST(ModelSummary, DefaultContextIsCappedAt32kOrTheModelMaximum) {
  EXPECT_EQ(summarize_model(load("qwen38-27b")).context, 32768);
  EXPECT_EQ(summarize_model(load("qwen38-tiny")).context, 4096);
  EXPECT_THROW(summarize(load("qwen38-tiny"), -1), Error);
  EXPECT_THROW(summarize(load("qwen38-tiny"), 16, 0), Error);
}

// §9: "3.85 GB for the draft (1.924 G parameters)"; context ring 10 KiB + 20 KiB per position.
TEST(ModelSummary, DFlash2DrafterMatchesTheSpec) {
  ModelSummary s = summarize(load("qwen38-dflash2"), 32768);
  EXPECT_EQ(s.total_params, 1924404480);
  EXPECT_NEAR(static_cast<double>(s.weight_bytes) / 1e9, 3.85, 0.005);
  EXPECT_EQ(state(s, "draft context features").bytes_per_token, 10 * kKiB);
  EXPECT_EQ(state(s, "draft context K/V").bytes_per_token, 20 * kKiB);
  EXPECT_EQ(s.state_bytes_per_sequence, 30 * kKiB * (2048 + 8));
  EXPECT_EQ(s.footprint.step_name, "draft round (block of 8)");
}

// kimi-k3-dspark.md §3 (expert size) and §10 (state sizes).
TEST(ModelSummary, KimiK3MatchesTheSpec) {
  ModelSummary s = summarize(load("kimi-k3"), 131072);
  const ConfigFootprint& f = s.footprint;
  const int64_t expert = 17547264;  // "One expert is 17,547,264 bytes."
  EXPECT_EQ(f.bytes_of(WeightKind::kRoutedExperts), int64_t{92} * 896 * expert);
  int64_t experts_read = 0;
  for (const WeightGroup& group : f.weights) {
    if (group.kind == WeightKind::kRoutedExperts) {
      EXPECT_EQ(group.format, WeightFormat::kMXFP4);
      experts_read = group.read_bytes_per_token;
    }
  }
  EXPECT_EQ(experts_read, int64_t{92} * 16 * expert);  // top-16 per MoE layer
  EXPECT_EQ(f.params_of(WeightKind::kSharedExperts), int64_t{92} * 3 * 6144 * 7168);
  EXPECT_EQ(f.params_of(WeightKind::kMlp), int64_t{3} * 33792 * 7168);
  // The checkpoint is 1453.74 (GiB) including the vision tower and projector, which are not
  // counted here (< 1 GiB).
  EXPECT_NEAR(static_cast<double>(s.weight_bytes) / kGiBf, 1453.74, 1.0);
  EXPECT_LT(static_cast<double>(s.weight_bytes) / kGiBf, 1453.74);

  EXPECT_EQ(state(s, "KDA recurrent state").fixed_bytes, 434110464);
  EXPECT_EQ(state(s, "KDA conv state").fixed_bytes, 15261696);
  EXPECT_EQ(state(s, "MLA latent cache").bytes_per_token, 27648);
  EXPECT_EQ(state(s, "MLA latent cache").bytes(131072), 27 * 128 * kMiB);  // 3.375 GiB at 128K
  EXPECT_EQ(s.state_bytes_per_sequence, 434110464 + 15261696 + int64_t{27648} * 131072);

  FootprintOptions plain;
  plain.mla_absorbed = false;
  ModelSummary unabsorbed = summarize(load("kimi-k3"), 131072, 1, plain);
  EXPECT_EQ(state(unabsorbed, "MLA K/V cache").bytes_per_token, 1474560);  // 1.41 MiB
}

// real-configs.md §2c: "4,744,900,481 params"; §10: draft ring 40 MiB + 8 KiB.
TEST(ModelSummary, DSparkDrafterMatchesTheSpec) {
  ModelSummary s = summarize(load("kimi-k3-dspark"), 131072);
  EXPECT_EQ(s.total_params, 4744900481);
  EXPECT_EQ(s.state_bytes_per_sequence, 40 * kMiB + 8 * kKiB);
  EXPECT_EQ(summarize(load("kimi-k3-dspark"), 100).state_bytes_per_sequence,
            100 * (40 * kMiB + 8 * kKiB) / 2048);
}

// muse-spark-nvfp4.md §5 "Derived bandwidth and memory budget".
TEST(ModelSummary, MuseSparkMatchesTheSpec) {
  ModelConfig vendor = load("musespark");
  ModelConfig all_nvfp4 = vendor;
  std::get<MuseSparkConfig>(all_nvfp4).expert_formats.assign(62, WeightFormat::kNVFP4);
  ModelSummary s = summarize(all_nvfp4, 8192);
  const ConfigFootprint& f = s.footprint;
  // Dense per layer: 544 MiB bf16 + 8 MiB f32 router (+ 1 KiB router bias).
  int64_t dense = f.bytes_of(WeightKind::kAttention) + f.bytes_of(WeightKind::kMoeProjection);
  EXPECT_EQ(dense, 62 * 544 * kMiB);
  EXPECT_EQ(f.bytes_of(WeightKind::kRouter), 62 * (8 * kMiB + kKiB));
  // One NVFP4 expert: 27 MiB (+ its six f32 global/input scales); all experts of a layer 6.75 GiB.
  EXPECT_EQ(f.bytes_of(WeightKind::kRoutedExperts), int64_t{62} * 256 * (27 * kMiB + 24));
  EXPECT_EQ(f.bytes_of(WeightKind::kEmbedding), int64_t{202048} * 8192 * 2);  // 3.08 GiB
  // "Bytes read per step at B=1: dense + 8 experts/layer + lm_head ≈ 49.6 GiB (bf16 dense)".
  EXPECT_NEAR(static_cast<double>(s.weight_bytes_read_per_token) / kGiBf, 49.6, 0.05);
  // "Resident weights: all 62 layers NVFP4 ≈ 458 GiB; vendor layout ≈ 493 GiB".
  EXPECT_NEAR(static_cast<double>(s.weight_bytes) / kGiBf, 458, 0.5);
  // "816B-A42B": the counts without the embedding table and lm_head.
  int64_t vocab_params = 2 * int64_t{202048} * 8192;
  EXPECT_NEAR(static_cast<double>(s.total_params - vocab_params) / 1e9, 816, 1.0);
  EXPECT_NEAR(static_cast<double>(s.active_params - vocab_params / 2) / 1e9, 42, 1.0);
  ModelSummary v = summarize(vendor, 8192);
  EXPECT_NEAR(static_cast<double>(v.weight_bytes) / kGiBf, 493, 0.5);
  EXPECT_EQ(v.footprint.bytes_of(WeightKind::kRoutedExperts),
            int64_t{60} * 256 * (27 * kMiB + 24) + int64_t{2} * 256 * 96 * kMiB);

  // KV: 248 KiB per token contiguous; ring buffer 64 KiB·C + 46·4 KiB·min(C, 2048), plus the
  // 8 slots per ring that megadecode keeps for verify rows.
  FootprintOptions contiguous;
  contiguous.sliding_window_ring = false;
  ModelSummary flat = summarize(vendor, 8192, 1, contiguous);
  EXPECT_EQ(flat.state_bytes_per_sequence, 248 * kKiB * 8192);                           // 1.94 GiB
  EXPECT_EQ(s.state_bytes_per_sequence, 64 * kKiB * 8192 + 46 * 4 * kKiB * (2048 + 8));  // 0.86 GiB
  EXPECT_NEAR(static_cast<double>(s.state_bytes_per_sequence) / kGiBf, 0.86, 0.005);
  ModelSummary long_flat = summarize(vendor, 32768, 8, contiguous);
  ModelSummary long_ring = summarize(vendor, 32768, 8);
  EXPECT_NEAR(static_cast<double>(long_flat.state_bytes_per_sequence) / kGiBf, 7.75, 0.005);
  EXPECT_NEAR(static_cast<double>(long_ring.state_bytes_per_sequence) / kGiBf, 2.36, 0.005);
  EXPECT_NEAR(static_cast<double>(long_flat.memory_bytes - long_flat.weight_bytes) / kGiBf, 62,
              0.01);
  // The spec's "19 GiB" is 8 x its rounded 2.36 GiB.
  EXPECT_NEAR(static_cast<double>(long_ring.memory_bytes - long_ring.weight_bytes) / kGiBf, 19,
              0.15);
  // Decode reads only the window on sliding layers, whatever the layout.
  EXPECT_EQ(long_flat.state_bytes_read_per_token, long_ring.state_bytes_read_per_token);
}

// §5's int8 option: "dense per layer 272 MiB + 8 MiB", "lm_head (int8) 1.54 GiB", "bytes read per
// step ≈ 31.6 GiB (int8 dense)"; the spec leaves out the f32 scale per output row (44 KiB a layer,
// 0.8 MiB for lm_head), which megadecode stores and reads.
TEST(ModelSummary, MuseSparkInt8DenseMatchesTheSpec) {
  ModelConfig all_nvfp4 = load("musespark");
  std::get<MuseSparkConfig>(all_nvfp4).expert_formats.assign(62, WeightFormat::kNVFP4);
  FootprintOptions int8;
  int8.dense_int8 = true;
  ModelSummary s = summarize(all_nvfp4, 8192, 1, int8);
  const ConfigFootprint& f = s.footprint;
  const int64_t scales_per_layer = 4 * (2 * 8192 + 8192 + 2 * 1024 + 4096 + 8192);
  EXPECT_EQ(f.bytes_of(WeightKind::kAttention) + f.bytes_of(WeightKind::kMoeProjection),
            62 * (272 * kMiB + scales_per_layer));
  EXPECT_EQ(f.bytes_of(WeightKind::kRouter), 62 * (8 * kMiB + kKiB));  // stays f32
  EXPECT_EQ(f.bytes_of(WeightKind::kLmHead), int64_t{202048} * (8192 + 4));
  EXPECT_NEAR(static_cast<double>(f.bytes_of(WeightKind::kLmHead)) / kGiBf, 1.54, 0.005);
  EXPECT_NEAR(static_cast<double>(s.weight_bytes_read_per_token) / kGiBf, 31.6, 0.05);
  // The option changes nothing else: the embedding table and the experts are as stored.
  ModelSummary stored = summarize(all_nvfp4, 8192);
  EXPECT_EQ(f.bytes_of(WeightKind::kEmbedding), stored.footprint.bytes_of(WeightKind::kEmbedding));
  EXPECT_EQ(f.bytes_of(WeightKind::kRoutedExperts),
            stored.footprint.bytes_of(WeightKind::kRoutedExperts));
}

TEST(ModelSummary, SmolLM2TiesItsEmbedding) {
  ModelSummary s = summarize(load("smollm2-135m"), 8192);
  EXPECT_EQ(s.total_params, 134515008);
  EXPECT_EQ(s.weight_bytes, 2 * s.total_params);
  // The tied table is stored once but read whole as lm_head.
  EXPECT_EQ(s.weight_bytes_read_per_token, s.weight_bytes + 2 * 576);
  EXPECT_EQ(state(s, "KV cache").bytes_per_token, 30 * 2 * 192 * 2);
  EXPECT_EQ(s.active_params, s.total_params - int64_t{49152} * 576 + 576 + int64_t{49152} * 576);
}

TEST(ModelSummary, ScaledDownModelsSummarize) {
  for (const char* fixture :
       {"qwen38-tiny", "kimi-k3-tiny", "musespark-tiny", "dflash2-tiny", "dspark-tiny"}) {
    SCOPED_TRACE(fixture);
    ModelSummary s = summarize(load(fixture), 64);
    EXPECT_GT(s.total_params, 0);
    EXPECT_GT(s.weight_bytes_read_per_token, 0);
    EXPECT_LE(s.weight_bytes_read_per_token, s.weight_bytes);
    EXPECT_FALSE(format_model_summary(s).empty());
  }
  // tiny Kimi: absorbed MLA caches 48 values per token and layer (§15).
  ModelSummary kimi = summarize(load("kimi-k3-tiny"), 64);
  EXPECT_EQ(state(kimi, "MLA latent cache").bytes_per_token, 3 * 48 * 2);
}

TEST(ModelSummary, FormatsReadableText) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(64 * kKiB), "64.00 KiB");
  EXPECT_EQ(format_bytes(3 * kGiB / 2), "1.50 GiB");
  EXPECT_EQ(format_count(26895998464), "26.90 G");
  EXPECT_EQ(format_count(42), "42");
  EXPECT_EQ(describe_layers({3, 7, 11, 15}), "3, 7, ..., 15 (every 4)");
  EXPECT_EQ(describe_layers({0, 1, 2, 4, 5, 6}), "0-2, 4-6");
  EXPECT_EQ(describe_layers({0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 14, 16, 17, 20}),
            "0-2, 4-6, ..., 16-17, 20");
  EXPECT_EQ(describe_layers({0, 1, 2, 4, 5, 6, 8}), "0-2, 4-6, 8");
  EXPECT_EQ(describe_layers({}), "-");

  std::string text = format_model_summary(summarize(load("qwen38-27b"), 32768));
  for (const char* fragment :
       {"Family: qwen38", "48 Gated DeltaNet + 16 gated GQA attention", "3, 7, ..., 63 (every 4)",
        "26.90 G", "linear attention", "KV cache", "2.00 GiB", "64.00 KiB/token", "144.00 MiB",
        "Bytes per decoded token at batch 1, context 32768", "Memory for 1 sequence(s)"}) {
    EXPECT_NE(text.find(fragment), std::string::npos) << fragment << "\n" << text;
  }
}

}  // namespace
}  // namespace md
