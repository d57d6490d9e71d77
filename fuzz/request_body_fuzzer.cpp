// libFuzzer target: an HTTP request body through the server's JSON body parser and every
// request parser. Only ApiError (a client error) may come out.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/json_body.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace md::server;
  static const RequestLimits limits = [] {
    RequestLimits l;
    l.vocab_size = 512;
    l.model_names = {"m"};
    l.reasoning_effort_values = std::vector<std::string>{"low", "medium", "xhigh"};
    return l;
  }();
  try {
    nlohmann::ordered_json body =
        parse_json_body(std::string_view(reinterpret_cast<const char*>(data), size));
    try { (void)parse_chat_request(body, limits); } catch (const ApiError&) {}
    try { (void)parse_completion_request(body, limits); } catch (const ApiError&) {}
    try { (void)parse_tokenize_request(body, limits); } catch (const ApiError&) {}
    try { (void)parse_detokenize_request(body, limits); } catch (const ApiError&) {}
  } catch (const ApiError&) {
  }
  return 0;
}
