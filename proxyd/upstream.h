#ifndef PX_UPSTREAM_H
#define PX_UPSTREAM_H

#include <stdbool.h>
#include <sys/socket.h>

struct px_service;

/* Starts a non-blocking connect. Returns the fd with *in_progress set when
 * the connect is still under way, or -1 with errno set. */
int	px_upstream_connect(const struct px_service *svc,
	    const struct sockaddr *dst, socklen_t len, bool *in_progress);
/* 0 when the socket connected, else the errno of the failure. */
int	px_upstream_result(int fd);

#endif
