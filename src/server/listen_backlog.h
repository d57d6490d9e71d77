// The listen backlog of the server's socket. Debian's cpp-httplib 0.11 is compiled with a backlog
// of 5, so a burst of connections overflowed the accept queue and the kernel dropped them (the
// clients saw resets a second later; nothing reached the log or /metrics). Linux lets a second
// listen() on a listening socket change its backlog, which is what this does after the library
// has bound the port.
#pragma once

namespace md::server {

// The system's ceiling for a listen backlog (/proc/sys/net/core/somaxconn; 4096 if unreadable).
int system_listen_backlog();

// Re-listens every listening socket of this process bound to `port` with `backlog`; returns how
// many there were.
int widen_listen_backlog(int port, int backlog);

}  // namespace md::server
