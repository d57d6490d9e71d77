#include "server/listen_backlog.h"

#include <sys/socket.h>

#include <fstream>

#include "server/process_sockets.h"

namespace md::server {
namespace {

bool is_listening(int fd) {
  int accepting = 0;
  socklen_t length = sizeof(accepting);
  return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0 && accepting != 0;
}

}  // namespace

int system_listen_backlog() {
  std::ifstream file("/proc/sys/net/core/somaxconn");
  int value = 0;
  if (file >> value && value > 0) return value;
  return 4096;
}

int widen_listen_backlog(int port, int backlog) {
  int widened = 0;
  for (int fd : open_descriptors()) {
    SocketAddress address;
    if (!socket_address(fd, false, address) || address.port != port || !is_listening(fd)) continue;
    if (listen(fd, backlog) == 0) ++widened;
  }
  return widened;
}

}  // namespace md::server
