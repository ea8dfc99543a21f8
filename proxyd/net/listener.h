/* Listening sockets: SO_REUSEPORT (one per worker), IP_TRANSPARENT for
 * TPROXY and spoofed sources, and the probe for an address another daemon
 * already holds. */
#ifndef PX_LISTENER_H
#define PX_LISTENER_H

#include <stdbool.h>
#include <sys/socket.h>

/* A bound, listening, non-blocking socket, or -1 with errno set. With
 * reuseport each worker opens its own, so the kernel spreads connections
 * without an accept lock. TCP_NODELAY is set on it: the sockets it
 * accepts have it from the start. */
int	px_listener_socket(const struct sockaddr *sa, socklen_t len,
	    int backlog, bool reuseport, bool transparent);
/* 0 if nobody else (another proxyd, another daemon) holds the address:
 * SO_REUSEPORT would otherwise let two daemons share a port silently. */
int	px_listener_probe(const struct sockaddr *sa, socklen_t len,
	    bool transparent);
/* IP_TRANSPARENT (and FREEBIND) for the socket's family: a listener that
 * takes TPROXY'd connections, or an upstream socket that binds a foreign
 * (the client's) address. Needs CAP_NET_ADMIN. */
int	px_socket_transparent(int fd, int family);
/* Closes fd on a failure path, errno kept (the caller reports it); -1. */
int	px_close_failed(int fd);

#endif
