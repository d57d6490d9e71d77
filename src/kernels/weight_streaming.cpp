#include "kernels/weight_streaming.h"

#include <atomic>
#include <cstdlib>

#include "base/log.h"
#include "kernels/cpu_identity.h"
#include "kernels/weight_streaming_testing.h"

namespace md::kernels {

namespace {

// The test seam's forced walk, or -1.
std::atomic<int> g_forced{-1};

}  // namespace

const char* weight_streaming_name(WeightStreaming streaming) {
  return streaming == WeightStreaming::kHardware ? "hardware" : "prefetch";
}

bool streams_by_hardware(std::string_view vendor, unsigned family) {
  // Zen 3 is family 0x19 (as Zen 4), Zen 5 0x1a; Hygon's Dhyana (0x18) is Zen 1, not measured.
  return (vendor == "AuthenticAMD" || vendor == "HygonGenuine") && family >= 0x19;
}

WeightStreaming default_weight_streaming() {
  const CpuIdentity& cpu = cpu_identity();
  return streams_by_hardware(cpu.vendor, cpu.family) ? WeightStreaming::kHardware
                                                     : WeightStreaming::kPrefetch;
}

WeightStreaming resolve_weight_streaming(std::string_view requested, WeightStreaming fallback) {
  if (requested == "prefetch") return WeightStreaming::kPrefetch;
  if (requested == "hardware") return WeightStreaming::kHardware;
  if (!requested.empty()) {
    log::warn("MEGADECODE_WEIGHT_STREAMING={} is not one of prefetch, hardware; using {}",
              requested, weight_streaming_name(fallback));
  }
  return fallback;
}

WeightStreaming active_weight_streaming() {
  if (int forced = g_forced.load(std::memory_order_relaxed); forced >= 0) {
    return static_cast<WeightStreaming>(forced);
  }
  static const WeightStreaming active = [] {
    const char* requested = std::getenv("MEGADECODE_WEIGHT_STREAMING");
    return resolve_weight_streaming(requested == nullptr ? "" : requested,
                                    default_weight_streaming());
  }();
  return active;
}

}  // namespace md::kernels

namespace md::testing {

ForcedWeightStreaming::ForcedWeightStreaming(kernels::WeightStreaming streaming)
    : previous_(
          kernels::g_forced.exchange(static_cast<int>(streaming), std::memory_order_relaxed)) {}

ForcedWeightStreaming::~ForcedWeightStreaming() {
  kernels::g_forced.store(previous_, std::memory_order_relaxed);
}

}  // namespace md::testing
