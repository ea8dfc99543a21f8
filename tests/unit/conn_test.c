/* Unit tests for proxyd/net/conn.c on a real socketpair and event loop: plain
 * reads and writes with backpressure, half-close after the queue drains,
 * and the transform slot (an XOR "cipher" that once needs the socket
 * writable to go on reading, as TLS can), set at once or, mid-stream,
 * after what is queued (STARTTLS); whether the peer's bytes may wait
 * unread, told without a system call (px_conn_quiet). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "bucket.h"
#include "conn.h"

#define BIG	(4u << 20)

struct fixture {
	struct event_base *base;
	int		 sv[2];	/* sv[0]: the conn's; sv[1]: the peer's */
	struct px_conn	 c;
	unsigned	 readable, writable;
	size_t		 got;
	bool		 eof;
};

static void
on_readable(struct px_conn *c, void *arg)
{
	struct fixture *f = arg;
	ssize_t n;

	f->readable++;
	while ((n = px_conn_recv(c, 65536)) > 0)
		f->got += (size_t)n;
	if (n == 0)
		f->eof = true;
	event_base_loopbreak(f->base);
}

static void
on_writable(struct px_conn *c, void *arg)
{
	struct fixture *f = arg;

	f->writable++;
	assert_int_equal(px_conn_send(c), 0);
	event_base_loopbreak(f->base);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->base = event_base_new();
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    f->sv), 0);
	assert_int_equal(px_conn_open(&f->c, f->base, f->sv[0], on_readable,
	    on_writable, f), 0);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	px_conn_close(&f->c);
	close(f->sv[0]);
	close(f->sv[1]);
	event_base_free(f->base);
	free(f);
	return 0;
}

static void
run_once(struct fixture *f)
{
	struct timeval tv = { 2, 0 };

	event_base_loopexit(f->base, &tv);	/* bounded: never hangs */
	event_base_dispatch(f->base);
}

/* Reads everything the peer end has now. */
static size_t
peer_drain(struct fixture *f, unsigned char *buf, size_t cap)
{
	size_t got = 0;
	ssize_t n;

	while (got < cap && (n = read(f->sv[1], buf + got, cap - got)) > 0)
		got += (size_t)n;
	return got;
}

static void
test_plain_read(void **state)
{
	struct fixture *f = *state;
	unsigned char out[100];

	assert_int_equal(write(f->sv[1], "hello", 5), 5);
	/* No room is not the peer's end. */
	assert_int_equal(px_conn_recv(&f->c, 0), -1);
	assert_int_equal(errno, EAGAIN);
	assert_false(f->c.eof);
	run_once(f);
	assert_int_equal(f->readable, 0);	/* not asked to read yet */
	px_conn_read_enable(&f->c, true);
	run_once(f);
	assert_int_equal(f->readable, 1);
	assert_int_equal(f->got, 5);
	assert_int_equal(evbuffer_remove(f->c.in, out, sizeof(out)), 5);
	assert_memory_equal(out, "hello", 5);
	shutdown(f->sv[1], SHUT_WR);
	run_once(f);
	assert_true(f->eof);
	assert_true(f->c.eof);
}

static void
test_backpressure_and_half_close(void **state)
{
	struct fixture *f = *state;
	unsigned char *src = malloc(BIG), *dst = malloc(BIG);
	size_t i, got = 0;
	unsigned rounds;

	for (i = 0; i < BIG; i++)
		src[i] = (unsigned char)(i * 7 + (i >> 13));
	evbuffer_add(f->c.out, src, BIG);
	assert_int_equal(px_conn_send(&f->c), 0);
	/* The socket buffer is far smaller than 4 MB: the kernel pushed
	 * back and the conn waits for room, it does not spin. */
	assert_true(px_conn_write_blocked(&f->c));
	assert_true(evbuffer_get_length(f->c.out) > 0);
	assert_int_equal(px_conn_shutdown(&f->c), 0);
	assert_false(f->c.shut);	/* only once the queue is written */
	for (rounds = 0; rounds < 10000 && got < BIG; rounds++) {
		got += peer_drain(f, dst + got, BIG - got);
		if (evbuffer_get_length(f->c.out) != 0)
			run_once(f);
	}
	assert_int_equal(got, BIG);
	assert_memory_equal(src, dst, BIG);
	assert_true(f->writable > 0);
	assert_true(f->c.shut);
	assert_false(px_conn_write_blocked(&f->c));
	/* Our FIN follows the last byte. */
	assert_int_equal(read(f->sv[1], dst, 1), 0);
	free(src);
	free(dst);
}

/* ---- a transform in the slot ------------------------------------------ */

