// The weight pack's manifest parser (io/pack_manifest.h): a written manifest reads back equal;
// every field it checks is refused, naming the manifest, when wrong; and thousands of mutated
// manifests (a fixed seed) either parse into slices that lie inside their rank files or are
// refused with md::Error — never a crash, another exception or a read past the text.
#include "io/pack_manifest.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "mutation_fuzz.h"

namespace md {
namespace {

constexpr const char* kOrigin = "pack/manifest.json";

PackManifest sample() {
  PackManifest m;
  m.tp = 2;
  m.source = {"tiny.gguf", "0123abcd", 4096, "00112233445566ff"};
  for (int r = 0; r < 2; ++r) {
    PackRank rank;
    rank.file = "rank-" + std::to_string(r) + "-of-2.bin";
    rank.tensors.push_back(
        {"layer 0 q", "rows", {{r * 8, r * 8 + 8}}, "bf16", 8, 16, 32, 0, 256, "0000000000000001"});
    // Two ranges of 32 columns: two Q8_0 blocks of 34 bytes a row.
    rank.tensors.push_back({"layer 0 o",
                            "columns",
                            {{r * 32, r * 32 + 32}, {r * 32 + 64, r * 32 + 96}},
                            "Q8_0",
                            16,
                            64,
                            68,
                            256,
                            1088,
                            "abcdefabcdef0123"});
    rank.bytes = 1344;
    m.ranks.push_back(rank);
  }
  return m;
}

bool same(const PackManifest& a, const PackManifest& b) {
  return pack_manifest_json(a) == pack_manifest_json(b);
}

TEST(PackManifest, ReadsBackWhatItWrote) {
  const PackManifest m = sample();
  const PackManifest back = parse_pack_manifest(pack_manifest_json(m), kOrigin);
  EXPECT_TRUE(same(back, m));
  EXPECT_EQ(back.ranks[1].tensors[1].ranges.size(), 2u);
  EXPECT_EQ(back.ranks[1].tensors[1].ranges[1].begin, 96);
  EXPECT_EQ(back.source.revision, "0123abcd");
}

// `edit` applied to the sample's JSON text must be refused with `message` (and the origin).
void expect_refused(const std::string& what, const std::string& from, const std::string& to,
                    const std::string& message) {
  std::string text = pack_manifest_json(sample());
  const std::size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << what << ": " << from;
  text.replace(at, from.size(), to);
  try {
    parse_pack_manifest(text, kOrigin);
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    const std::string said = e.what();
    EXPECT_NE(said.find(kOrigin), std::string::npos) << what << ": " << said;
    EXPECT_NE(said.find(message), std::string::npos) << what << ": " << said;
  }
}

TEST(PackManifest, RefusesWhatIsWrong) {
  expect_refused("format", "\"megadecode-pack\"", "\"other\"", "not a megadecode pack");
  expect_refused("version", "\"version\": 1", "\"version\": 2", "pack format version 2");
  expect_refused("tp", "\"tp\": 2", "\"tp\": 3", "2 ranks listed for tp 3");
  expect_refused("tp one", "\"tp\": 2", "\"tp\": 1", "outside 2..4096");
  expect_refused("path", "\"rank-1-of-2.bin\"", "\"../secret\"", "not a plain file name");
  expect_refused("hidden", "\"rank-1-of-2.bin\"", "\".bin\"", "not a plain file name");
  expect_refused("shared file", "\"rank-1-of-2.bin\"", "\"rank-0-of-2.bin\"", "shares its file");
  expect_refused("cut", "\"columns\"", "\"diagonal\"", "not \"rows\" or \"columns\"");
  expect_refused("coverage", "\"rows\": 8", "\"rows\": 9", "covers 8 rows but holds 9");
  expect_refused("alignment", "\"offset\": 256", "\"offset\": 255", "not a multiple of 64");
  expect_refused("size", "\"bytes\": 256", "\"bytes\": 255", "not rows × row_bytes");
  expect_refused("past the file", "\"bytes\": 1344", "\"bytes\": 1343", "past its rank file");
  expect_refused("hash", "\"abcdefabcdef0123\"", "\"ABCDEFABCDEF0123\"", "16 lowercase hex");
  expect_refused("negative", "\"cols\": 16", "\"cols\": -16", "not a whole number");
  expect_refused("fraction", "\"cols\": 16", "\"cols\": 16.5", "not a whole number");
  expect_refused("string", "\"cols\": 16", "\"cols\": \"16\"", "not a whole number");
  expect_refused("missing", "\"row_bytes\": 32,", "", "has no \"row_bytes\"");
  expect_refused("unknown", "\"tp\": 2", "\"tp\": 2, \"extra\": 1", "unknown field \"extra\"");
  expect_refused("duplicate key", "\"layer 0 o\"", "\"layer 0 q\"", "twice");
  expect_refused("duplicate field", "\"tp\": 2", "\"tp\": 2, \"tp\": 2", "duplicate");
  expect_refused("not json", "{", "[", "");
  expect_refused("source fingerprint", "\"00112233445566ff\"", "\"0011\"", "fingerprint");
}

// Edits the serialiser writes as asked (it checks nothing) and the parser must refuse.
void expect_refused(const std::string& what, const std::function<void(PackManifest&)>& edit,
                    const std::string& message) {
  PackManifest m = sample();
  edit(m);
  try {
    parse_pack_manifest(pack_manifest_json(m), kOrigin);
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << what << ": " << e.what();
  }
}

TEST(PackManifest, RefusesRangesThatDoNotDescribeASlice) {
  expect_refused(
      "empty range",
      [](PackManifest& m) {
        m.ranks[0].tensors[0].ranges = {{8, 8}};
      },
      "outside 9..");
  expect_refused(
      "overlap",
      [](PackManifest& m) {
        m.ranks[1].tensors[1].ranges = {{32, 64}, {63, 95}};
      },
      "does not follow");
  expect_refused(
      "descending",
      [](PackManifest& m) {
        m.ranks[1].tensors[1].ranges = {{96, 128}, {32, 64}};
      },
      "does not follow");
  expect_refused(
      "none", [](PackManifest& m) { m.ranks[0].tensors[0].ranges.clear(); }, "ranges is empty");
  expect_refused(
      "huge", [](PackManifest& m) { m.ranks[0].tensors[0].rows = int64_t{1} << 41; },
      "outside 1..");
}

// Rows as long as real models have (a 27B model's bf16 q_proj row is 10 KiB; a rank's share of
// a vocabulary of 248 320 rows of them is 300 MB).
TEST(PackManifest, TakesRealSizes) {
  PackManifest m = sample();
  PackTensor& head = m.ranks[0].tensors[0];
  head.rows = 31040;
  head.cols = 5120;
  head.row_bytes = 10240;
  head.ranges = {{0, 31040}};
  head.bytes = static_cast<std::uint64_t>(head.rows) * head.row_bytes;
  m.ranks[0].tensors[1].offset = head.bytes;
  m.ranks[0].bytes = head.bytes + m.ranks[0].tensors[1].bytes;
  const PackManifest back = parse_pack_manifest(pack_manifest_json(m), kOrigin);
  EXPECT_EQ(back.ranks[0].tensors[0].bytes, 31040u * 10240u);
}

// Mutations that keep to JSON's shape often enough to reach the field checks: numbers swapped for
// boundary values, tokens deleted or duplicated, bytes flipped, the text cut short.
class ManifestMutator {
 public:
  explicit ManifestMutator(std::uint64_t seed) : rng_(seed) {}

