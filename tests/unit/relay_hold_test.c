/* Unit tests for proxyd/relay/relay.c's held ends and resumes (what FTP
 * content scanning stands on), on real loopback TCP sockets and an event
 * loop: an analyser that keeps the last bytes of a stream and its end
 * until told, and one that leaves bytes unread (a scanner behind) until
 * resumed. The receiver must get neither the last bytes nor the FIN while
 * they are held, and everything, then the FIN, once released. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "relay.h"
#include "tcp_pair.h"

#define TAIL		100
#define BIG		(600 * 1024)	/* well over the relay's buffer */

struct fixture {
	struct event_base *base;
	struct px_pipe_pool pipes;
	struct px_relay	 relay;
	int		 cli, srv;	/* the peers' ends */
	int		 fd[2];		/* the relay's */
	struct evbuffer	*keep;		/* the analyser's held tail */
	size_t		 send;		/* bytes the client sends */
	bool		 hold;		/* keep the tail and the end */
	bool		 blocked;	/* leave bytes in `in` (PX_MORE) */
	bool		 released;
	bool		 saw_end;
	bool		 ended;
};

static enum px_verdict
hold_analyse(void *arg, enum px_dir dir, struct evbuffer *in)
{
	struct fixture *f = arg;
	struct evbuffer *out = px_relay_output(&f->relay, dir);
	size_t len;

	if (dir != PX_TO_SERVER)
		return PX_PASS;
	if (f->blocked && !px_relay_input_closed(&f->relay, dir))
		return PX_MORE;
	if (f->released) {
		evbuffer_add_buffer(out, f->keep);
		return PX_PASS;
	}
	if (!f->hold)
		return PX_PASS;
	evbuffer_add_buffer(f->keep, in);
	if ((len = evbuffer_get_length(f->keep)) > TAIL)
		evbuffer_remove_buffer(f->keep, out, len - TAIL);
	if (px_relay_input_closed(&f->relay, dir)) {
		f->saw_end = true;
		px_relay_hold_end(&f->relay, dir, true);
	}
	return PX_PASS;
}

static void
hold_moved(void *arg, enum px_dir dir, size_t n)
{
	(void)arg; (void)dir; (void)n;
}

static void
hold_verdict(void *arg, enum px_verdict v)
{
	(void)v;
	((struct fixture *)arg)->ended = true;
}

static void
hold_ended(void *arg, enum px_end_by by, const char *reason)
{
	(void)by; (void)reason;
	((struct fixture *)arg)->ended = true;
}

static void
hold_flushed(void *arg)
{
	((struct fixture *)arg)->ended = true;
}

static const struct px_relay_ops hold_ops = {
	.moved = hold_moved,
	.analyse = hold_analyse,
	.verdict = hold_verdict,
	.ended = hold_ended,
	.flushed = hold_flushed,
};

static uint8_t
byte_at(size_t k)
{
	return (uint8_t)(k * 7u + (k >> 10));
}

static void *
client_main(void *arg)
{
	struct fixture *f = arg;
	uint8_t buf[8192];
	size_t off = 0, i, n;
	ssize_t w;

	while (off < f->send) {
		n = f->send - off < sizeof(buf) ? f->send - off : sizeof(buf);
		for (i = 0; i < n; i++)
			buf[i] = byte_at(off + i);
		if ((w = write(f->cli, buf, n)) <= 0)
			break;
		off += (size_t)w;
	}
	(void)shutdown(f->cli, SHUT_WR);
	return NULL;
}

/* Runs the loop for ms, reading what the server end got into *got (bytes
 * checked against byte_at); *eof when it saw the FIN. */
