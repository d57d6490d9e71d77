#include "io/gguf_header.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_set>
#include <utility>

#include "base/error.h"

namespace md {
namespace {

// GGUF v2/v3 files are little-endian; reading them with memcpy needs a little-endian host.
static_assert(std::endian::native == std::endian::little);

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr std::uint64_t kMaxInt64 =
    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

// A bounds-checked little-endian cursor; every read names what it was reading when it runs out.
class Reader {
 public:
  Reader(std::span<const std::uint8_t> bytes, std::string_view path) : bytes_(bytes), path_(path) {}

  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return bytes_.size() - pos_; }
  std::string_view path() const { return path_; }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string string(std::string_view what) {
    auto length = read<std::uint64_t>(what);
    if (length > remaining()) {
      fail("{}: {} has length {} at offset {}, past the end of the file ({} bytes left)", path_,
           what, length, pos_ - 8, remaining());
    }
    std::string text(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return text;
  }

 private:
  void need(std::size_t n, std::string_view what) const {
    if (n > remaining()) {
      fail("{}: truncated GGUF file: {} needs {} bytes at offset {} but only {} are left", path_,
           what, n, pos_, remaining());
    }
  }

  std::span<const std::uint8_t> bytes_;
  std::string_view path_;
  std::size_t pos_ = 0;
};

// The fewest file bytes one element of `type` can occupy; bounds array lengths by the file size
// before anything is allocated.
std::uint64_t min_encoded_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kString:  // u64 length
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    case GgufValueType::kArray:  // u32 element type + u64 count
      return 12;
  }
  return 1;
}

GgufValueType value_type(Reader& in, std::string_view what) {
  auto id = in.read<std::uint32_t>(what);
  auto type = gguf_value_type_from_id(id);
  if (!type) fail("{}: {} has unknown value type {}", in.path(), what, id);
  return *type;
}

GgufValue read_value(Reader& in, GgufValueType type, const std::string& what, int depth);

GgufValue read_array(Reader& in, const std::string& what, int depth) {
  if (depth >= kGgufMaxArrayDepth) {
    fail("{}: {} nests arrays deeper than {} levels", in.path(), what, kGgufMaxArrayDepth);
  }
  GgufValueType element = value_type(in, what + " (array element type)");
  auto count = in.read<std::uint64_t>(what + " (array length)");
  if (count > in.remaining() / min_encoded_size(element)) {
    fail("{}: {} is an array of {} {} values, more than the {} bytes left in the file can hold",
         in.path(), what, count, gguf_value_type_name(element), in.remaining());
  }
  GgufValue::Array values;
  values.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    values.push_back(read_value(in, element, fmt::format("{}[{}]", what, i), depth + 1));
  }
  return GgufValue::array(element, std::move(values));
}

GgufValue read_value(Reader& in, GgufValueType type, const std::string& what, int depth) {
  switch (type) {
    case GgufValueType::kU8:
      return GgufValue::unsigned_integer(type, in.read<std::uint8_t>(what));
    case GgufValueType::kI8:
      return GgufValue::signed_integer(type, in.read<std::int8_t>(what));
    case GgufValueType::kU16:
      return GgufValue::unsigned_integer(type, in.read<std::uint16_t>(what));
    case GgufValueType::kI16:
      return GgufValue::signed_integer(type, in.read<std::int16_t>(what));
    case GgufValueType::kU32:
      return GgufValue::unsigned_integer(type, in.read<std::uint32_t>(what));
    case GgufValueType::kI32:
      return GgufValue::signed_integer(type, in.read<std::int32_t>(what));
    case GgufValueType::kU64:
      return GgufValue::unsigned_integer(type, in.read<std::uint64_t>(what));
    case GgufValueType::kI64:
      return GgufValue::signed_integer(type, in.read<std::int64_t>(what));
    case GgufValueType::kF32:
      return GgufValue::real(type, std::bit_cast<float>(in.read<std::uint32_t>(what)));
    case GgufValueType::kF64:
      return GgufValue::real(type, std::bit_cast<double>(in.read<std::uint64_t>(what)));
    case GgufValueType::kBool: {
      auto byte = in.read<std::uint8_t>(what);
      if (byte > 1) fail("{}: {} is a bool stored as {}, not 0 or 1", in.path(), what, byte);
      return GgufValue::boolean(byte == 1);
    }
    case GgufValueType::kString:
      return GgufValue::string(in.string(what));
    case GgufValueType::kArray:
      return read_array(in, what, depth);
  }
  fail("{}: {} has unknown value type", in.path(), what);
}

