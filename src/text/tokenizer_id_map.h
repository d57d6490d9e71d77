// Hash map from token text or bytes to token id, searchable with a std::string_view (no copy).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace md {

struct StringViewHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

using TokenIdMap = std::unordered_map<std::string, std::int32_t, StringViewHash, std::equal_to<>>;

}  // namespace md
