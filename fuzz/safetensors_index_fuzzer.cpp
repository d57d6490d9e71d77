// libFuzzer entry point for the sharded-checkpoint index parser: any text must either throw
// md::Error or yield shard names that cannot leave the checkpoint directory.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "base/error.h"
#include "io/safetensors_index.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    md::SafetensorsIndex index = md::parse_safetensors_index(text, "fuzz");
    for (const std::string& shard : index.shards) {
      if (!md::shard_name_problem(shard).empty()) std::abort();
    }
    for (const auto& [name, shard] : index.weight_map) {
      if (shard >= index.shards.size()) std::abort();
    }
  } catch (const md::Error&) {
  }
  return 0;
}
