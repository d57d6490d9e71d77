// Randomised mutation testing of the safetensors and index parsers: thousands of corrupted
// variants of valid files, with a fixed seed so failures reproduce. Each must either parse into
// tensors that lie inside the buffer or throw md::Error; anything else (crash, UB, another
// exception) fails. Under ASan every accepted view is read in full, so overreads are caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "io/safetensors_header.h"
#include "io/safetensors_index.h"
#include "io_test_util.h"
#include "mutation_fuzz.h"

namespace md {
namespace {

using nlohmann::ordered_json;
using testing::make_safetensors;
using testing::pattern_bytes;
using testing::raw_safetensors;

constexpr int kIterations = 16'000;

std::vector<std::vector<std::uint8_t>> seed_files() {
  return {
      make_safetensors(
          {{"w", "BF16", {2, 3}, pattern_bytes(12, 1)}, {"b", "F32", {3}, pattern_bytes(12, 2)}},
          {{"format", "pt"}}),
      make_safetensors(
          {{"model.layers.0.mlp.experts.gate_up_proj_weight", "U8", {4, 8}, pattern_bytes(32, 3)},
           {"model.layers.0.mlp.experts.gate_up_proj_weight_scale",
            "F8_E4M3",
            {4, 1},
            pattern_bytes(4, 4)},
           {"scalar", "I64", {}, pattern_bytes(8, 5)},
           {"empty", "F16", {0, 7}, {}},
           {"ids", "I32", {2}, pattern_bytes(8, 6)}}),
      make_safetensors({{"a", "I8", {1}, {1}},
                        {"c", "F64", {1, 1}, pattern_bytes(8, 7)},
                        {"d", "BOOL", {2}, {0, 1}},
                        {"e", "I16", {1}, {1, 2}}}),
  };
}

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  std::vector<std::uint8_t> mutate(std::vector<std::uint8_t> file) {
    int rounds = 1 + below(3);
    for (int i = 0; i < rounds; ++i) file = mutate_once(std::move(file));
    return file;
  }

 private:
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(int percent) { return static_cast<int>(below(100)) < percent; }

  // Interesting integers: boundaries of the types and sizes the parser computes with.
  std::uint64_t tricky_number() {
    static const std::uint64_t values[] = {0,          1,          2,          7,
                                           8,          255,        4096,       1ull << 31,
                                           1ull << 32, 1ull << 62, 1ull << 63, ~0ull,
                                           ~0ull - 7,  100000000,  100000001,  (1ull << 63) - 1};
    return chance(70) ? values[below(std::size(values))] : rng_() >> below(64);
  }

  std::vector<std::uint8_t> mutate_once(std::vector<std::uint8_t> file) {
    switch (below(10)) {
      case 0:
        return flip_bits(std::move(file));
      case 1:
        file.resize(below(file.size() + 1));
        return file;
      case 2:
        return lie_about_length(std::move(file));
      case 3:
        return edit_entries(std::move(file));
      case 4:
        return splice_json_tokens(std::move(file));
      case 5:
        return duplicate_entry(std::move(file));
      case 6:
        return garbage_header(std::move(file));
      case 7: {  // insert or delete a run of bytes
        std::size_t at = below(file.size() + 1);
        if (chance(50)) {
          auto junk = random_bytes(1 + below(16));
          file.insert(file.begin() + static_cast<std::ptrdiff_t>(at), junk.begin(), junk.end());
        } else {
          std::size_t n = std::min<std::size_t>(1 + below(16), file.size() - at);
          file.erase(file.begin() + static_cast<std::ptrdiff_t>(at),
                     file.begin() + static_cast<std::ptrdiff_t>(at + n));
        }
        return file;
      }
      case 8:  // data area grows or shrinks under an intact header
        file.resize(chance(50) ? file.size() + below(64)
                               : file.size() - below(std::min<std::size_t>(file.size(), 64)));
        return file;
      default:
        return edit_entries(std::move(file));
    }
  }

  std::vector<std::uint8_t> random_bytes(std::size_t n) {
    std::vector<std::uint8_t> bytes(n);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng_());
    return bytes;
  }

  std::vector<std::uint8_t> flip_bits(std::vector<std::uint8_t> file) {
    if (file.empty()) return file;
    for (int i = 0, n = 1 + static_cast<int>(below(8)); i < n; ++i) {
      file[below(file.size())] ^= static_cast<std::uint8_t>(1u << below(8));
    }
    return file;
  }