std::uint32_t read_version(Reader& in) {
  if (in.read<std::uint32_t>("the magic number") != kMagic) {
    fail("{}: not a GGUF file (the first four bytes are not \"GGUF\")", in.path());
  }
  auto version = in.read<std::uint32_t>("the version");
  if (version == 2 || version == 3) return version;
  // Big-endian files (written by gguf-py with --bigendian) store the version byte-swapped.
  if (version == 0x02000000u || version == 0x03000000u) {
    fail("{}: big-endian GGUF files are not supported", in.path());
  }
  if (version == 1) fail("{}: GGUF version 1 is not supported (only versions 2 and 3)", in.path());
  fail("{}: unsupported GGUF version {} (only versions 2 and 3)", in.path(), version);
}

// A count read from the header must be satisfiable by the rest of the file, or a lying count
// would make the parser reserve absurd amounts of memory.
std::uint64_t read_count(Reader& in, std::string_view what, std::uint64_t min_item_bytes) {
  auto count = in.read<std::uint64_t>(what);
  if (count > in.remaining() / min_item_bytes) {
    fail("{}: {} is {}, more than the {} bytes left in the file can hold", in.path(), what, count,
         in.remaining());
  }
  return count;
}

std::vector<GgufMetadataEntry> read_metadata(Reader& in, std::uint64_t count) {
  std::vector<GgufMetadataEntry> entries;
  entries.reserve(count);
  std::unordered_set<std::string> seen;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string key = in.string(fmt::format("metadata key #{}", i));
    if (key.empty()) fail("{}: metadata key #{} is empty", in.path(), i);
    if (!seen.insert(key).second) fail("{}: metadata key '{}' appears twice", in.path(), key);
    std::string what = fmt::format("metadata key '{}'", key);
    GgufValueType type = value_type(in, what);
    entries.push_back({std::move(key), read_value(in, type, what, 0)});
  }
  return entries;
}

std::uint64_t alignment_of(const std::vector<GgufMetadataEntry>& metadata, std::string_view path) {
  for (const GgufMetadataEntry& entry : metadata) {
    if (entry.key != "general.alignment") continue;
    std::optional<std::int64_t> value = entry.value.as_int64();
    if (!value) {
      fail("{}: general.alignment is {}, expected an integer", path, entry.value.describe());
    }
    if (*value <= 0 || !std::has_single_bit(static_cast<std::uint64_t>(*value))) {
      fail("{}: general.alignment is {}, expected a power of two", path, *value);
    }
    return static_cast<std::uint64_t>(*value);
  }
  return kGgufDefaultAlignment;
}

