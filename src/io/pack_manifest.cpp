#include "io/pack_manifest.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "io/strict_json.h"

namespace md {

namespace {

using nlohmann::json;

// Larger than any real matrix dimension or file, small enough that sums and products of two
// never overflow 64 bits.
constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 40;
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 50;
constexpr std::size_t kMaxText = 256;

// Reads one JSON object's fields, each exactly once and none unknown, with messages that name the
// manifest and the object.
class Fields {
 public:
  Fields(const json& object, std::string where, std::string_view origin)
      : object_(object), where_(std::move(where)), origin_(origin) {
    if (!object.is_object()) fail("{}: {} is not an object", origin_, where_);
  }

  const json& at(const char* name) {
    auto it = object_.find(name);
    if (it == object_.end()) fail("{}: {} has no \"{}\"", origin_, where_, name);
    seen_.insert(name);
    return *it;
  }
  std::string text(const char* name, bool may_be_empty = false) {
    const json& v = at(name);
    if (!v.is_string()) fail("{}: {}.{} is not a string", origin_, where_, name);
    const auto& s = v.get_ref<const std::string&>();
    if ((s.empty() && !may_be_empty) || s.size() > kMaxText) {
      fail("{}: {}.{} must be 1..{} characters", origin_, where_, name, kMaxText);
    }
    return s;
  }
  std::uint64_t count(const char* name, std::uint64_t low, std::uint64_t high) {
    return number(at(name), fmt::format("{}.{}", where_, name), low, high);
  }
  const json& array(const char* name) {
    const json& v = at(name);
    if (!v.is_array()) fail("{}: {}.{} is not an array", origin_, where_, name);
    return v;
  }
  std::uint64_t number(const json& v, const std::string& what, std::uint64_t low,
                       std::uint64_t high) const {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v < 0)) {
      fail("{}: {} is not a whole number of at least 0", origin_, what);
    }
    const auto n = v.get<std::uint64_t>();
    if (n < low || n > high) fail("{}: {} is {}, outside {}..{}", origin_, what, n, low, high);
    return n;
  }
  // After the reads: any other field means a manifest of another version or a corrupt one.
  void no_others() const {
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      if (!seen_.contains(it.key())) {
        fail("{}: {} has an unknown field {}", origin_, where_, quote_for_message(it.key()));
      }
    }
  }

 private:
  const json& object_;
  std::string where_;
  std::string_view origin_;
  std::set<std::string, std::less<>> seen_;
};

bool is_hex64(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A name beside the manifest: no directories, nothing hidden, no way out of the pack.
bool is_plain_file_name(const std::string& s) {
  if (s.empty() || s.front() == '.') return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

PackTensor parse_tensor(const json& v, const std::string& where, const PackRank& rank,
                        std::string_view origin) {
  Fields f(v, where, origin);
  PackTensor t;
  t.key = f.text("key");
  t.cut = f.text("cut");
  if (t.cut != "rows" && t.cut != "columns") {
    fail("{}: {}.cut is {}, not \"rows\" or \"columns\"", origin, where, quote_for_message(t.cut));
  }
  const json& ranges = f.array("ranges");
  if (ranges.empty()) fail("{}: {}.ranges is empty", origin, where);
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const std::string what = fmt::format("{}.ranges[{}]", where, i);
    const json& r = ranges[i];
    if (!r.is_array() || r.size() != 2) fail("{}: {} is not a [begin, end] pair", origin, what);
    const std::uint64_t begin = f.number(r[0], what, 0, kMaxCount);
    const std::uint64_t end = f.number(r[1], what, begin + 1, kMaxCount);
    if (!t.ranges.empty() && begin <= static_cast<std::uint64_t>(t.ranges.back().end)) {
      fail("{}: {} does not follow the range before it", origin, what);
    }
    t.ranges.push_back({static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end)});
    covered += end - begin;
  }
  t.format = f.text("format");
  t.rows = static_cast<std::int64_t>(f.count("rows", 1, kMaxCount));
  t.cols = static_cast<std::int64_t>(f.count("cols", 1, kMaxCount));
  const std::uint64_t cut_size = t.cut == "rows" ? t.rows : t.cols;
  if (covered != cut_size) {
    fail("{}: {} covers {} {} but holds {}", origin, where, covered, t.cut, cut_size);
  }
  t.row_bytes = f.count("row_bytes", 1, kMaxBytes);
  t.offset = f.count("offset", 0, kMaxBytes);
  t.bytes = f.count("bytes", 1, kMaxBytes);
  if (t.offset % kPackAlignment != 0) {
    fail("{}: {}.offset {} is not a multiple of {}", origin, where, t.offset, kPackAlignment);
  }
  if (t.bytes % t.row_bytes != 0 || t.bytes / t.row_bytes != static_cast<std::uint64_t>(t.rows)) {
    fail("{}: {}.bytes {} is not rows × row_bytes", origin, where, t.bytes);
  }
  if (t.offset + t.bytes > rank.bytes) {
    fail("{}: {} ends at byte {}, past its rank file's {}", origin, where, t.offset + t.bytes,
         rank.bytes);
  }
  t.xxh3 = f.text("xxh3");
  if (!is_hex64(t.xxh3)) fail("{}: {}.xxh3 is not 16 lowercase hex digits", origin, where);
  f.no_others();
  return t;
}

}  // namespace

