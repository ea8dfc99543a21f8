/* Listening sockets (listener.h). */
#include "listener.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <unistd.h>

int
px_close_failed(int fd)
{
	int err = errno;

	close(fd);
	errno = err;
	return -1;
}

int
px_socket_transparent(int fd, int family)
{
	int one = 1;

	if (family == AF_INET6)
		return setsockopt(fd, SOL_IPV6, IPV6_TRANSPARENT, &one,
		    sizeof(one)) == -1 || setsockopt(fd, SOL_IPV6, IPV6_FREEBIND,
		    &one, sizeof(one)) == -1 ? -1 : 0;
	return setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof(one)) == -1 ||
	    setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof(one)) == -1 ? -1 : 0;
}

static int
px_listener_bind(const struct sockaddr *sa, socklen_t len, bool reuseport,
    bool transparent)
{
	int fd, one = 1;

	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    IPPROTO_TCP);
	if (fd == -1)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1)
		goto fail;
	if (reuseport &&
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == -1)
		goto fail;
	/* A v6 wildcard must not also take v4: the config checks clashes
	 * per family. */
	if (sa->sa_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) == -1)
		goto fail;
	if (transparent && px_socket_transparent(fd, sa->sa_family) == -1)
		goto fail;
	if (bind(fd, sa, len) == -1)
		goto fail;
	return fd;
fail:
	return px_close_failed(fd);
}

int
px_listener_socket(const struct sockaddr *sa, socklen_t len, int backlog,
    bool reuseport, bool transparent)
{
	int fd, one = 1;

	if ((fd = px_listener_bind(sa, len, reuseport, transparent)) == -1)
		return -1;
	if (listen(fd, backlog) == -1)
		return px_close_failed(fd);
	/* Accepted sockets inherit it (Linux copies the listener's nonagle):
	 * no setsockopt per connection. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int
px_listener_probe(const struct sockaddr *sa, socklen_t len, bool transparent)
{
	int fd = px_listener_bind(sa, len, false, transparent);

	if (fd == -1)
		return -1;
	close(fd);
	return 0;
}
