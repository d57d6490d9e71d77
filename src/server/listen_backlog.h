// The listen backlog of the server's socket: the system's ceiling, so that a burst of connections
// waits in the accept queue instead of overflowing it (the kernel drops what overflows, and the
// clients see resets a second later that reach neither the log nor /metrics).
#pragma once

namespace md::server {

// The system's ceiling for a listen backlog (/proc/sys/net/core/somaxconn; 4096 if unreadable).
int system_listen_backlog();

}  // namespace md::server
