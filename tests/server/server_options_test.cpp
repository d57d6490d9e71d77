#include "server/server_options.h"

#include <gtest/gtest.h>

namespace md::server {
namespace {

TEST(ServerOptions, OnlyLoopbackAddressesCountAsLocal) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "0:0:0:0:0:0:0:1"}) {
    EXPECT_TRUE(is_loopback_host(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "128.0.0.1", "example.com",
                           "::ffff:127.0.0.1", ""}) {
    EXPECT_FALSE(is_loopback_host(host)) << host;
  }
}

}  // namespace
}  // namespace md::server
