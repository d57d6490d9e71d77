// Randomised mutation testing of the GGUF header parser: thousands of corrupted variants of valid
// files, with a fixed seed so failures reproduce. Each must either parse into tensors that lie
// inside the buffer without overlapping or throw md::Error; anything else fails. Under ASan
// every accepted tensor is read in full, so overreads are caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "base/error.h"
#include "gguf_test_util.h"
#include "io/gguf_header.h"
#include "mutation_fuzz.h"

namespace md {
namespace {

using testing::GgufBuilder;
using testing::put_string;
using testing::put_u32;
using testing::put_u64;

constexpr int kIterations = 8'000;

std::vector<std::vector<std::uint8_t>> seed_files() {
  GgufBuilder a;
  a.string("general.architecture", "llama").u32("llama.block_count", 2);
  a.raw("flag", 7, {1}).raw("small", 0, {7});
  std::vector<std::uint8_t> tokens;
  put_u32(tokens, 8);
  put_u64(tokens, 3);
  for (const char* t : {"<s>", "a", "bc"}) put_string(tokens, t);
  a.raw("tokenizer.ggml.tokens", 9, tokens);
  a.tensor({"w", 8, {32, 2}, std::vector<std::uint8_t>(68, 5)});
  a.tensor({"n", 0, {4}, std::vector<std::uint8_t>(16, 1)});

  GgufBuilder b;
  b.version = 2;
  b.alignment = 64;
  b.u32("general.alignment", 64);
  std::vector<std::uint8_t> nested;
  put_u32(nested, 9);
  put_u64(nested, 2);
  for (int i = 0; i < 2; ++i) {
    put_u32(nested, 5);
    put_u64(nested, 1);
    put_u32(nested, 42);
  }
  b.raw("nested", 9, nested);
  b.tensor({"k", 12, {256}, std::vector<std::uint8_t>(144, 9)});
  b.tensor({"e", 1, {0, 4}, {}});
  b.tensor({"s", 30, {2, 2, 1, 1}, std::vector<std::uint8_t>(8, 3)});

  GgufBuilder c;
  c.raw("f64", 12, std::vector<std::uint8_t>(8, 0x3f));
  return {a.build(), b.build(), c.build()};
}

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  std::vector<std::uint8_t> mutate(std::vector<std::uint8_t> file) {
    for (int i = 0, rounds = 1 + static_cast<int>(below(3)); i < rounds; ++i) {
      file = mutate_once(std::move(file));
    }
    return file;
  }

 private:
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  // Boundaries of the integer types and of the sizes the parser computes with.
  std::uint64_t tricky_number() {
    static const std::uint64_t values[] = {
        0,          1,          2,     3,         4,          5,
        8,          9,          12,    13,        31,         32,
        33,         64,         255,   256,       1ull << 31, 1ull << 32,
        1ull << 62, 1ull << 63, ~0ull, ~0ull - 7, 0x03000000, (1ull << 63) - 1};
    return below(100) < 70 ? values[below(std::size(values))] : rng_() >> below(64);
  }

  std::vector<std::uint8_t> mutate_once(std::vector<std::uint8_t> file) {
    switch (below(6)) {
      case 0:  // bit flips
        for (int i = 0, n = 1 + static_cast<int>(below(8)); i < n && !file.empty(); ++i) {
          file[below(file.size())] ^= static_cast<std::uint8_t>(1u << below(8));
        }
        return file;
      case 1:
        file.resize(below(file.size() + 1));
        return file;
      case 2:
      case 3: {  // a counted field overwritten with a tricky value, 4 or 8 bytes wide
        std::size_t width = below(2) ? 8 : 4;
        if (file.size() < width) return file;
        std::size_t at = below(file.size() - width + 1);
        std::uint64_t value = tricky_number();
        for (std::size_t i = 0; i < width; ++i)
          file[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
        return file;
      }
      case 4: {  // insert or delete a run of bytes
        std::size_t at = below(file.size() + 1);
        if (below(2)) {
          std::vector<std::uint8_t> junk(1 + below(16));
          for (auto& byte : junk) byte = static_cast<std::uint8_t>(rng_());
          file.insert(file.begin() + static_cast<std::ptrdiff_t>(at), junk.begin(), junk.end());
        } else {
          std::size_t n = std::min<std::size_t>(1 + below(16), file.size() - at);
          file.erase(file.begin() + static_cast<std::ptrdiff_t>(at),
                     file.begin() + static_cast<std::ptrdiff_t>(at + n));
        }
        return file;
      }
      default:  // data section grows or shrinks under an intact header
        file.resize(below(2) ? file.size() + below(128)
                             : file.size() - below(std::min<std::size_t>(file.size(), 128)));
        return file;
    }
  }

  std::mt19937_64 rng_;
};

void check_invariants(const std::vector<std::uint8_t>& file, const GgufHeader& header) {
  ASSERT_TRUE(header.version == 2 || header.version == 3);
  ASSERT_TRUE(header.alignment > 0 && (header.alignment & (header.alignment - 1)) == 0);
  ASSERT_LE(header.data_offset, file.size());
  std::vector<const GgufTensor*> sorted;
  std::uint64_t checksum = 0;
  for (const GgufTensor& t : header.tensors) {
    ASSERT_LE(t.dims.size(), 4u);
    ASSERT_GE(t.offset, header.data_offset) << t.name;
    ASSERT_EQ((t.offset - header.data_offset) % header.alignment, 0u) << t.name;
    ASSERT_LE(t.nbytes, file.size() - t.offset) << t.name;
    const GgmlTypeInfo& info = ggml_type_info(t.type);
    ASSERT_EQ(t.nbytes,
              static_cast<std::uint64_t>(t.numel()) / info.block_elems * info.block_bytes);
    ASSERT_EQ(t.data, file.data() + t.offset);
    for (std::size_t i = 0; i < t.nbytes; ++i) checksum += t.data[i];  // ASan checks the range
    if (t.nbytes > 0) sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    ASSERT_GE(sorted[i]->offset, sorted[i - 1]->offset + sorted[i - 1]->nbytes);
  }
  (void)checksum;
}

TEST(GgufFuzz, MutatedFilesParseSafelyOrThrowMdError) {
  const auto seeds = seed_files();
  for (const auto& seed : seeds) ASSERT_NO_THROW(parse_gguf_header(seed, "seed.gguf"));
  Mutator mutator(0x9e3779b97f4a7c15ull);
  testing::FuzzOutcome outcome = testing::run_mutation_fuzz(
      seeds, kIterations, "fuzz.gguf", [&](const auto& seed) { return mutator.mutate(seed); },
      [](const std::vector<std::uint8_t>& file) {
        check_invariants(file, parse_gguf_header(file, "fuzz.gguf"));
      });
  int accepted = outcome.accepted, rejected = outcome.rejected;
  // Both outcomes must be common, or the mutations are not exercising the parser.
  EXPECT_GT(accepted, kIterations / 50);
  EXPECT_GT(rejected, kIterations / 4);
  std::printf("gguf fuzz: %d accepted, %d rejected\n", accepted, rejected);
}

}  // namespace
}  // namespace md
