#include "server/listen_backlog.h"

#include <fstream>

namespace md::server {

int system_listen_backlog() {
  std::ifstream file("/proc/sys/net/core/somaxconn");
  int value = 0;
  if (file >> value && value > 0) return value;
  return 4096;
}

}  // namespace md::server