struct xor_state {
	unsigned	 stall_reads;	/* EAGAIN/WANT_WRITE this many times */
	unsigned	 reads, writes, shutdowns;
	bool		 freed;
};

static ssize_t
xor_read(struct px_conn *c, void *buf, size_t len, enum px_conn_want *want)
{
	struct xor_state *x = c->tf_state;
	unsigned char *p = buf;
	ssize_t n, i;

	x->reads++;
	if (x->stall_reads > 0) {
		x->stall_reads--;
		*want = PX_CONN_WANT_WRITE;
		errno = EAGAIN;
		return -1;
	}
	if ((n = read(c->fd, buf, len)) <= 0) {
		*want = PX_CONN_WANT_READ;
		return n;
	}
	for (i = 0; i < n; i++)
		p[i] ^= 0x5a;
	return n;
}

static ssize_t
xor_write(struct px_conn *c, const void *buf, size_t len,
    enum px_conn_want *want)
{
	struct xor_state *x = c->tf_state;
	unsigned char tmp[512];
	size_t i;
	ssize_t n;

	x->writes++;
	if (len > sizeof(tmp))
		len = sizeof(tmp);
	for (i = 0; i < len; i++)
		tmp[i] = ((const unsigned char *)buf)[i] ^ 0x5a;
	if ((n = write(c->fd, tmp, len)) == -1)
		*want = PX_CONN_WANT_WRITE;
	return n;
}

static int
xor_shutdown(struct px_conn *c, enum px_conn_want *want)
{
	struct xor_state *x = c->tf_state;

	(void)want;
	x->shutdowns++;
	/* A close_notify of one byte. */
	return write(c->fd, "\x04", 1) == 1 ? 0 : -1;
}

static void
xor_free(void *state)
{
	((struct xor_state *)state)->freed = true;
}

static const struct px_conn_transform xor_tf = {
	.name = "xor",
	.read = xor_read,
	.write = xor_write,
	.shutdown = xor_shutdown,
	.free = xor_free,
};

static void
test_transform(void **state)
{
	struct fixture *f = *state;
	struct xor_state x = { .stall_reads = 1 };
	unsigned char wire[64], plain[64];
	size_t i;

	px_conn_set_transform(&f->c, &xor_tf, &x);
	/* The peer sends "abc" encoded. */
	for (i = 0; i < 3; i++)
		wire[i] = (unsigned char)("abc"[i] ^ 0x5a);
	assert_int_equal(write(f->sv[1], wire, 3), 3);
	px_conn_read_enable(&f->c, true);
	run_once(f);
	/* First readable: the transform wanted the socket writable. */
	assert_int_equal(f->readable, 1);
	assert_int_equal(f->got, 0);
	assert_int_equal(f->c.read_want, PX_CONN_WANT_WRITE);
	/* The conn waits for writability, then reads again: the owner
	 * still sees "readable", never "writable". */
	run_once(f);
	assert_int_equal(f->readable, 2);
	assert_int_equal(f->writable, 0);
	assert_int_equal(f->got, 3);
	assert_int_equal(evbuffer_remove(f->c.in, plain, sizeof(plain)), 3);
	assert_memory_equal(plain, "abc", 3);
	/* Writes go through the slot; the shutdown too, after them. */
	evbuffer_add(f->c.out, "0123456789", 10);
	assert_int_equal(px_conn_shutdown(&f->c), 0);
	assert_int_equal(x.shutdowns, 0);
	assert_int_equal(px_conn_send(&f->c), 0);
	assert_int_equal(x.shutdowns, 1);
	assert_true(f->c.shut);
	assert_int_equal(peer_drain(f, wire, sizeof(wire)), 11);
	for (i = 0; i < 10; i++)
		assert_int_equal(wire[i] ^ 0x5a, "0123456789"[i]);
	assert_int_equal(wire[10], 0x04);
	px_conn_close(&f->c);
	assert_true(x.freed);
	assert_int_equal(px_conn_open(&f->c, f->base, f->sv[0], on_readable,
	    on_writable, f), 0);	/* for teardown */
}

/* A handshake that needs one byte ("H") from the peer. */
static int
xor_handshake(struct px_conn *c, enum px_conn_want *want)
{
	char b;

	if (read(c->fd, &b, 1) == 1 && b == 'H')
		return 0;
	*want = PX_CONN_WANT_READ;
	errno = EAGAIN;
	return -1;
}

static const struct px_conn_transform xor_hs_tf = {
	.name = "xor-hs",
	.read = xor_read,
	.write = xor_write,
	.handshake = xor_handshake,
	.free = xor_free,
};

