/* For the unit tests that run a pump or a relay on real sockets
 * (relay_hold_test.c, relay_pass_test.c, splice_test.c): a connected pair
 * of loopback TCP sockets, blocking, as a kernel peer would see them.
 * Include after cmocka.h. */
#ifndef PX_TEST_TCP_PAIR_H
#define PX_TEST_TCP_PAIR_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* *a connected to *b through a listener on 127.0.0.1, closed at once. */
static inline void
px_test_tcp_pair(int *a, int *b)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &len), 0);
	*a = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(*a, (struct sockaddr *)&sin, sizeof(sin)), 0);
	*b = accept(l, NULL, NULL);
	assert_true(*b >= 0);
	close(l);
}

#endif
