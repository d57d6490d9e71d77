#include "server/http_connection.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <exception>
#include <utility>

#include "base/log.h"

namespace md::server {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

constexpr auto kTick = std::chrono::seconds(1);
// A refused request's unread body is read and dropped for this long (and this much) before the
// connection closes: closing with unread bytes makes the kernel reset the connection, and the
// client then loses the answer it was sent.
constexpr int kLingerSeconds = 2;
constexpr std::size_t kLingerBytes = std::size_t{64} << 20;
constexpr std::size_t kDiscardChunk = 16384;
// Bytes a client may send ahead (pipelined requests) while a response is produced.
constexpr std::size_t kReadAheadBytes = std::size_t{1} << 20;

HttpRequest request_from(const http::request_parser<http::string_body>& parser) {
  const auto& head = parser.get();
  HttpRequest req;
  req.method = std::string(head.method_string());
  split_target(std::string(head.target()), req.path, req.query);
  req.version = head.version() == 10 ? "HTTP/1.0" : "HTTP/1.1";
  for (const auto& field : head) {
    req.headers.add(std::string(field.name_string()), std::string(field.value()));
  }
  return req;
}

// Whether the request announced a body (which stays unread when it is refused at its head).
bool announces_body(const http::request_parser<http::string_body>& parser) {
  if (parser.chunked()) return true;
  const auto length = parser.content_length();
  return length && *length > 0;
}

// An error of Beast's HTTP parser (as opposed to the socket's).
bool is_parse_error(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

bool is_framing_error(const error_code& ec) {
  return ec == http::error::bad_content_length || ec == http::error::multiple_content_length ||
         ec == http::error::bad_transfer_encoding;
}

}  // namespace

HttpConnection::HttpConnection(net::ip::tcp::socket socket, ConnectionHub& hub, uint64_t id)
    : socket_(std::move(socket)),
      hub_(hub),
      id_(id),
      deadline_(socket_.get_executor()),
      ticker_(socket_.get_executor()) {}

HttpConnection::~HttpConnection() {
  if (busy_) --hub_.busy;
  if (response_.deferred && !body_finished_) response_.deferred->abandon();
  hub_.forget(id_);
}

void HttpConnection::start() {
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->read_head(); });
}

void HttpConnection::close() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->busy_) self->abandon_exchange();
    self->close_now();
  });
}

// ---- Deadlines: one timer per connection; when it fires, the socket's operations are cancelled
// and the handlers find timed_out_ set.

void HttpConnection::arm(Deadline kind, int seconds) {
  const uint64_t generation = ++deadline_generation_;
  timed_out_ = false;
  if (kind == Deadline::kNone) return;
  deadline_.expires_after(std::chrono::seconds(seconds));
  deadline_.async_wait([self = shared_from_this(), generation](error_code ec) {
    if (ec || generation != self->deadline_generation_ || self->closed_) return;
    self->timed_out_ = true;
    error_code ignored;
    self->socket_.cancel(ignored);
  });
}

bool HttpConnection::disarm() {
  ++deadline_generation_;
  deadline_.cancel();
  return timed_out_;
}

// ---- Reading a request

void HttpConnection::read_head() {
  if (closed_) return;
  request_ = HttpRequest{};
  response_ = HttpResponse{};
  close_after_ = false;
  body_finished_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(hub_.options.max_head_bytes));
  // No limit while the head is read: the application refuses an announced length over the
  // limit itself, with the request's id (read_body sets the limit for what is actually read).
  parser_->body_limit(boost::none);
  // A connection with nothing sent yet waits the idle time; a started head must complete within
  // the read timeout either way (a slowloris trickling header bytes is closed then).
  arm(Deadline::kRead,
      buffer_.size() == 0 ? hub_.options.idle_timeout_seconds : hub_.options.read_timeout_seconds);
  http::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](error_code ec, std::size_t) { self->on_head(ec); });
}

void HttpConnection::on_head(error_code ec) {
  const bool timed_out = disarm();
  if (closed_) return;
  if (ec) {
    const bool started = parser_->got_some() || buffer_.size() > 0;
    if (ec == http::error::end_of_stream || !started) return close_now();
    if (timed_out)
      return refuse(TransportFault::kTimeout, "the request head did not arrive in time");
    if (ec == http::error::header_limit) {
      return refuse(TransportFault::kHeadTooLarge, "the request's header fields are too large");
    }
    if (is_framing_error(ec)) return refuse(TransportFault::kBadFraming, ec.message());
    if (is_parse_error(ec)) return refuse(TransportFault::kUnreadable, ec.message());
    return close_now();  // the connection broke
  }
  request_ = request_from(*parser_);
  client_keep_alive_ = parser_->keep_alive();
  const bool body = announces_body(*parser_);
  if (!hub_.app.admit(request_, response_)) {
    // The body stays unread, so the connection cannot carry another request.
    close_after_ = body;
    begin_exchange();
    return write_response();
  }
  if (!body) return dispatch();
  if (parser_->get()[http::field::expect] == "100-continue") {
    // The client waits for this before it sends the body (curl does, for large bodies).
    out_ = "HTTP/1.1 100 Continue\r\n\r\n";
    arm(Deadline::kWrite, hub_.options.write_timeout_seconds);
    return net::async_write(socket_, net::buffer(out_),
                            [self = shared_from_this()](error_code failed, std::size_t) {
                              self->disarm();
                              if (failed) return self->close_now();
                              self->read_body();
                            });
  }
  read_body();
}