  std::vector<std::uint8_t> operator()(std::vector<std::uint8_t> text) {
    for (int i = 0, n = 1 + static_cast<int>(below(3)); i < n; ++i) text = once(std::move(text));
    return text;
  }

 private:
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  std::vector<std::uint8_t> once(std::vector<std::uint8_t> text) {
    if (text.empty()) return text;
    switch (below(6)) {
      case 0:  // a number replaced
        return replace_number(std::move(text));
      case 1:
        text[below(text.size())] ^= static_cast<std::uint8_t>(1u << below(8));
        return text;
      case 2:
        text.resize(below(text.size() + 1));
        return text;
      case 3: {  // a run deleted
        const std::size_t at = below(text.size());
        const std::size_t n = std::min<std::size_t>(1 + below(24), text.size() - at);
        text.erase(text.begin() + static_cast<std::ptrdiff_t>(at),
                   text.begin() + static_cast<std::ptrdiff_t>(at + n));
        return text;
      }
      case 4: {  // a run duplicated
        const std::size_t at = below(text.size());
        const std::size_t n = std::min<std::size_t>(1 + below(40), text.size() - at);
        const std::vector<std::uint8_t> run(text.begin() + static_cast<std::ptrdiff_t>(at),
                                            text.begin() + static_cast<std::ptrdiff_t>(at + n));
        text.insert(text.begin() + static_cast<std::ptrdiff_t>(below(text.size())), run.begin(),
                    run.end());
        return text;
      }
      default:
        return replace_number(std::move(text));
    }
  }

  std::vector<std::uint8_t> replace_number(std::vector<std::uint8_t> text) {
    static const char* values[] = {"0",
                                   "1",
                                   "-1",
                                   "63",
                                   "64",
                                   "65",
                                   "4096",
                                   "1e3",
                                   "18446744073709551615",
                                   "9223372036854775807",
                                   "1099511627776",
                                   "2.5",
                                   "null",
                                   "\"\"",
                                   "[]"};
    std::vector<std::size_t> starts;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] >= '0' && text[i] <= '9' &&
          (i == 0 || !(text[i - 1] >= '0' && text[i - 1] <= '9')))
        starts.push_back(i);
    }
    if (starts.empty()) return text;
    const std::size_t at = starts[below(starts.size())];
    std::size_t end = at;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    const std::string value = values[below(std::size(values))];
    text.erase(text.begin() + static_cast<std::ptrdiff_t>(at),
               text.begin() + static_cast<std::ptrdiff_t>(end));
    text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), value.begin(), value.end());
    return text;
  }

  std::mt19937_64 rng_;
};

TEST(PackManifest, MutatedManifestsParseSoundlyOrAreRefused) {
  const std::string seed_text = pack_manifest_json(sample());
  const std::vector<std::vector<std::uint8_t>> seeds = {
      std::vector<std::uint8_t>(seed_text.begin(), seed_text.end())};
  ManifestMutator mutate(20261205);
  const testing::FuzzOutcome outcome = testing::run_mutation_fuzz(
      seeds, 20'000, kOrigin, mutate, [](const std::vector<std::uint8_t>& bytes) {
        const std::string text(bytes.begin(), bytes.end());
        const PackManifest m = parse_pack_manifest(text, kOrigin);
        ASSERT_EQ(m.ranks.size(), static_cast<std::size_t>(m.tp));
        for (const PackRank& rank : m.ranks) {
          for (const PackTensor& t : rank.tensors) {
            EXPECT_LE(t.offset + t.bytes, rank.bytes);
            EXPECT_EQ(t.bytes, static_cast<std::uint64_t>(t.rows) * t.row_bytes);
            EXPECT_EQ(t.offset % kPackAlignment, 0u);
          }
        }
      });
  // Both sides reached: the mutations are not all rejected at the first byte.
  EXPECT_GT(outcome.accepted, 100);
  EXPECT_GT(outcome.rejected, 10'000);
}

}  // namespace
}  // namespace md
