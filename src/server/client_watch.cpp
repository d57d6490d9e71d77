#include "server/client_watch.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/process_sockets.h"

namespace md::server {
namespace {

bool matches(int fd, int local_port, const std::string& remote_addr, int remote_port) {
  SocketAddress local, peer;
  return socket_address(fd, false, local) && local.port == local_port &&
         socket_address(fd, true, peer) && peer.port == remote_port && peer.host == remote_addr;
}

int find_socket(int local_port, const std::string& remote_addr, int remote_port) {
  for (int fd : open_descriptors()) {
    if (matches(fd, local_port, remote_addr, remote_port)) return fd;
  }
  return -1;
}

}  // namespace

ClientWatch::ClientWatch(int local_port, const std::string& remote_addr, int remote_port)
    : fd_(find_socket(local_port, remote_addr, remote_port)) {}

bool ClientWatch::gone() {
  if (gone_ || fd_ < 0) return gone_;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
    gone_ = true;
  } else if ((p.revents & POLLIN) != 0) {
    // Readable: either the next pipelined request (bytes) or EOF (0).
    char byte;
    ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    gone_ = n == 0;
  }
  return gone_;
}

void ClientWatch::stop_reading() {
  if (fd_ >= 0) shutdown(fd_, SHUT_RD);
}

}  // namespace md::server