  std::vector<std::uint8_t> lie_about_length(std::vector<std::uint8_t> file) {
    if (file.size() < 8) return file;
    std::uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | file[static_cast<std::size_t>(i)];
    std::uint64_t lie = chance(60) ? length + below(17) - 8 : tricky_number();
    for (int i = 0; i < 8; ++i)
      file[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(lie >> (8 * i));
    return file;
  }

  // Splits a valid file into its header JSON and data; false if it is no longer valid enough.
  static bool split(const std::vector<std::uint8_t>& file, ordered_json& header,
                    std::vector<std::uint8_t>& data) {
    if (file.size() < 8) return false;
    std::uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | file[static_cast<std::size_t>(i)];
    if (length > file.size() - 8) return false;
    header = ordered_json::parse(file.begin() + 8,
                                 file.begin() + 8 + static_cast<std::ptrdiff_t>(length), nullptr,
                                 /*allow_exceptions=*/false);
    if (!header.is_object()) return false;
    data.assign(file.begin() + 8 + static_cast<std::ptrdiff_t>(length), file.end());
    return true;
  }

  ordered_json random_value() {
    switch (below(8)) {
      case 0:
        return tricky_number();
      case 1:
        return -static_cast<std::int64_t>(below(1000));
      case 2:
        return 1.5;
      case 3:
        return "BF16";
      case 4:
        return ordered_json::array({tricky_number(), tricky_number()});
      case 5:
        return ordered_json::object();
      case 6:
        return nullptr;
      default:
        return ordered_json::array({tricky_number()});
    }
  }

  // Structured edits of one entry: offsets, shapes, dtypes, extra or missing keys.
  std::vector<std::uint8_t> edit_entries(std::vector<std::uint8_t> file) {
    ordered_json header;
    std::vector<std::uint8_t> data;
    if (!split(file, header, data) || header.empty()) return flip_bits(std::move(file));
    auto it = header.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(below(header.size())));
    ordered_json& entry = it.value();
    if (!entry.is_object()) {
      entry = random_value();
    } else {
      switch (below(9)) {
        case 0:
          entry["data_offsets"] = {tricky_number(), tricky_number()};
          break;
        case 1:
          if (entry["data_offsets"].is_array() && entry["data_offsets"].size() == 2 &&
              entry["data_offsets"][1].is_number_unsigned()) {
            entry["data_offsets"][1] = entry["data_offsets"][1].get<std::uint64_t>() + below(9) - 4;
          }
          break;
        case 2:
          entry["shape"] = {tricky_number(), tricky_number(), tricky_number()};
          break;
        case 3:
          if (entry["shape"].is_array()) entry["shape"].push_back(chance(50) ? tricky_number() : 0);
          break;
        case 4: {
          static const char* dtypes[] = {"BF16",    "F16",  "F32", "F64", "F8_E4M3",
                                         "F8_E5M2", "U8",   "I8",  "I16", "I32",
                                         "I64",     "BOOL", "F4",  "",    "bf16"};
          entry["dtype"] = dtypes[below(std::size(dtypes))];
          break;
        }
        case 5:
          entry.erase(chance(50) ? "dtype" : chance(50) ? "shape" : "data_offsets");
          break;
        case 6:
          entry["unexpected"] = random_value();
          break;
        case 7:
          entry[chance(50) ? "shape" : "data_offsets"] = random_value();
          break;
        default:
          header[std::string("__metadata__")] =
              chance(50) ? random_value() : ordered_json{{"k", 1}};
      }
    }
    return raw_safetensors(header.dump(), data);
  }

