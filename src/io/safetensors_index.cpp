#include "io/safetensors_index.h"

#include <algorithm>
#include <map>

#include "base/error.h"
#include "io/strict_json.h"

namespace md {

using nlohmann::json;

std::string shard_name_problem(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name.front() == '/') return "it is an absolute path";
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "it contains a control character";
  }
  // Symlinks are not followed here: Hugging Face snapshots are symlinks into blobs/ by design.
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t slash = std::min(name.find('/', start), name.size());
    std::string_view part = name.substr(start, slash - start);
    if (part.empty()) return "it has an empty path component";
    if (part == "." || part == "..") return "it has a \"" + std::string(part) + "\" component";
    start = slash + 1;
  }
  return {};
}

SafetensorsIndex parse_safetensors_index(std::string_view text, std::string_view origin) {
  json root = parse_strict_json(text, origin);
  if (!root.is_object()) fail("{}: expected a JSON object with a \"weight_map\"", origin);
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end()) fail("{}: no \"weight_map\"", origin);
  if (!weight_map->is_object()) {
    fail("{}: \"weight_map\" is a JSON {}, expected an object", origin, weight_map->type_name());
  }
  if (weight_map->empty()) fail("{}: \"weight_map\" names no tensors", origin);

  std::map<std::string, std::size_t> shard_ids;
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string()) {
      fail("{}: tensor {} maps to a JSON {}, expected a shard file name", origin,
           quote_for_message(tensor), shard.type_name());
    }
    const auto& name = shard.get_ref<const std::string&>();
    if (std::string why = shard_name_problem(name); !why.empty()) {
      fail("{}: tensor {} maps to shard {}, which is not a safe relative file name: {}", origin,
           quote_for_message(tensor), quote_for_message(name), why);
    }
    shard_ids.emplace(name, 0);
  }

  SafetensorsIndex index;
  for (auto& [name, id] : shard_ids) {
    id = index.shards.size();
    index.shards.push_back(name);
  }
  index.weight_map.reserve(weight_map->size());
  for (const auto& [tensor, shard] : weight_map->get_ref<const json::object_t&>()) {
    index.weight_map.emplace_back(tensor, shard_ids.at(shard.get_ref<const std::string&>()));
  }
  return index;
}

}  // namespace md
