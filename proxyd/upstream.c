#include "upstream.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "listener.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

/* Binds the client's address (port chosen at connect time, so the same
 * client can have many sessions to many servers). */
static int
px_upstream_spoof(int fd, const struct sockaddr *source)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;

	memset(&ss, 0, sizeof(ss));
	if (source->sa_family == AF_INET) {
		len = sizeof(struct sockaddr_in);
		memcpy(&ss, source, len);
		((struct sockaddr_in *)&ss)->sin_port = 0;
	} else {
		len = sizeof(struct sockaddr_in6);
		memcpy(&ss, source, len);
		((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	}
	if (px_socket_transparent(fd, source->sa_family) == -1)
		return -1;
	(void)setsockopt(fd, SOL_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	return bind(fd, (struct sockaddr *)&ss, len);
}

int
px_upstream_connect(const struct px_service *svc, const struct sockaddr *dst,
    socklen_t len, const struct sockaddr *source, bool *in_progress,
    const char **stage)
{
	int fd, one = 1, err;

	*in_progress = false;
	*stage = "socket";
	fd = socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    IPPROTO_TCP);
	if (fd == -1)
		return -1;
	/* Without it, small keep-alive responses wait on delayed ACKs. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*stage = "mark";
	if (svc->has_mark && setsockopt(fd, SOL_SOCKET, SO_MARK, &svc->mark,
	    sizeof(svc->mark)) == -1)
		goto fail;
	*stage = "spoof-source";
	if (source != NULL && px_upstream_spoof(fd, source) == -1)
		goto fail;
	*stage = "connect";
	if (connect(fd, dst, len) == 0)
		return fd;
	if (errno == EINPROGRESS) {
		*in_progress = true;
		return fd;
	}
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

int
px_upstream_result(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
		return errno;
	return err;
}
