// This process's open descriptors and the addresses of its sockets, as Linux shows them in
// /proc/self/fd: cpp-httplib hands out neither its listening socket nor a request's connection,
// so the server finds them by address (server/client_watch.h, server/listen_backlog.h).
#pragma once

#include <string>
#include <vector>

namespace md::server {

// Every open descriptor of the process (the one used to list them excluded).
std::vector<int> open_descriptors();

// A socket's IPv4/IPv6 address and port: its own (`peer` false) or its peer's. False for a
// descriptor that is not such a socket (or, for the peer, not connected).
struct SocketAddress {
  std::string host;
  int port = 0;
};
bool socket_address(int fd, bool peer, SocketAddress& out);

}  // namespace md::server