  // Textual duplicates: the parser must notice even though nlohmann would keep the last one.
  std::vector<std::uint8_t> duplicate_entry(std::vector<std::uint8_t> file) {
    ordered_json header;
    std::vector<std::uint8_t> data;
    if (!split(file, header, data) || header.empty()) return file;
    auto it = header.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(below(header.size())));
    std::string text = header.dump();
    std::string copy = ordered_json(it.key()).dump() + ":" + it.value().dump();
    text.insert(text.size() - 1, "," + copy);
    return raw_safetensors(text, data);
  }

  std::vector<std::uint8_t> splice_json_tokens(std::vector<std::uint8_t> file) {
    static const char* tokens[] = {"{",    "}",       "[",    "]",         "\"",
                                   ":",    ",",       "-",    "1e999",     "0",
                                   "null", "\\u0000", "\xff", "\"dtype\"", "99999999999999999999"};
    if (file.size() <= 8) return file;
    std::size_t at = 8 + below(file.size() - 8);
    std::string token = tokens[below(std::size(tokens))];
    if (chance(50)) {
      file.insert(file.begin() + static_cast<std::ptrdiff_t>(at), token.begin(), token.end());
    } else {
      for (std::size_t i = 0; i < token.size() && at + i < file.size(); ++i)
        file[at + i] = token[i];
    }
    return file;
  }

  std::vector<std::uint8_t> garbage_header(std::vector<std::uint8_t> file) {
    auto junk = random_bytes(below(64));
    if (chance(50)) junk.insert(junk.begin(), '{');
    std::vector<std::uint8_t> data(file.size() > 64 ? file.end() - 64 : file.begin(), file.end());
    return raw_safetensors(std::string(junk.begin(), junk.end()), data);
  }

  std::mt19937_64 rng_;
};

// What every successfully parsed header must satisfy.
void check_invariants(const std::vector<std::uint8_t>& file, const SafetensorsHeader& header) {
  ASSERT_EQ(header.data_offset, 8 + header.json_bytes);
  ASSERT_LE(header.data_offset, file.size());
  ASSERT_EQ(header.data_bytes, file.size() - header.data_offset);
  std::uint64_t previous_end = 0;
  std::uint64_t checksum = 0;
  for (const SafetensorsEntry& t : header.tensors) {
    ASSERT_GE(t.offset, header.data_offset) << t.name;
    ASSERT_LE(t.nbytes, file.size() - t.offset) << t.name;
    std::uint64_t numel = 1;
    for (std::int64_t dim : t.shape) {
      ASSERT_GE(dim, 0) << t.name;
      numel *= static_cast<std::uint64_t>(dim);
    }
    ASSERT_EQ(t.nbytes, numel * dtype_size(t.dtype)) << t.name;
    if (t.nbytes > 0) {
      ASSERT_GE(t.offset, previous_end) << t.name << " overlaps its predecessor";
      previous_end = t.offset + t.nbytes;
    }
    // Touch every byte: an out-of-range view is an ASan report, not a silent pass.
    for (std::uint64_t i = 0; i < t.nbytes; ++i) checksum += file[t.offset + i];
  }
  (void)checksum;
}

TEST(SafetensorsFuzz, MutatedFilesParseSafelyOrThrowMdError) {
  const auto seeds = seed_files();
  Mutator mutator(0x5eed'5afe'7e45'0125ull);
  testing::FuzzOutcome outcome = testing::run_mutation_fuzz(
      seeds, kIterations, "fuzz.safetensors",
      [&](const auto& seed) { return mutator.mutate(seed); },
      [](const std::vector<std::uint8_t>& file) {
        check_invariants(file, parse_safetensors_header(file, "fuzz.safetensors"));
      });
  int accepted = outcome.accepted, rejected = outcome.rejected;
  // Both outcomes must be common, or the mutations are not exercising the parser.
  EXPECT_GT(accepted, kIterations / 50);
  EXPECT_GT(rejected, kIterations / 2);
  std::printf("safetensors fuzz: %d accepted, %d rejected\n", accepted, rejected);
}

TEST(SafetensorsFuzz, MutatedIndexesNeverNameUnsafeShards) {
  const std::string seed =
      R"({"metadata":{"total_size":10},"weight_map":{"a":"model-1.safetensors",)"
      R"("b":"sub/model-2.safetensors","c":"model-1.safetensors"}})";
  std::mt19937_64 rng(0x1dec5);
  static const char* tokens[] = {"..", "/", "\\u0000", "\"", "{", "}", ",", ":", ".", "a", ""};
  int accepted = 0;
  for (int i = 0; i < 5'000; ++i) {
    std::string text = seed;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) {
      std::size_t at = rng() % (text.size() + 1);
      std::string token = tokens[rng() % std::size(tokens)];
      if (rng() % 2) {
        text.insert(at, token);
      } else {
        text.erase(at, rng() % 4);
      }
    }
    try {
      SafetensorsIndex index = parse_safetensors_index(text, "fuzz.index.json");
      for (const std::string& shard : index.shards) {
        ASSERT_EQ(shard_name_problem(shard), "") << shard;
      }
      for (const auto& [name, shard] : index.weight_map) ASSERT_LT(shard, index.shards.size());
      ++accepted;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace md
