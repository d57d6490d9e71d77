#include "server/token_text.h"

#include <fmt/format.h>

#include <cmath>

#include "base/utf8.h"

namespace md::server {

std::string token_string(const Tokenizer& tokenizer, int32_t id) {
  std::string bytes = tokenizer.token_bytes(id);
  if (utf8::is_valid(bytes)) return bytes;
  std::string out = "bytes:";
  for (char c : bytes) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  return out;
}

nlohmann::ordered_json token_bytes_json(const Tokenizer& tokenizer, int32_t id) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (char c : tokenizer.token_bytes(id)) out.push_back(static_cast<unsigned char>(c));
  return out;
}

int64_t code_points(std::string_view text) {
  int64_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

double json_logprob(float logprob) {
  if (std::isnan(logprob) || logprob < -9999.0f) return -9999.0;
  return static_cast<double>(logprob);
}

}  // namespace md::server
