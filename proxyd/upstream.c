#include "upstream.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "config.h"

int
px_upstream_connect(const struct px_service *svc, const struct sockaddr *dst,
    socklen_t len, bool *in_progress)
{
	int fd, one = 1, err;

	(void)svc;
	fd = socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    IPPROTO_TCP);
	if (fd == -1)
		return -1;
	/* Without it, small keep-alive responses wait on delayed ACKs. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*in_progress = false;
	if (connect(fd, dst, len) == 0)
		return fd;
	if (errno == EINPROGRESS) {
		*in_progress = true;
		return fd;
	}
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
