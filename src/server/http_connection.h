// One accepted connection of the HTTP transport (server/http_transport.h): a state machine on
// its own strand that reads a request head, lets the application admit it, reads the body, has
// it handled, writes the response (whole, or a deferred body as it is pumped), and then reads
// the next request (keep-alive, pipelining) or closes. Internal to the transport.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/http_transport.h"

namespace md::server {

// What a connection needs from its transport; outlives every connection.
struct ConnectionHub {
  const TransportOptions& options;
  HttpApplication& app;
  boost::asio::thread_pool& workers;
  std::atomic<int> busy{0};
  // Called by a connection's destructor.
  std::function<void(uint64_t id)> forget;
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(boost::asio::ip::tcp::socket socket, ConnectionHub& hub, uint64_t id);
  ~HttpConnection();

  void start();
  // From any thread: closes the connection now (a response in progress is cut off).
  void close();

 private:
  enum class Deadline { kNone, kRead, kWrite, kLinger };
  // What follows when the read watching for the client's departure ends.
  enum class AfterWatch { kNothing, kReadHead, kLinger };

  void read_head();
  void on_head(boost::system::error_code ec);
  void read_body();
  void on_body(boost::system::error_code ec);
  void refuse(TransportFault fault, const std::string& detail);
  void dispatch();
  void on_handled();
  void start_deferred();
  void pump();
  void write_stream_head();
  void write_chunk(std::string data, bool last);
  void write_response();
  void finish_exchange();
  void abandon_exchange();
  void fail_write();
  void watch_client();
  void linger_then_close();
  void discard_input();
  void close_now();
  void arm(Deadline kind, int seconds);
  // Ends the deadline; whether it had expired.
  bool disarm();
  void begin_exchange();
  template <typename Message>
  void fill_head(Message& message) const;
  void tick();
  bool keeps_alive() const;

  boost::asio::ip::tcp::socket socket_;
  ConnectionHub& hub_;
  const uint64_t id_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  boost::asio::steady_timer deadline_;
  boost::asio::steady_timer ticker_;
  uint64_t deadline_generation_ = 0;
  bool timed_out_ = false;

  HttpRequest request_;
  HttpResponse response_;
  bool client_keep_alive_ = true;
  bool close_after_ = false;  // the request's body was left unread, or the framing broke
  bool busy_ = false;         // counted in hub_.busy
  bool writing_ = false;
  bool body_finished_ = false;  // a deferred body has produced its last bytes
  bool watching_ = false;       // a read is out to notice the client leaving
  bool peer_closed_ = false;    // that read found the end of the stream
  AfterWatch after_watch_ = AfterWatch::kNothing;
  bool closed_ = false;
  std::size_t discarded_ = 0;
  std::string out_;  // the bytes of the write in flight
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> stream_head_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>>
      head_serializer_;
  std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> whole_;
};

}  // namespace md::server
