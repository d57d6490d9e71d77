// Notices a client that went away while its request waits or runs (§10). cpp-httplib does not
// hand its socket to handlers, so the socket is found once by its addresses — the accepted
// connection whose local port and peer address/port match the request's, looked up among this
// process's descriptors — and then polled for EOF, hang-up or reset. While the handler runs the
// connection stays open, so the descriptor cannot be reused by another connection meanwhile.
#pragma once

#include <string>

namespace md::server {

class ClientWatch {
 public:
  ClientWatch(int local_port, const std::string& remote_addr, int remote_port);
  // True once the peer has closed or reset the connection (a half-close counts: an HTTP client
  // that shuts its sending side has gone). False when the socket could not be found.
  bool gone();
  // Closes the reading side of the connection: cpp-httplib 0.11 keeps a connection alive even
  // when the response says "Connection: close", so a refused request whose body was never read
  // would leave that body to be parsed as the next request. With reading shut, the connection
  // ends after the response is written.
  void stop_reading();

 private:
  int fd_ = -1;
  bool gone_ = false;
};

}  // namespace md::server