static void
run_for(struct fixture *f, int ms, size_t *got, bool *eof, bool *bad)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = 10000 };
	uint8_t buf[65536];
	ssize_t r;
	int i;

	for (i = 0; i < ms / 10; i++) {
		event_base_loopexit(f->base, &tv);
		event_base_dispatch(f->base);
		while ((r = recv(f->srv, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
			for (ssize_t k = 0; k < r; k++)
				if (buf[k] != byte_at(*got + (size_t)k))
					*bad = true;
			*got += (size_t)r;
		}
		if (r == 0)
			*eof = true;
	}
}

static void
start(struct fixture *f, size_t send)
{
	struct px_relay_limits lim = { .buffer = 64 * 1024 };
	int i;

	memset(f, 0, sizeof(*f));
	f->send = send;
	f->base = event_base_new();
	assert_non_null(f->base);
	assert_non_null(f->keep = evbuffer_new());
	px_test_tcp_pair(&f->cli, &f->fd[0]);
	px_test_tcp_pair(&f->fd[1], &f->srv);
	for (i = 0; i < 2; i++)
		assert_int_equal(evutil_make_socket_nonblocking(f->fd[i]), 0);
	assert_int_equal(px_relay_start(&f->relay, f->base, &f->pipes, f->fd,
	    PX_RELAY_BUFFERED, true, &lim, &hold_ops, f), 0);
}

static void
stop(struct fixture *f)
{
	px_relay_free(&f->relay, NULL);
	px_relay_dispose(&f->relay);
	px_pipe_pool_flush(&f->pipes);
	close(f->fd[0]);
	close(f->fd[1]);
	close(f->cli);
	close(f->srv);
	evbuffer_free(f->keep);
	event_base_free(f->base);
}

/* The tail and the FIN wait for the release; then both go, in order. */
static void
test_hold_end(void **state)
{
	struct fixture f;
	pthread_t ct;
	size_t got = 0;
	bool eof = false, bad = false;
	int i;

	(void)state;
	start(&f, BIG);
	f.hold = true;
	assert_int_equal(pthread_create(&ct, NULL, client_main, &f), 0);
	for (i = 0; i < 100 && !f.saw_end; i++)
		run_for(&f, 50, &got, &eof, &bad);
	assert_true(f.saw_end);
	run_for(&f, 200, &got, &eof, &bad);	/* nothing more may come */
	assert_false(bad);
	assert_int_equal(got, BIG - TAIL);
	assert_false(eof);
	assert_false(f.ended);

	f.released = true;
	px_relay_resume(&f.relay, PX_TO_SERVER, true);
	for (i = 0; i < 100 && !eof; i++)
		run_for(&f, 20, &got, &eof, &bad);
	assert_false(bad);
	assert_int_equal(got, BIG);
	assert_true(eof);
	assert_int_equal(pthread_join(ct, NULL), 0);
	stop(&f);
}

/* Bytes left in `in` (PX_MORE) stop the reads once `buffer` wait; a
 * resume takes them on and reading goes on to the end. */
static void
test_resume_blocked(void **state)
{
	struct fixture f;
	pthread_t ct;
	size_t got = 0;
	bool eof = false, bad = false;
	int i;

	(void)state;
	start(&f, BIG);
	f.blocked = true;
	assert_int_equal(pthread_create(&ct, NULL, client_main, &f), 0);
	run_for(&f, 300, &got, &eof, &bad);
	assert_int_equal(got, 0);
	assert_false(eof);
	/* Bounded: the source is not read past the relay's buffer. */
	assert_true(evbuffer_get_length(f.relay.conn[0].in) <= 64 * 1024);
	assert_false(f.relay.conn[0].eof);

	f.blocked = false;
	px_relay_resume(&f.relay, PX_TO_SERVER, false);
	for (i = 0; i < 200 && !eof; i++)
		run_for(&f, 20, &got, &eof, &bad);
	assert_false(bad);
	assert_int_equal(got, BIG);
	assert_true(eof);
	assert_int_equal(pthread_join(ct, NULL), 0);
	stop(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hold_end),
		cmocka_unit_test(test_resume_blocked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
