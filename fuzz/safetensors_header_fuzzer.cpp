// libFuzzer entry point for the safetensors header parser: any input must either parse into
// tensors that lie inside it, without overlaps, or throw md::Error. Anything else aborts.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "base/error.h"
#include "io/safetensors_header.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> file(data, size);
  try {
    md::SafetensorsHeader header = md::parse_safetensors_header(file, "fuzz");
    check(header.data_offset == 8 + header.json_bytes && header.data_offset <= size);
    std::uint64_t end = 0;
    std::uint64_t sum = 0;
    for (const md::SafetensorsEntry& t : header.tensors) {
      check(t.offset >= header.data_offset && t.nbytes <= size - t.offset);
      if (t.nbytes > 0) {
        check(t.offset >= end);
        end = t.offset + t.nbytes;
      }
      for (std::uint64_t i = 0; i < t.nbytes; ++i) sum += data[t.offset + i];  // ASan checks
    }
    check(sum != 1ull << 63);  // keeps the reads from being optimised away
  } catch (const md::Error&) {
  }
  return 0;
}