static void
on_hs_readable(struct px_conn *c, void *arg)
{
	struct fixture *f = arg;

	(void)c;
	f->readable++;
	event_base_loopbreak(f->base);
}

/* px_conn_handshake waits like a read, and the handshaken state moves to
 * another conn (the relay's) without being freed. */
static void
test_handshake_and_move(void **state)
{
	struct fixture *f = *state;
	struct xor_state x = { 0 };
	struct px_conn moved = { .fd = -1 };

	f->c.on_readable = on_hs_readable;
	px_conn_set_transform(&f->c, &xor_hs_tf, &x);
	errno = 0;
	assert_int_equal(px_conn_handshake(&f->c), -1);
	assert_int_equal(errno, EAGAIN);
	assert_true(f->c.reading);
	assert_int_equal(write(f->sv[1], "H", 1), 1);
	run_once(f);
	assert_int_equal(f->readable, 1);
	assert_int_equal(px_conn_handshake(&f->c), 0);
	px_conn_move_transform(&moved, &f->c);
	assert_ptr_equal(moved.tf, &xor_hs_tf);
	assert_ptr_equal(moved.tf_state, &x);
	assert_null(f->c.tf);
	px_conn_close(&f->c);
	assert_false(x.freed);
	px_conn_close(&moved);
	assert_true(x.freed);
	assert_int_equal(px_conn_open(&f->c, f->base, f->sv[0], on_readable,
	    on_writable, f), 0);	/* for teardown */
}

/* STARTTLS: a transform set while a reply is still queued takes the slot
 * once that reply went out in plain; nothing is read in between (those
 * bytes would be the peer's handshake, not plain text). */