void HttpConnection::read_body() {
  parser_->body_limit(hub_.options.max_body_bytes);
  arm(Deadline::kRead, hub_.options.read_timeout_seconds);
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](error_code ec, std::size_t) { self->on_body(ec); });
}

void HttpConnection::on_body(error_code ec) {
  const bool timed_out = disarm();
  if (closed_) return;
  if (ec) {
    if (ec == http::error::body_limit) {
      return refuse(TransportFault::kBodyTooLarge, "the body is over the limit");
    }
    if (timed_out)
      return refuse(TransportFault::kTimeout, "the request body did not arrive in time");
    if (ec == http::error::partial_message || ec == http::error::end_of_stream) {
      // The client closed its sending side early; it may still read the answer.
      return refuse(TransportFault::kBadFraming, "the body is shorter than its Content-Length");
    }
    if (is_parse_error(ec))
      return refuse(TransportFault::kBadFraming, "malformed chunked encoding");
    return close_now();
  }
  request_.body = std::move(parser_->get().body());
  dispatch();
}

void HttpConnection::refuse(TransportFault fault, const std::string& detail) {
  close_after_ = true;
  response_ = HttpResponse{};
  hub_.app.refuse(request_, fault, detail, response_);
  begin_exchange();
  write_response();
}

// ---- Handling

// A response is owed from now on: counted busy until finish_exchange or abandon_exchange.
void HttpConnection::begin_exchange() {
  busy_ = true;
  ++hub_.busy;
}

void HttpConnection::dispatch() {
  begin_exchange();
  auto handle = [self = shared_from_this()] {
    try {
      self->hub_.app.handle(self->request_, self->response_);
    } catch (const std::exception& e) {
      // The application answers its own failures; this is the last line.
      log::error("request {} {}: {}", self->request_.method, self->request_.path, e.what());
      self->response_ = HttpResponse{};
      self->response_.status = 500;
      self->response_.set_content("{\"error\":{\"message\":\"Internal error.\"}}",
                                  "application/json");
    }
  };
  if (hub_.app.answers_inline(request_)) {
    handle();
    return on_handled();
  }
  net::post(hub_.workers, [self = shared_from_this(), handle] {
    handle();
    net::post(self->socket_.get_executor(), [self] { self->on_handled(); });
  });
}

void HttpConnection::on_handled() {
  if (closed_) return;
  if (!response_.deferred) return write_response();
  start_deferred();
}

void HttpConnection::start_deferred() {
  watch_client();
  // The wake runs on the engine's thread inside the stream's lock (RequestStream::push), so it
  // must never own the connection: had it locked the weak pointer, the connection's last
  // reference could drop there once the strand finished with it, and its destructor (the run's,
  // which takes the stream's lock to remove this listener) would deadlock the engine. It posts
  // to the strand, which locks the pointer itself.
  std::weak_ptr<HttpConnection> weak = weak_from_this();
  response_.deferred->start([weak, strand = socket_.get_executor()] {
    net::post(strand, [weak] {
      if (auto self = weak.lock()) self->pump();
    });
  });
  tick();
  if (response_.streamed) return write_stream_head();
  pump();
}

void HttpConnection::tick() {
  ticker_.expires_after(kTick);
  ticker_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->closed_ || !self->response_.deferred || self->body_finished_) return;
    self->pump();
    self->tick();
  });
}

void HttpConnection::pump() {
  if (closed_ || writing_ || body_finished_ || !response_.deferred) return;
  std::string out;
  const bool done = response_.deferred->pump(response_, out);
  if (done) {
    body_finished_ = true;
    ticker_.cancel();
  }
  if (!response_.streamed) {
    if (done) write_response();
    return;
  }
  if (!out.empty() || done) write_chunk(std::move(out), done);
}

// ---- Writing

bool HttpConnection::keeps_alive() const {
  return client_keep_alive_ && !close_after_ && response_.header("Connection") != "close";
}

// The status line (Beast's standard reason phrase) and the application's header fields;
// Connection is the transport's to say.
template <typename Message>
void HttpConnection::fill_head(Message& message) const {
  message.version(11);
  message.result(static_cast<unsigned>(response_.status));
  for (const auto& [name, value] : response_.headers.fields()) {
    if (!boost::beast::iequals(name, "Connection")) message.insert(name, value);
  }
  message.keep_alive(keeps_alive());
}

