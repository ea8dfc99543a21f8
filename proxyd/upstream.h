#ifndef PX_UPSTREAM_H
#define PX_UPSTREAM_H

#include <stdbool.h>
#include <sys/socket.h>

struct px_service;

/* Starts a non-blocking connect to dst, from `source` when it is not NULL
 * (the client's address: spoof-source), with the service's SO_MARK.
 * Returns the fd with *in_progress set when the connect is under way, or
 * -1 with errno set and *stage naming the step that failed. */
int	px_upstream_connect(const struct px_service *svc,
	    const struct sockaddr *dst, socklen_t len,
	    const struct sockaddr *source, bool *in_progress,
	    const char **stage);
/* 0 when the socket connected, else the errno of the failure. */
int	px_upstream_result(int fd);

#endif
