#include "io/safetensors_header.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "base/error.h"
#include "io/strict_json.h"

namespace md {
namespace {

using nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";
// Root object → tensor entry → shape array is three levels; anything deeper is garbage, and a low
// bound keeps hostile nesting cheap.
constexpr std::size_t kHeaderMaxDepth = 4;

// A short rendering of a JSON value for messages (whole numbers, abbreviated strings, else type).
std::string describe(const json& value) {
  if (value.is_number()) return value.dump();
  if (value.is_string()) return quote_for_message(value.get_ref<const std::string&>(), 40);
  return std::string("a JSON ") + value.type_name();
}

std::optional<std::uint64_t> as_unsigned(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0) {
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  }
  return std::nullopt;
}

std::string known_dtype_names() {
  std::string names;
  for (int i = 0; i <= static_cast<int>(DType::kBool); ++i) {
    if (!names.empty()) names += ", ";
    names += dtype_name(static_cast<DType>(i));
  }
  return names;
}

std::uint64_t read_header_length(std::span<const std::uint8_t> file, std::string_view origin) {
  if (file.size() < 8) {
    fail("{}: file is {} bytes, too short for a safetensors header (8-byte length + JSON)", origin,
         file.size());
  }
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | file[static_cast<std::size_t>(i)];
  if (length > kMaxSafetensorsHeaderBytes) {
    fail("{}: header length {} exceeds the {}-byte limit (corrupt, or not a safetensors file)",
         origin, length, kMaxSafetensorsHeaderBytes);
  }
  if (length > file.size() - 8) {
    fail("{}: header length {} runs past the end of the file ({} bytes follow the length field)",
         origin, length, file.size() - 8);
  }
  return length;
}

std::map<std::string, std::string> parse_metadata(const json& value, std::string_view origin) {
  if (!value.is_object()) {
    fail("{}: \"__metadata__\" is {}, expected an object of strings", origin, describe(value));
  }
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      fail("{}: \"__metadata__\" entry {} is {}, expected a string", origin, quote_for_message(key),
           describe(item));
    }
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// Everything below reports problems with one tensor; this prefixes the file and the tensor name.
class EntryParser {
 public:
  EntryParser(std::string_view origin, const std::string& name, std::uint64_t data_offset,
              std::uint64_t data_bytes)
      : origin_(origin), name_(name), data_offset_(data_offset), data_bytes_(data_bytes) {}