// Tensor infos as stored; `offset` is still relative to the data section and `nbytes` unset.
std::vector<GgufTensor> read_tensor_infos(Reader& in, std::uint64_t count) {
  std::vector<GgufTensor> tensors;
  tensors.reserve(count);
  std::unordered_set<std::string> seen;
  for (std::uint64_t i = 0; i < count; ++i) {
    GgufTensor t;
    t.name = in.string(fmt::format("tensor #{} name", i));
    if (!seen.insert(t.name).second) fail("{}: tensor '{}' appears twice", in.path(), t.name);
    std::string what = fmt::format("tensor '{}'", t.name);
    auto n_dims = in.read<std::uint32_t>(what + " dimension count");
    if (n_dims > kGgufMaxDims) {
      fail("{}: {} has {} dimensions, at most {} are allowed", in.path(), what, n_dims,
           kGgufMaxDims);
    }
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      auto dim = in.read<std::uint64_t>(what + " dimension");
      if (dim > kMaxInt64) fail("{}: {} has dimension {} = {}, too large", in.path(), what, d, dim);
      t.dims.push_back(static_cast<std::int64_t>(dim));
    }
    auto type_id = in.read<std::uint32_t>(what + " type");
    auto type = ggml_type_from_id(type_id);
    if (!type) fail("{}: {} has unknown ggml type {}", in.path(), what, type_id);
    t.type = *type;
    t.offset = in.read<std::uint64_t>(what + " offset");
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// Bytes of a tensor with these dims, checking that rows are whole blocks and nothing overflows.
std::uint64_t tensor_bytes(const GgufTensor& t, std::string_view path) {
  const GgmlTypeInfo& info = ggml_type_info(t.type);
  if (!t.dims.empty() && t.dims[0] % info.block_elems != 0) {
    fail("{}: tensor '{}' has rows of {} elements, not a multiple of the {} block size {}", path,
         t.name, t.dims[0], info.name, info.block_elems);
  }
  std::uint64_t numel = 1;
  for (std::int64_t dim : t.dims) {
    auto d = static_cast<std::uint64_t>(dim);
    if (d != 0 && numel > kMaxInt64 / d) {
      fail("{}: tensor '{}' dimensions [{}] overflow the element count", path, t.name,
           fmt::join(t.dims, ", "));
    }
    numel *= d;
  }
  std::uint64_t blocks = numel / info.block_elems;
  if (blocks > kMaxInt64 / info.block_bytes) {
    fail("{}: tensor '{}' dimensions [{}] overflow the byte size", path, t.name,
         fmt::join(t.dims, ", "));
  }
  return blocks * info.block_bytes;
}

// Places every tensor inside the data section: aligned, inside the file, no two overlapping.
void place_tensors(GgufHeader& header, std::span<const std::uint8_t> file, std::string_view path) {
  const std::uint64_t data_bytes = file.size() - header.data_offset;
  for (GgufTensor& t : header.tensors) {
    std::uint64_t nbytes = tensor_bytes(t, path);
    if (t.offset % header.alignment != 0) {
      fail("{}: tensor '{}' offset {} is not a multiple of the alignment {}", path, t.name,
           t.offset, header.alignment);
    }
    if (t.offset > data_bytes || nbytes > data_bytes - t.offset) {
      fail(
          "{}: tensor '{}' ({} bytes at data offset {}) runs past the end of the file ({} data "
          "bytes)",
          path, t.name, nbytes, t.offset, data_bytes);
    }
    t.offset += header.data_offset;
    t.nbytes = static_cast<std::size_t>(nbytes);
    t.data = file.data() + t.offset;
  }
  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& t : header.tensors) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor& prev = *by_offset[i - 1];
    if (by_offset[i]->offset < prev.offset + prev.nbytes) {
      fail("{}: tensors '{}' and '{}' overlap", path, prev.name, by_offset[i]->name);
    }
  }
}

}  // namespace

std::int64_t GgufTensor::numel() const {
  return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
}

std::int64_t GgufTensor::rows() const {
  std::int64_t length = row_length();
  return length == 0 ? 0 : numel() / length;
}

std::string GgufTensor::describe() const {
  return fmt::format("{} {} [{}] at {} ({} bytes)", name, ggml_type_name(type),
                     fmt::join(dims, ", "), offset, nbytes);
}

GgufHeader parse_gguf_header(std::span<const std::uint8_t> file, std::string_view path) {
  Reader in(file, path);
  GgufHeader header;
  header.version = read_version(in);
  // Smallest encodings: a tensor info is an empty name, zero dims, type and offset (24 bytes);
  // a metadata entry an empty key, its type and a one-byte value (13 bytes).
  std::uint64_t tensor_count = read_count(in, "the tensor count", 24);
  std::uint64_t kv_count = read_count(in, "the metadata entry count", 13);
  header.metadata = read_metadata(in, kv_count);
  header.alignment = alignment_of(header.metadata, path);
  header.tensors = read_tensor_infos(in, tensor_count);
  std::uint64_t end = in.position();
  std::uint64_t padded = end + (header.alignment - end % header.alignment) % header.alignment;
  if (padded < end) fail("{}: general.alignment {} is too large", path, header.alignment);
  // A file without tensor data may stop right after its infos, before the padding.
  header.data_offset = std::min<std::uint64_t>(padded, file.size());
  if (padded > file.size() && !header.tensors.empty()) {
    fail(
        "{}: truncated GGUF file: the tensor data section would start at offset {} but the file "
        "has {} bytes",
        path, padded, file.size());
  }
  place_tensors(header, file, path);
  return header;
}

}  // namespace md