std::string hex64(std::uint64_t value) {
  return fmt::format("{:016x}", value);
}

PackManifest parse_pack_manifest(std::string_view text, std::string_view origin) {
  const json root = parse_strict_json(text, origin);
  Fields f(root, "the manifest", origin);
  const std::string format = f.text("format");
  if (format != kPackFormat) {
    fail("{}: not a megadecode pack (format {})", origin, quote_for_message(format));
  }
  PackManifest m;
  m.version = static_cast<int>(f.count("version", 0, std::numeric_limits<int>::max()));
  if (m.version != kPackVersion) {
    fail(
        "{}: pack format version {}; this megadecode reads version {} (write the pack again "
        "with megadecode pack)",
        origin, m.version, kPackVersion);
  }
  m.tp = static_cast<int>(f.count("tp", 2, 4096));
  {
    Fields s(f.at("source"), "the manifest's source", origin);
    m.source.name = s.text("name");
    m.source.revision = s.text("revision", true);
    m.source.bytes = s.count("bytes", 0, kMaxBytes);
    m.source.fingerprint = s.text("fingerprint");
    if (!is_hex64(m.source.fingerprint)) {
      fail("{}: the source's fingerprint is not 16 lowercase hex digits", origin);
    }
    s.no_others();
  }
  const json& ranks = f.array("ranks");
  if (ranks.size() != static_cast<std::size_t>(m.tp)) {
    fail("{}: {} ranks listed for tp {}", origin, ranks.size(), m.tp);
  }
  std::set<std::string, std::less<>> files;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string where = fmt::format("rank {}", r);
    Fields rf(ranks[r], where, origin);
    PackRank rank;
    rank.file = rf.text("file");
    if (!is_plain_file_name(rank.file)) {
      fail("{}: {}'s file {} is not a plain file name beside the manifest", origin, where,
           quote_for_message(rank.file));
    }
    if (!files.insert(rank.file).second) fail("{}: {} shares its file with another", origin, where);
    rank.bytes = rf.count("bytes", 0, kMaxBytes);
    const json& tensors = rf.array("tensors");
    std::set<std::string, std::less<>> keys;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      PackTensor t = parse_tensor(tensors[i], fmt::format("{} tensor {}", where, i), rank, origin);
      if (!keys.insert(t.key).second) {
        fail("{}: {} lists {} twice", origin, where, quote_for_message(t.key));
      }
      rank.tensors.push_back(std::move(t));
    }
    rf.no_others();
    m.ranks.push_back(std::move(rank));
  }
  f.no_others();
  return m;
}

std::string pack_manifest_json(const PackManifest& m) {
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const PackRank& rank : m.ranks) {
    nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
    for (const PackTensor& t : rank.tensors) {
      nlohmann::ordered_json ranges = nlohmann::ordered_json::array();
      for (const PackRange& r : t.ranges) ranges.push_back({r.begin, r.end});
      tensors.push_back({{"key", t.key},
                         {"cut", t.cut},
                         {"ranges", ranges},
                         {"format", t.format},
                         {"rows", t.rows},
                         {"cols", t.cols},
                         {"row_bytes", t.row_bytes},
                         {"offset", t.offset},
                         {"bytes", t.bytes},
                         {"xxh3", t.xxh3}});
    }
    ranks.push_back({{"file", rank.file}, {"bytes", rank.bytes}, {"tensors", tensors}});
  }
  const nlohmann::ordered_json out{{"format", kPackFormat},
                                   {"version", m.version},
                                   {"tp", m.tp},
                                   {"source",
                                    {{"name", m.source.name},
                                     {"revision", m.source.revision},
                                     {"bytes", m.source.bytes},
                                     {"fingerprint", m.source.fingerprint}}},
                                   {"ranks", ranks}};
  return out.dump(1) + "\n";
}

}  // namespace md
