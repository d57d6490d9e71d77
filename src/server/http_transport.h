// The HTTP/1.1 transport of `megadecode serve`, on Boost.Beast and Asio (docs/DECISIONS.md):
// every connection is a state machine on an event loop, so idle, slow or streaming connections
// cost memory, not threads. It reads requests with per-connection deadlines (a slowloris is
// closed, others are served), answers pipelined requests in order, writes whole or chunked
// responses, and tells the application when a client goes away. Route handlers run on a small
// worker pool; probes the application marks inline run on the event loop, so they answer under
// any load. What a request means is the application's business (server/openai_server.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "server/http_message.h"

namespace md::server {

// What the transport refuses before the application sees a whole request.
enum class TransportFault {
  kUnreadable,    // not an HTTP/1.x request head
  kHeadTooLarge,  // header fields over the limit
  kBodyTooLarge,  // over max_body_bytes while reading
  kBadFraming,    // a broken chunked body, a body shorter than its Content-Length
  kTimeout,       // the head or the body did not arrive within the read timeout
};

class HttpApplication {
 public:
  virtual ~HttpApplication() = default;
  // The request's head has arrived, its body is unread. Returns false after filling `res` to
  // answer without reading the body (the connection then closes when a body was announced).
  virtual bool admit(HttpRequest& req, HttpResponse& res) = 0;
  // Whether handle() is quick and never blocks, so it may run on the event loop.
  virtual bool answers_inline(const HttpRequest& req) const = 0;
  // The whole request: fills `res`, whole or deferred. On a worker thread unless inline.
  virtual void handle(HttpRequest& req, HttpResponse& res) = 0;
  // The error response for a request the transport refuses itself.
  virtual void refuse(HttpRequest& req, TransportFault fault, const std::string& detail,
                      HttpResponse& res) = 0;
  // After each response went out (status 499: the client left before it did).
  virtual void completed(const HttpRequest& req, const HttpResponse& res) = 0;
};

struct TransportOptions {
  std::string host = "127.0.0.1";
  int port = 0;                    // 0: any free port
  int read_timeout_seconds = 60;   // for a request's head, and again for its body
  int write_timeout_seconds = 60;  // for each write to the client
  int idle_timeout_seconds = 60;   // a kept-alive connection with no request yet
  std::size_t max_body_bytes = 16u << 20;
  std::size_t max_head_bytes = 64u << 10;
  int worker_threads = 4;  // run route handlers
  int io_threads = 2;      // run the event loop
};

class HttpTransport {
 public:
  HttpTransport(TransportOptions options, HttpApplication& app);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds and listens (md::Error when it cannot) with the system's accept backlog, and starts
  // the event loop. Returns the bound port.
  int start();
  // Connections with a request being handled or a response being written.
  int busy_connections() const;
  // Stops accepting, closes every connection (a response in progress is cut off) and joins the
  // threads. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace md::server
