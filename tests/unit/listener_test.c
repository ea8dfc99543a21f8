/* Unit tests for proxyd/net/listener.c: a listener's accepted sockets come
 * with TCP_NODELAY already set (the session no longer sets it on each). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listener.h"

static int
nodelay_of(int fd)
{
	int v = -1;
	socklen_t len = sizeof(v);

	assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len), 0);
	return v;
}

static void
accepted_have_nodelay(void **state)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int l, c, a, i;

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = px_listener_socket((struct sockaddr *)&sa, sizeof(sa), 16, true,
	    false);
	assert_true(l >= 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);
	for (i = 0; i < 2; i++) {
		c = socket(AF_INET, SOCK_STREAM, 0);
		assert_true(c >= 0);
		assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
		/* (non-blocking listener: the connection is queued already) */
		a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		assert_true(a >= 0);
		assert_int_equal(nodelay_of(a), 1);
		/* the client's own socket is left alone */
		assert_int_equal(nodelay_of(c), 0);
		close(a);
		close(c);
	}
	close(l);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(accepted_have_nodelay),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
