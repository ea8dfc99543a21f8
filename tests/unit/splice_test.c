/* Unit tests for proxyd/net/splice.c's bounded pumps, on real loopback TCP
 * sockets and an event loop: a bounded pump reads no byte past its bound;
 * ops->more extends it a grant at a time (what a metered data channel
 * does with a shared quota) and the pump stops, with ops->reached, at the
 * first grant of 0; a bound of 0 reads nothing. The source always has
 * more to give than the grants allow: what the pump did not read must
 * still be in its socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "splice.h"
#include "tcp_pair.h"

#define OFFERED		20000	/* bytes the source sends */
#define GRANT		1000	/* each grant */

struct fixture {
	struct event_base	*base;
	struct px_pipe_pool	 pipes;
	struct px_splice	 sp;
	int			 src, from, to, dst;
	unsigned		 grants_left;	/* positive grants still due */
	uint64_t		 granted;	/* the first bound and grants */
	unsigned		 more_calls;
	uint64_t		 moved;
	unsigned		 reached;
	unsigned		 done, failed;
};

static void
t_moved(void *arg, struct px_splice *sp, size_t n)
{
	struct fixture *f = arg;

	(void)sp;
	f->moved += n;
}

static void
t_done(void *arg, struct px_splice *sp)
{
	struct fixture *f = arg;

	(void)sp;
	f->done++;
}

static uint64_t
t_more(void *arg, struct px_splice *sp)
{
	struct fixture *f = arg;

	(void)sp;
	f->more_calls++;
	/* Everything granted so far moved (and was reported) before the
	 * pump asks again. */
	assert_int_equal(f->moved, f->granted);
	if (f->grants_left == 0)
		return 0;
	f->grants_left--;
	f->granted += GRANT;
	return GRANT;
}

static void
t_reached(void *arg, struct px_splice *sp)
{
	struct fixture *f = arg;

	(void)sp;
	f->reached++;
}

static void
t_failed(void *arg, struct px_splice *sp, enum px_splice_fail where, int err)
{
	struct fixture *f = arg;

	(void)sp; (void)where; (void)err;
	f->failed++;
}

static const struct px_splice_ops ops_more = {
	.moved = t_moved, .done = t_done, .more = t_more,
	.reached = t_reached, .failed = t_failed,
};
static const struct px_splice_ops ops_plain = {
	.moved = t_moved, .done = t_done,
	.reached = t_reached, .failed = t_failed,
};

/* Pumps from->to with a first bound of `first`; returns the bytes the
 * destination got and *unread, what stayed in the source socket. */
static uint64_t
run(struct fixture *f, const struct px_splice_ops *ops, uint64_t first,
    int *unread)
{
	static char buf[OFFERED];
	struct timeval limit = { .tv_sec = 10 };
	uint64_t got = 0;
	ssize_t n;
	int i;

	f->base = event_base_new();
	assert_non_null(f->base);
	px_test_tcp_pair(&f->src, &f->from);
	px_test_tcp_pair(&f->to, &f->dst);
	assert_int_equal(evutil_make_socket_nonblocking(f->from), 0);
	assert_int_equal(evutil_make_socket_nonblocking(f->to), 0);
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(write(f->src, buf, sizeof(buf)), OFFERED);
	assert_int_equal(px_splice_init(&f->sp, f->base, &f->pipes, f->from,
	    f->to, 65536, ops, f), 0);
	px_splice_bound(&f->sp, first);
	f->granted = first;
	px_splice_start(&f->sp, false);
	event_base_loopexit(f->base, &limit);
	while (f->reached == 0 && f->failed == 0 && f->done == 0 &&
	    event_base_got_exit(f->base) == 0)
		event_base_loop(f->base, EVLOOP_ONCE);
	assert_int_equal(f->reached, 1);
	assert_int_equal(f->failed + f->done, 0);
	/* What reached the destination: all of it is on loopback by now;
	 * wait a little for the last segment all the same. */
	for (i = 0; i < 50; i++) {
		n = recv(f->dst, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0) {
			got += (uint64_t)n;
			i = 0;
			continue;
		}
		usleep(2000);
	}
	assert_int_equal(ioctl(f->from, FIONREAD, unread), 0);
	px_splice_release(&f->sp, &f->pipes);
	px_pipe_pool_flush(&f->pipes);
	close(f->src);
	close(f->from);
	close(f->to);
	close(f->dst);
	event_base_free(f->base);
	return got;
}

/* Grants of 1000 five times after the first: 6000 bytes, not one more. */
static void
test_more(void **state)
{
	struct fixture f;
	int unread;

	(void)state;
	memset(&f, 0, sizeof(f));
	f.grants_left = 5;
	assert_int_equal(run(&f, &ops_more, GRANT, &unread), 6 * GRANT);
	assert_int_equal(f.moved, 6 * GRANT);
	assert_int_equal(f.more_calls, 6);	/* the last one said 0 */
	assert_int_equal(unread, OFFERED - 6 * GRANT);
}

/* Without ops->more the first bound is the last. */
static void
test_plain(void **state)
{
	struct fixture f;
	int unread;

	(void)state;
	memset(&f, 0, sizeof(f));
	assert_int_equal(run(&f, &ops_plain, GRANT, &unread), GRANT);
	assert_int_equal(unread, OFFERED - GRANT);
}

/* A bound of 0 and no grant: nothing read at all. */
static void
test_zero(void **state)
{
	struct fixture f;
	int unread;

	(void)state;
	memset(&f, 0, sizeof(f));
	assert_int_equal(run(&f, &ops_more, 0, &unread), 0);
	assert_int_equal(f.more_calls, 1);
	assert_int_equal(unread, OFFERED);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_more),
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_zero),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
