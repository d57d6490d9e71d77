#include "models/model_config.h"

#include <type_traits>

#include "base/error.h"

namespace md {

namespace {

template <ModelFamily family, typename Config>
constexpr bool kAt =
    std::is_same_v<std::variant_alternative_t<static_cast<std::size_t>(family), ModelConfig>,
                   Config>;
static_assert(kAt<ModelFamily::kQwen38, Qwen38Config> && kAt<ModelFamily::kKimiK3, KimiK3Config> &&
              kAt<ModelFamily::kMuseSpark, MuseSparkConfig> &&
              kAt<ModelFamily::kLlama, LlamaConfig> && kAt<ModelFamily::kDFlash2, DFlash2Config> &&
              kAt<ModelFamily::kDSpark, DSparkConfig>);

template <typename... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
// C++20 deduces this for aggregates, but Clang only from version 17.
template <typename... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

}  // namespace

ModelFamily family_of(const ModelConfig& config) {
  return static_cast<ModelFamily>(config.index());
}

ModelConfig parse_model_config(const ConfigFiles& files) {
  switch (detect_model_family(files.config, files.config_path)) {
    case ModelFamily::kQwen38:
      return parse_qwen38_config(files);
    case ModelFamily::kKimiK3:
      return parse_kimi_k3_config(files);
    case ModelFamily::kMuseSpark:
      return parse_musespark_config(files);
    case ModelFamily::kLlama:
      return parse_llama_config(files);
    case ModelFamily::kDFlash2:
      return parse_dflash2_config(files);
    case ModelFamily::kDSpark:
      return parse_dspark_config(files);
  }
  fail("{}: unknown model family", files.config_path);
}

ModelConfig load_model_config(const std::string& model_path) {
  return parse_model_config(read_config_files(model_path));
}

void check_draft_for_target(const ModelConfig& target, const ModelConfig& draft) {
  auto mismatch = [&]() {
    fail("a {} drafter cannot draft for a {} target", family_name(family_of(draft)),
         family_name(family_of(target)));
  };
  if (const auto* dflash = std::get_if<DFlash2Config>(&draft)) {
    const auto* qwen = std::get_if<Qwen38Config>(&target);
    if (qwen == nullptr) mismatch();
    check_dflash2_target(*dflash, qwen->draft_target());
    return;
  }
  if (const auto* dspark = std::get_if<DSparkConfig>(&draft)) {
    if (const auto* kimi = std::get_if<KimiK3Config>(&target)) {
      return check_dspark_target(*dspark, kimi->draft_target());
    }
    if (const auto* muse = std::get_if<MuseSparkConfig>(&target)) {
      return check_dspark_target(*dspark, muse->draft_target());
    }
    mismatch();
  }
  fail("{} is not a drafter", family_name(family_of(draft)));
}

ConfigFootprint model_footprint(const ModelConfig& config, const FootprintOptions& options) {
  return std::visit(Overloaded{
                        [&](const Qwen38Config& c) { return qwen38_footprint(c, options); },
                        [&](const KimiK3Config& c) { return kimi_k3_footprint(c, options); },
                        [&](const MuseSparkConfig& c) { return musespark_footprint(c, options); },
                        [&](const LlamaConfig& c) { return llama_footprint(c, options); },
                        [&](const DFlash2Config& c) { return dflash2_footprint(c, options); },
                        [&](const DSparkConfig& c) { return dspark_footprint(c, options); },
                    },
                    config);
}

}  // namespace md