  SafetensorsEntry parse(const json& entry) const {
    if (!entry.is_object()) problem("entry is {}, expected an object", describe(entry));
    for (const auto& [key, value] : entry.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets") {
        problem("unknown key {} (a tensor entry has exactly dtype, shape and data_offsets)",
                quote_for_message(key));
      }
    }
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(key)) problem("missing \"{}\"", key);
    }
    SafetensorsEntry result;
    result.name = name_;
    result.dtype = parse_dtype(entry["dtype"]);
    result.shape = parse_shape(entry["shape"]);
    auto [begin, end] = parse_offsets(entry["data_offsets"]);
    result.nbytes = checked_byte_size(result.dtype, result.shape);
    if (result.nbytes != end - begin) {
      problem("shape [{}] of {} needs {} bytes, but data_offsets [{}, {}] span {}",
              fmt::join(result.shape, ", "), dtype_name(result.dtype), result.nbytes, begin, end,
              end - begin);
    }
    result.offset = data_offset_ + begin;
    return result;
  }

 private:
  template <typename... Args>
  [[noreturn]] void problem(fmt::format_string<Args...> format, Args&&... args) const {
    fail("{}: tensor {}: {}", origin_, quote_for_message(name_),
         fmt::format(format, std::forward<Args>(args)...));
  }

  DType parse_dtype(const json& value) const {
    if (!value.is_string()) problem("dtype is {}, expected a string", describe(value));
    const auto& name = value.get_ref<const std::string&>();
    std::optional<DType> type = dtype_from_name(name);
    if (!type)
      problem("unknown dtype {} (known: {})", quote_for_message(name), known_dtype_names());
    return *type;
  }

  std::vector<std::int64_t> parse_shape(const json& value) const {
    if (!value.is_array()) problem("shape is {}, expected an array of integers", describe(value));
    std::vector<std::int64_t> shape;
    shape.reserve(value.size());
    for (std::size_t i = 0; i < value.size(); ++i) {
      std::optional<std::uint64_t> dim = as_unsigned(value[i]);
      if (!dim) problem("shape[{}] is {}, expected a non-negative integer", i, describe(value[i]));
      if (*dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        problem("shape[{}] = {} does not fit in a signed 64-bit integer", i, *dim);
      }
      shape.push_back(static_cast<std::int64_t>(*dim));
    }
    return shape;
  }

  std::pair<std::uint64_t, std::uint64_t> parse_offsets(const json& value) const {
    if (!value.is_array() || value.size() != 2) {
      problem("data_offsets is {}, expected [begin, end]",
              value.is_array() ? fmt::format("an array of {} elements", value.size())
                               : describe(value));
    }
    std::optional<std::uint64_t> begin = as_unsigned(value[0]);
    std::optional<std::uint64_t> end = as_unsigned(value[1]);
    if (!begin || !end) {
      problem("data_offsets [{}, {}] must be non-negative integers", describe(value[0]),
              describe(value[1]));
    }
    if (*end < *begin) problem("data_offsets [{}, {}] end before they begin", *begin, *end);
    if (*end > data_bytes_) {
      problem("data_offsets [{}, {}] run past the end of the data area ({} bytes)", *begin, *end,
              data_bytes_);
    }
    return {*begin, *end};
  }

  // product(shape) * element size, or a message if that overflows 64 bits (a lying header).
  std::uint64_t checked_byte_size(DType type, const std::vector<std::int64_t>& shape) const {
    std::uint64_t size = dtype_size(type);
    bool zero = std::find(shape.begin(), shape.end(), 0) != shape.end();
    if (zero) return 0;
    for (std::int64_t dim : shape) {
      std::uint64_t next = 0;
      if (__builtin_mul_overflow(size, static_cast<std::uint64_t>(dim), &next)) {
        problem("shape [{}] of {} is too large: its byte size overflows 64 bits",
                fmt::join(shape, ", "), dtype_name(type));
      }
      size = next;
    }
    return size;
  }

  std::string_view origin_;
  const std::string& name_;
  std::uint64_t data_offset_;
  std::uint64_t data_bytes_;
};

// Sorting by offset makes any overlap show up between neighbours. Empty tensors own no bytes, so
// they may sit anywhere, even inside another tensor.
void check_no_overlap(std::vector<SafetensorsEntry>& tensors, std::string_view origin) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.name < b.name;
  });
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& entry : tensors) {
    if (entry.nbytes == 0) continue;
    if (previous != nullptr && entry.offset < previous->offset + previous->nbytes) {
      fail(
          "{}: tensors {} and {} overlap: the first occupies file bytes [{}, {}), the second "
          "starts at {}",
          origin, quote_for_message(previous->name), quote_for_message(entry.name),
          previous->offset, previous->offset + previous->nbytes, entry.offset);
    }
    previous = &entry;
  }
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::span<const std::uint8_t> file,
                                           std::string_view origin) {
  SafetensorsHeader header;
  header.json_bytes = read_header_length(file, origin);
  header.data_offset = 8 + header.json_bytes;
  header.data_bytes = file.size() - header.data_offset;

  std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, header.json_bytes);
  json root =
      parse_strict_json(text, fmt::format("{} (safetensors header)", origin), kHeaderMaxDepth);
  if (!root.is_object()) {
    fail("{}: safetensors header is {}, expected a JSON object", origin, describe(root));
  }
  header.tensors.reserve(root.size());
  for (const auto& [name, entry] : root.get_ref<const json::object_t&>()) {
    if (name == kMetadataKey) {
      // null means "no metadata", as in the reference implementation.
      if (!entry.is_null()) header.metadata = parse_metadata(entry, origin);
      continue;
    }
    header.tensors.push_back(
        EntryParser(origin, name, header.data_offset, header.data_bytes).parse(entry));
  }
  check_no_overlap(header.tensors, origin);
  return header;
}

}  // namespace md