void HttpConnection::write_response() {
  whole_ = std::make_shared<http::response<http::string_body>>();
  fill_head(*whole_);
  whole_->body() = response_.body;
  whole_->prepare_payload();
  writing_ = true;
  arm(Deadline::kWrite, hub_.options.write_timeout_seconds);
  http::async_write(socket_, *whole_, [self = shared_from_this()](error_code ec, std::size_t) {
    self->writing_ = false;
    self->disarm();
    self->whole_.reset();
    if (ec) return self->fail_write();
    self->finish_exchange();
  });
}

void HttpConnection::write_stream_head() {
  stream_head_.emplace();
  fill_head(*stream_head_);
  // Said out loud on streams (§3.4): some proxies close an SSE response without it.
  if (keeps_alive()) stream_head_->set(http::field::connection, "keep-alive");
  stream_head_->chunked(true);
  head_serializer_.emplace(*stream_head_);
  writing_ = true;
  arm(Deadline::kWrite, hub_.options.write_timeout_seconds);
  http::async_write_header(socket_, *head_serializer_,
                           [self = shared_from_this()](error_code ec, std::size_t) {
                             self->writing_ = false;
                             self->disarm();
                             if (ec) return self->fail_write();
                             self->pump();
                           });
}

void HttpConnection::write_chunk(std::string data, bool last) {
  // Chunked framing (RFC 7230 §4.1) written by hand: one buffer per write.
  out_.clear();
  if (!data.empty()) out_ = fmt::format("{:x}\r\n{}\r\n", data.size(), data);
  if (last) out_ += "0\r\n\r\n";
  writing_ = true;
  arm(Deadline::kWrite, hub_.options.write_timeout_seconds);
  net::async_write(socket_, net::buffer(out_),
                   [self = shared_from_this(), last](error_code ec, std::size_t) {
                     self->writing_ = false;
                     self->disarm();
                     // A slow reader past the write timeout, or one that left.
                     if (ec) return self->fail_write();
                     if (last) return self->finish_exchange();
                     self->pump();
                   });
}

// The response is out: log it, then the next request or the close.
void HttpConnection::finish_exchange() {
  if (busy_) {
    busy_ = false;
    --hub_.busy;
    hub_.app.completed(request_, response_);
  }
  if (peer_closed_) return close_now();
  const AfterWatch next = keeps_alive() ? AfterWatch::kReadHead : AfterWatch::kLinger;
  response_.deferred.reset();
  stream_head_.reset();
  head_serializer_.reset();
  if (watching_) {
    // The watching read must end before the next read starts.
    after_watch_ = next;
    error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  if (next == AfterWatch::kReadHead) return read_head();
  linger_then_close();
}

// A write failed or timed out (a reader too slow for the write timeout, or gone).
void HttpConnection::fail_write() {
  abandon_exchange();
  close_now();
}

// The client left (or cannot be written to) before the response was complete.
void HttpConnection::abandon_exchange() {
  if (!busy_) return;
  if (response_.deferred && !body_finished_) response_.deferred->abandon();
  body_finished_ = true;
  busy_ = false;
  --hub_.busy;
  response_.status = 499;
  hub_.app.completed(request_, response_);
}

void HttpConnection::watch_client() {
  watching_ = true;
  socket_.async_read_some(
      buffer_.prepare(4096), [self = shared_from_this()](error_code ec, std::size_t n) {
        self->watching_ = false;
        if (self->closed_) return;
        if (!ec) self->buffer_.commit(n);
        const AfterWatch next = std::exchange(self->after_watch_, AfterWatch::kNothing);
        if (next == AfterWatch::kReadHead) return self->read_head();
        if (next == AfterWatch::kLinger) return self->linger_then_close();
        if (!ec) {
          // Bytes sent ahead: a pipelined request, kept for after this response.
          if (self->buffer_.size() < kReadAheadBytes) self->watch_client();
          return;
        }
        if (ec == net::error::operation_aborted) return;  // a write deadline cancelled it
        self->peer_closed_ = true;
        // The whole body is already on its way: the client read it and left.
        if (self->body_finished_) return;
        // End of stream or a reset: the client has gone (a half-close counts, as it does for
        // OpenAI-compatible servers generally: the request is abandoned).
        self->abandon_exchange();
        self->close_now();
      });
}

void HttpConnection::linger_then_close() {
  if (closed_) return;
  error_code ignored;
  socket_.shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  arm(Deadline::kLinger, kLingerSeconds);
  discard_input();
}

void HttpConnection::discard_input() {
  buffer_.clear();
  socket_.async_read_some(buffer_.prepare(kDiscardChunk),
                          [self = shared_from_this()](error_code ec, std::size_t n) {
                            self->discarded_ += n;
                            if (ec || self->discarded_ > kLingerBytes) return self->close_now();
                            self->discard_input();
                          });
}

void HttpConnection::close_now() {
  if (closed_) return;
  closed_ = true;
  disarm();
  ticker_.cancel();
  error_code ignored;
  socket_.shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

}  // namespace md::server
