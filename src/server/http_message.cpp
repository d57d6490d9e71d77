#include "server/http_message.h"

#include <strings.h>

#include <algorithm>
#include <string_view>

namespace md::server {
namespace {

bool same_name(const std::string& a, const std::string& b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX escapes decoded; `plus_is_space` for query strings (form encoding).
std::string percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 &&
        hex_value(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2])));
      i += 2;
    } else {
      out.push_back(plus_is_space && text[i] == '+' ? ' ' : text[i]);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    std::size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    std::size_t eq = pair.find('=');
    out.emplace_back(percent_decode(pair.substr(0, eq), true),
                     eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1), true));
  }
  return out;
}

}  // namespace

void split_target(const std::string& target, std::string& path,
                  std::vector<std::pair<std::string, std::string>>& query) {
  const std::size_t question = target.find('?');
  path = percent_decode(std::string_view(target).substr(0, question), false);
  query.clear();
  if (question != std::string::npos)
    query = parse_query(std::string_view(target).substr(question + 1));
}

void HttpHeaders::add(std::string name, std::string value) {
  fields_.emplace_back(std::move(name), std::move(value));
}

void HttpHeaders::set(const std::string& name, std::string value) {
  std::erase_if(fields_, [&](const auto& field) { return same_name(field.first, name); });
  fields_.emplace_back(name, std::move(value));
}

std::size_t HttpHeaders::count(const std::string& name) const {
  return static_cast<std::size_t>(
      std::count_if(fields_.begin(), fields_.end(),
                    [&](const auto& field) { return same_name(field.first, name); }));
}

std::string HttpHeaders::value(const std::string& name, std::size_t i) const {
  for (const auto& field : fields_) {
    if (same_name(field.first, name) && i-- == 0) return field.second;
  }
  return {};
}

std::string HttpRequest::query_value(const std::string& name) const {
  for (const auto& [key, value] : query) {
    if (key == name) return value;
  }
  return {};
}

void HttpResponse::set_content(std::string content, const std::string& content_type) {
  body = std::move(content);
  set_header("Content-Type", content_type);
}

}  // namespace md::server
