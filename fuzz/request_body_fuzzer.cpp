// libFuzzer target: an HTTP request body through the server's JSON body parser and every
// request parser. Only ApiError (a client error) may come out.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/json_body.h"

namespace {

// Runs one request parser; refusing the body (ApiError) is an expected outcome.
template <typename Parse>
void parse_or_refuse(const Parse& parse) {
  try {
    (void)parse();
  } catch (const md::server::ApiError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace md::server;
  static const RequestLimits limits = [] {
    RequestLimits l;
    l.vocab_size = 512;
    l.model_names = {"m"};
    l.reasoning_effort_values = std::vector<std::string>{"low", "medium", "xhigh"};
    return l;
  }();
  nlohmann::ordered_json body;
  try {
    body = parse_json_body(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const ApiError&) {
    return 0;
  }
  parse_or_refuse([&] { return parse_chat_request(body, limits); });
  parse_or_refuse([&] { return parse_completion_request(body, limits); });
  parse_or_refuse([&] { return parse_tokenize_request(body, limits); });
  parse_or_refuse([&] { return parse_detokenize_request(body, limits); });
  return 0;
}
