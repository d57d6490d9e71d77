#include "server/http_transport.h"

#include <sys/resource.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "server/http_connection.h"
#include "server/listen_backlog.h"

namespace md::server {
namespace {

namespace net = boost::asio;
using boost::system::error_code;
using net::ip::tcp;

// Connections are file descriptors: the soft limit (often 1024) would refuse clients long before
// memory runs out, so it is raised to the hard limit.
void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) log::debug("could not raise the descriptor limit");
}

// Out of descriptors or memory: accepting again at once would spin.
bool is_resource_shortage(const error_code& ec) {
  return ec == net::error::no_descriptors || ec == net::error::no_buffer_space ||
         ec == net::error::no_memory || ec.value() == ENFILE;
}

}  // namespace

struct HttpTransport::Impl {
  Impl(TransportOptions opts, HttpApplication& app)
      : options(std::move(opts)),
        workers(static_cast<std::size_t>(options.worker_threads)),
        hub{options, app, workers, {}, [this](uint64_t id) { forget(id); }} {}

  void accept();
  void forget(uint64_t id) {
    std::lock_guard lock(mutex);
    connections.erase(id);
  }
  std::vector<std::shared_ptr<HttpConnection>> live_connections() {
    std::lock_guard lock(mutex);
    std::vector<std::shared_ptr<HttpConnection>> out;
    for (auto& [id, weak] : connections) {
      if (auto c = weak.lock()) out.push_back(std::move(c));
    }
    return out;
  }

  TransportOptions options;
  std::mutex mutex;  // guards connections
  std::map<uint64_t, std::weak_ptr<HttpConnection>> connections;
  uint64_t next_id = 0;
  net::thread_pool workers;
  ConnectionHub hub;
  // Declared last, destroyed first: pending handlers own connections, whose destructors still
  // reach the members above.
  net::io_context io;
  tcp::acceptor acceptor{net::make_strand(io)};
  net::steady_timer accept_retry{acceptor.get_executor()};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  bool stopped = false;
};

void HttpTransport::Impl::accept() {
  acceptor.async_accept(net::make_strand(io), [this](error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) {
      if (is_resource_shortage(ec)) {
        log::warn("accept: {}; retrying in 100 ms", ec.message());
        accept_retry.expires_after(std::chrono::milliseconds(100));
        accept_retry.async_wait([this](error_code wait) {
          if (!wait) accept();
        });
        return;
      }
      return accept();  // that connection failed; the next may not
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto connection = std::make_shared<HttpConnection>(std::move(socket), hub, next_id);
    {
      std::lock_guard lock(mutex);
      connections.emplace(next_id++, connection);
    }
    connection->start();
    accept();
  });
}

HttpTransport::HttpTransport(TransportOptions options, HttpApplication& app)
    : impl_(std::make_unique<Impl>(std::move(options), app)) {}

HttpTransport::~HttpTransport() {
  stop();
}

int HttpTransport::start() {
  Impl& s = *impl_;
  raise_descriptor_limit();
  error_code ec;
  tcp::resolver resolver(s.io);
  auto endpoints = resolver.resolve(s.options.host, std::to_string(s.options.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty())
    fail("cannot listen on {}: not an address of this machine", s.options.host);
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(system_listen_backlog(), ec);
  if (ec) {
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", s.options.host,
         s.options.port);
  }
  const int port = s.acceptor.local_endpoint().port();
  s.work.emplace(s.io.get_executor());
  net::post(s.acceptor.get_executor(), [&s] { s.accept(); });
  for (int i = 0; i < s.options.io_threads; ++i) s.threads.emplace_back([&s] { s.io.run(); });
  return port;
}

int HttpTransport::busy_connections() const {
  return impl_->hub.busy.load();
}

void HttpTransport::stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  if (!s.threads.empty()) {
    std::promise<void> closed;
    net::post(s.acceptor.get_executor(), [&s, &closed] {
      error_code ignored;
      s.acceptor.close(ignored);
      s.accept_retry.cancel();
      closed.set_value();
    });
    closed.get_future().wait();
    for (auto& connection : s.live_connections()) connection->close();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!s.live_connections().empty() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  s.work.reset();
  s.io.stop();
  for (auto& thread : s.threads) thread.join();
  s.threads.clear();
  s.workers.join();
}

}  // namespace md::server