static void
test_deferred_transform(void **state)
{
	struct fixture *f = *state;
	struct xor_state x = { 0 };
	unsigned char wire[16], plain[16];
	size_t i;

	evbuffer_add(f->c.out, "234 go\r\n", 8);
	px_conn_set_transform(&f->c, &xor_tf, &x);
	assert_null(f->c.tf);
	assert_ptr_equal(f->c.tf_next, &xor_tf);
	for (i = 0; i < 3; i++)
		wire[i] = (unsigned char)("xyz"[i] ^ 0x5a);
	assert_int_equal(write(f->sv[1], wire, 3), 3);
	assert_int_equal(px_conn_recv(&f->c, 100), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(x.reads, 0);
	assert_int_equal(px_conn_send(&f->c), 0);
	assert_ptr_equal(f->c.tf, &xor_tf);
	assert_null(f->c.tf_next);
	assert_int_equal(x.writes, 0);		/* the reply went in plain */
	assert_int_equal(peer_drain(f, plain, sizeof(plain)), 8);
	assert_memory_equal(plain, "234 go\r\n", 8);
	assert_int_equal(px_conn_recv(&f->c, 100), 3);
	assert_int_equal(evbuffer_remove(f->c.in, plain, sizeof(plain)), 3);
	assert_memory_equal(plain, "xyz", 3);
	/* A waiting transform is freed with its conn. */
	px_conn_close(&f->c);
	assert_true(x.freed);
	x.freed = false;
	assert_int_equal(px_conn_open(&f->c, f->base, f->sv[0], on_readable,
	    on_writable, f), 0);
	evbuffer_add(f->c.out, "q", 1);
	px_conn_set_transform(&f->c, &xor_tf, &x);
	px_conn_close(&f->c);
	assert_true(x.freed);
	assert_int_equal(px_conn_open(&f->c, f->base, f->sv[0], on_readable,
	    on_writable, f), 0);	/* for teardown */
}

/* The token bucket behind session- and global-bandwidth: exact over time
 * even when one millisecond is worth less than one token. */
static void
test_bucket(void **state)
{
	struct px_bucket b;
	uint64_t t, got = 0;

	(void)state;
	px_bucket_init(&b, 1048576, 1000);
	assert_int_equal(px_bucket_avail(&b, 1000), 104857);	/* a tenth */
	px_bucket_take(&b, 104857);
	assert_int_equal(px_bucket_avail(&b, 1000), 0);
	/* Drained every millisecond for 2 s: 2 s worth, not more. */
	for (t = 1001; t <= 3000; t++) {
		got += px_bucket_avail(&b, t);
		px_bucket_take(&b, px_bucket_avail(&b, t));
	}
	assert_true(got >= 2 * 1048576 - 1 && got <= 2 * 1048576);
	/* A slow rate: 300 bytes/s gives a token every 3.3 ms. */
	px_bucket_init(&b, 300, 0);
	px_bucket_take(&b, px_bucket_avail(&b, 0));
	for (t = 1, got = 0; t <= 1000; t++) {
		got += px_bucket_avail(&b, t);
		px_bucket_take(&b, px_bucket_avail(&b, t));
	}
	assert_int_equal(got, 300);
	/* Idle: refills to the burst, never past it. */
	assert_int_equal(px_bucket_avail(&b, 100000), 30);
	assert_true(px_bucket_wait_ms(&b) >= 1 && px_bucket_wait_ms(&b) <= 100);
	px_bucket_init(&b, 0, 0);
	assert_true(px_bucket_avail(&b, 5) == UINT64_MAX);
}

/* Another socket's event, run in the pass that also reports c readable
 * (its peer wrote first): what px_conn_quiet says of c then. */
struct quiet_probe {
	struct fixture	*f;
	int		 sv[2];
	int		 quiet;		/* -1: not run */
};

static void
quiet_probe_cb(evutil_socket_t fd, short what, void *arg)
{
	struct quiet_probe *p = arg;
	char b[8];

	(void)what;
	while (read(fd, b, sizeof(b)) > 0)
		;
	p->quiet = px_conn_quiet(&p->f->c);
}

static void
test_quiet(void **state)
{
	struct fixture *f = *state;
	struct quiet_probe p = { .f = f, .quiet = -1 };
	struct event *ev;

	/* Never read: nothing is known. */
	assert_false(px_conn_quiet(&f->c));
	px_conn_read_enable(&f->c, true);
	assert_false(px_conn_quiet(&f->c));
	/* Read until it would block, still watched: quiet. */
	assert_int_equal(write(f->sv[1], "hello", 5), 5);
	run_once(f);
	assert_int_equal(f->got, 5);
	assert_true(px_conn_quiet(&f->c));
	assert_false(px_conn_unread(&f->c));
	/* A read that filled its room may have left bytes. */
	assert_int_equal(write(f->sv[1], "abcdef", 6), 6);
	assert_int_equal(px_conn_recv(&f->c, 4), 4);
	assert_false(px_conn_quiet(&f->c));
	assert_true(px_conn_unread(&f->c));
	/* Short of its room: the socket's bytes were all read, but a FIN
	 * behind them is seen by the next poll only: not quiet in this
	 * pass, and a peek tells. */
	assert_int_equal(px_conn_recv(&f->c, 100), 2);
	assert_false(px_conn_quiet(&f->c));
	assert_false(px_conn_unread(&f->c));
	/* Not watched for a while: what came meanwhile was not reported,
	 * however it is watched again. */
	px_conn_read_enable(&f->c, false);
	assert_false(px_conn_quiet(&f->c));
	px_conn_read_enable(&f->c, true);
	assert_false(px_conn_quiet(&f->c));
	assert_int_equal(px_conn_recv(&f->c, 100), -1);
	assert_int_equal(errno, EAGAIN);
	assert_true(px_conn_quiet(&f->c));
	/* Bytes reported in this pass, c's event queued behind another's:
	 * not quiet before c's own callback has run. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    p.sv), 0);
	ev = event_new(f->base, p.sv[0], EV_READ | EV_PERSIST, quiet_probe_cb,
	    &p);
	assert_non_null(ev);
	assert_int_equal(event_add(ev, NULL), 0);
	/* One poll: the probe's socket and c's both watched from now on. */
	assert_int_equal(event_base_loop(f->base, EVLOOP_NONBLOCK), 0);
	assert_int_equal(write(p.sv[1], "p", 1), 1);
	assert_int_equal(write(f->sv[1], "late", 4), 4);
	run_once(f);
	assert_int_equal(p.quiet, 0);
	assert_int_equal(f->got, 5 + 4);
	assert_true(px_conn_quiet(&f->c));
	event_free(ev);
	close(p.sv[0]);
	close(p.sv[1]);
	/* Bytes and the peer's FIN: the read is short, the FIN left: not
	 * quiet, and unread (FIONREAD would say 0). */
	assert_int_equal(write(f->sv[1], "zz", 2), 2);
	assert_int_equal(shutdown(f->sv[1], SHUT_WR), 0);
	assert_int_equal(px_conn_recv(&f->c, 100), 2);
	assert_false(px_conn_quiet(&f->c));
	assert_true(px_conn_unread(&f->c));
	assert_int_equal(px_conn_recv(&f->c, 100), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_plain_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backpressure_and_half_close,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_transform, setup, teardown),
		cmocka_unit_test_setup_teardown(test_handshake_and_move, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_deferred_transform, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_quiet, setup, teardown),
		cmocka_unit_test(test_bucket),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
