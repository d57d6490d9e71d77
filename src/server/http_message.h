// One HTTP exchange as the routes see it: the request the transport read (server/http_transport.h)
// and the response a route fills. A response is either whole (status, headers and body at once)
// or deferred: its body comes from a DeferredBody the transport pumps as the engine produces
// output, without a thread waiting on it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace md::server {

// Header fields in arrival order; names compare case-insensitively (RFC 7230 §3.2).
class HttpHeaders {
 public:
  void add(std::string name, std::string value);
  // Replaces every field of that name with one.
  void set(const std::string& name, std::string value);
  bool has(const std::string& name) const { return count(name) > 0; }
  std::size_t count(const std::string& name) const;
  // The i-th value of `name`, or "" when there are fewer.
  std::string value(const std::string& name, std::size_t i = 0) const;
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// What the access log and the metrics learn about a request while it is handled.
struct RequestLog {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::string route;
};

struct HttpRequest {
  std::string method;
  std::string path;     // the request target before '?', %XX decoded
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  HttpHeaders headers;
  std::string body;
  std::vector<std::pair<std::string, std::string>> query;  // decoded name=value pairs
  std::string path_parameter;  // the segment a route's "([^/]+)" matched
  std::shared_ptr<RequestLog> log = std::make_shared<RequestLog>();

  std::string header(const std::string& name) const { return headers.value(name); }
  bool has_header(const std::string& name) const { return headers.has(name); }
  // The first value of query parameter `name`, or "".
  std::string query_value(const std::string& name) const;
};

struct HttpResponse;

// A body produced over time. The transport calls every member on the connection's strand, never
// two at once; only the wake function it passes may be called from other threads.
class DeferredBody {
 public:
  virtual ~DeferredBody() = default;
  // Called once, before the first pump: `wake` asks for a pump soon (the engine pushed output).
  virtual void start(std::function<void()> wake) = 0;
  // A streamed body appends what is ready to `out`; a whole one, when finished, completes `res`
  // (status, headers, body). True when nothing more will come. Also called on a timer (about
  // once a second), so a body can send keep-alive comments.
  virtual bool pump(HttpResponse& res, std::string& out) = 0;
  // The client went away, or a write to it failed or timed out: stop the work behind the body.
  virtual void abandon() = 0;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;
  std::string body;
  // Set: the body is deferred. `streamed`: the head goes out at once and the body follows in
  // chunks as pumped; otherwise nothing goes out until the body has completed the response.
  std::shared_ptr<DeferredBody> deferred;
  bool streamed = false;

  void set_header(const std::string& name, std::string value) {
    headers.set(name, std::move(value));
  }
  std::string header(const std::string& name) const { return headers.value(name); }
  bool has_header(const std::string& name) const { return headers.has(name); }
  void set_content(std::string content, const std::string& content_type);
};

// A request target split into its path and query, %XX escapes decoded (and '+' as a space in
// the query, as forms encode it). Malformed escapes are kept as they are.
void split_target(const std::string& target, std::string& path,
                  std::vector<std::pair<std::string, std::string>>& query);

}  // namespace md::server
