// libFuzzer entry point for the GGUF header parser: any input must either parse into tensors
// that lie inside it, aligned and without overlaps, or throw md::Error. Anything else aborts.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "base/error.h"
#include "io/gguf_header.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// Touches every metadata value, so ASan sees any string or array built from bad lengths.
std::uint64_t visit(const md::GgufValue& value) {
  std::uint64_t sum = value.describe().size();
  if (const auto* text = value.as_string()) {
    for (char c : *text) sum += static_cast<std::uint8_t>(c);
  }
  if (const auto* array = value.as_array()) {
    for (const md::GgufValue& element : *array) sum += visit(element);
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> file(data, size);
  try {
    md::GgufHeader header = md::parse_gguf_header(file, "fuzz");
    check(header.data_offset <= size);
    check(header.alignment > 0 && (header.alignment & (header.alignment - 1)) == 0);
    std::uint64_t sum = 0;
    for (const md::GgufMetadataEntry& entry : header.metadata) sum += visit(entry.value);
    std::vector<const md::GgufTensor*> sorted;
    for (const md::GgufTensor& t : header.tensors) {
      check(t.dims.size() <= 4 && t.offset >= header.data_offset && t.nbytes <= size - t.offset);
      check((t.offset - header.data_offset) % header.alignment == 0);
      for (std::size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];  // ASan checks the range
      if (t.nbytes > 0) sorted.push_back(&t);
    }
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < sorted.size(); ++i) {
      check(sorted[i]->offset >= sorted[i - 1]->offset + sorted[i - 1]->nbytes);
    }
    check(sum != 1ull << 63);  // keeps the reads from being optimised away
  } catch (const md::Error&) {
  }
  return 0;
}
