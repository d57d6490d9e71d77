#include "server/listen_backlog.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <fstream>

namespace md::server {
namespace {

int bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return -1;
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return -1;
}

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
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  int widened = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == dirfd(dir) || bound_port(fd) != port || !is_listening(fd)) continue;
    if (listen(fd, backlog) == 0) ++widened;
  }
  closedir(dir);
  return widened;
}

}  // namespace md::server
