#ifndef PX_LISTENER_H
#define PX_LISTENER_H

#include <stdbool.h>
#include <sys/socket.h>

/* A bound, listening, non-blocking socket, or -1 with errno set. With
 * reuseport each worker opens its own, so the kernel spreads connections
 * without an accept lock. */
int	px_listener_socket(const struct sockaddr *sa, socklen_t len,
	    int backlog, bool reuseport);
/* 0 if nobody else (another proxyd, another daemon) holds the address:
 * SO_REUSEPORT would otherwise let two daemons share a port silently. */
int	px_listener_probe(const struct sockaddr *sa, socklen_t len);

#endif
