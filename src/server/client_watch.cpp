#include "server/client_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace md::server {
namespace {

// The address and port of a sockaddr, for IPv4 and IPv6.
bool address_of(const sockaddr_storage& addr, std::string& host, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    port = ntohs(in.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  host = text;
  return true;
}

bool matches(int fd, int local_port, const std::string& remote_addr, int remote_port) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;
  std::string host, peer_host;
  int port = 0, peer_port = 0;
  return address_of(local, host, port) && port == local_port &&
         address_of(peer, peer_host, peer_port) && peer_port == remote_port &&
         peer_host == remote_addr;
}

int find_socket(int local_port, const std::string& remote_addr, int remote_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    int fd = std::atoi(entry->d_name);
    if (fd != dirfd(dir) && matches(fd, local_port, remote_addr, remote_port)) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
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
