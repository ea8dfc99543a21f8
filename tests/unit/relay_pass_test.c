/* Unit tests for proxyd/relay/relay.c's passes, on real loopback TCP sockets and
 * an event loop: an analyser of a toy framing (a 4-byte length, a type
 * byte, a body) judges each frame on its head and passes the body on
 * unseen. The server must get every frame intact and in order, replies
 * queued in the middle of a pass must land between frames, the analyser
 * must never be shown a body byte, and the bodies must be spliced (or
 * copied under a bandwidth limit) with every byte counted once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "relay.h"
#include "tcp_pair.h"

#define FRAMES		40
#define BODY(i)		(150000u + (i) * 1999u)	/* bytes; some odd sizes */
#define HEAD		5		/* length (4) + type (1) */
#define REPLIES		5

struct fixture {
	struct event_base *base;
	struct px_pipe_pool pipes;
	struct px_relay	 relay;
	int		 cli, srv;	/* the peers' ends */
	int		 fd[2];		/* the relay's: client side, server side */
	uint64_t	 moved[2];
	unsigned	 frames_seen;	/* heads the analyser judged */
	unsigned	 body_seen;	/* analyse() saw a body byte: a bug */
	unsigned	 replies_queued;
	uint64_t	 next_reply_at;
	bool		 ended;
	char		 end_reason[160];
	uint64_t	 rate;
	bool		 paced;		/* whole frames, a pause after each */
};

static uint8_t
body_byte(unsigned frame, uint32_t k)
{
	return (uint8_t)((frame * 131u + k * 7u + (k >> 9)) ^ 0x5a);
}

/* ---- the toy analyser --------------------------------------------------- */

static enum px_verdict
toy_analyse(void *arg, enum px_dir dir, struct evbuffer *in)
{
	struct fixture *f = arg;
	struct evbuffer *out = px_relay_output(&f->relay, dir);
	uint8_t head[HEAD];
	uint32_t blen;
	size_t len;

	if (dir == PX_TO_CLIENT)
		return PX_PASS;
	while ((len = evbuffer_get_length(in)) >= HEAD) {
		evbuffer_copyout(in, head, HEAD);
		blen = ((uint32_t)head[0] << 24) | ((uint32_t)head[1] << 16) |
		    ((uint32_t)head[2] << 8) | head[3];
		if (head[4] != 'D' || blen > (1u << 20)) {
			f->body_seen++;		/* not at a frame boundary */
			return PX_ERROR;
		}
		f->frames_seen++;
		if (len < HEAD + (size_t)blen) {
			evbuffer_remove_buffer(in, out, len);
			(void)px_relay_pass(&f->relay, dir, HEAD + blen - len,
			    HEAD);
			return PX_PASS;
		}
		evbuffer_remove_buffer(in, out, HEAD + blen);
	}
	return PX_MORE;		/* a partial head waits in `in` */
}

static void
toy_moved(void *arg, enum px_dir dir, size_t n)
{
	struct fixture *f = arg;
	struct evbuffer *out;
	char reply[32];
	int k;

	f->moved[dir] += n;
	/* A reply for the server in the middle of the stream (most likely
	 * inside a pass): it must wait for the frame to end. */
	if (dir != PX_TO_SERVER || f->replies_queued == REPLIES ||
	    f->moved[dir] < f->next_reply_at)
		return;
	out = px_relay_output(&f->relay, PX_TO_SERVER);
	k = snprintf(reply + HEAD, sizeof(reply) - HEAD, "reply %u",
	    f->replies_queued);
	reply[0] = reply[1] = reply[2] = 0;
	reply[3] = (char)k;
	reply[4] = 'R';
	evbuffer_add(out, reply, HEAD + (size_t)k);
	f->replies_queued++;
	f->next_reply_at += 1000003;
}

static void
toy_verdict(void *arg, enum px_verdict v)
{
	struct fixture *f = arg;

	(void)v;
	f->ended = true;
	snprintf(f->end_reason, sizeof(f->end_reason), "verdict");
	event_base_loopbreak(f->base);
}

static void
toy_ended(void *arg, enum px_end_by by, const char *reason)
{
	struct fixture *f = arg;

	(void)by;
	f->ended = true;
	snprintf(f->end_reason, sizeof(f->end_reason), "%s", reason);
	event_base_loopbreak(f->base);
}

static void
toy_flushed(void *arg)
{
	toy_ended(arg, PX_END_PROXY, "flushed");
}

static const struct px_relay_ops toy_ops = {
	.moved = toy_moved,
	.analyse = toy_analyse,
	.verdict = toy_verdict,
	.ended = toy_ended,
	.flushed = toy_flushed,
};

/* ---- the peers (threads with blocking sockets) -------------------------- */

static int
write_all(int fd, const uint8_t *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void *
client_main(void *arg)
{
	struct fixture *f = arg;
	uint8_t *buf = malloc(HEAD + BODY(FRAMES));
	unsigned i;
	uint32_t k, n;
	size_t off, len;
	ssize_t w;

	for (i = 0; buf != NULL && i < FRAMES; i++) {
		n = BODY(i);
		buf[0] = (uint8_t)(n >> 24);
		buf[1] = (uint8_t)(n >> 16);
		buf[2] = (uint8_t)(n >> 8);
		buf[3] = (uint8_t)n;
		buf[4] = 'D';
		for (k = 0; k < n; k++)
			buf[HEAD + k] = body_byte(i, k);
		if (f->paced) {
			/* Whole frames, each once the relay has most likely
			 * gone idle for want of bytes. */
			if (write_all(f->cli, buf, HEAD + n) == -1)
				break;
			usleep(3000);
			continue;
		}
		/* Uneven writes: heads split from bodies, bodies in pieces. */
		for (off = 0, len = HEAD + n; off < len; off += (size_t)w) {
			size_t chunk = len - off;

			if (chunk > 3 + (i * 4099u + off) % 70000u)
				chunk = 3 + (i * 4099u + off) % 70000u;
			if ((w = write(f->cli, buf + off, chunk)) <= 0)
				break;
		}
	}
	free(buf);
	(void)shutdown(f->cli, SHUT_WR);
	return NULL;
}

struct server_result {
	unsigned	 frames, replies, bad;
	uint64_t	 bytes;
	bool		 reply_order_ok;
};

static bool
read_full(int fd, uint8_t *p, size_t n)
{
	ssize_t r;

	while (n > 0) {
		if ((r = read(fd, p, n)) <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

static void *
server_main(void *arg)
{
	struct fixture *f = arg;
	struct server_result *res = calloc(1, sizeof(*res));
	uint8_t head[HEAD], *body = malloc(1u << 20);
	uint32_t n, k;
	char want[32];

	if (res == NULL || body == NULL)
		abort();
	res->reply_order_ok = true;
	while (read_full(f->srv, head, HEAD)) {
		n = ((uint32_t)head[0] << 24) | ((uint32_t)head[1] << 16) |
		    ((uint32_t)head[2] << 8) | head[3];
		if (n > (1u << 20) || !read_full(f->srv, body, n)) {
			res->bad++;
			break;
		}
		res->bytes += HEAD + n;
		if (head[4] == 'R') {
			snprintf(want, sizeof(want), "reply %u", res->replies);
			if (n != strlen(want) || memcmp(body, want, n) != 0)
				res->reply_order_ok = false;
			res->replies++;
			continue;
		}
		if (head[4] != 'D' || n != BODY(res->frames)) {
			res->bad++;
			break;
		}
		for (k = 0; k < n; k++)
			if (body[k] != body_byte(res->frames, k)) {
				res->bad++;
				break;
			}
		res->frames++;
	}
	free(body);
	close(f->srv);		/* the relay then ends */
	f->srv = -1;
	return res;
}

/* ---- the tests ---------------------------------------------------------- */

static void
run_relay(struct fixture *f, struct server_result *out)
{
	struct px_relay_limits lim = { .buffer = 256 * 1024,
	    .session_rate = f->rate };
	pthread_t ct, st;
	struct server_result *res;
	struct timeval limit = { .tv_sec = 60 };
	int i;

	f->base = event_base_new();
	assert_non_null(f->base);
	px_test_tcp_pair(&f->cli, &f->fd[0]);
	px_test_tcp_pair(&f->fd[1], &f->srv);
	for (i = 0; i < 2; i++)
		assert_int_equal(evutil_make_socket_nonblocking(f->fd[i]), 0);
	f->next_reply_at = 300007;
	assert_int_equal(px_relay_start(&f->relay, f->base, &f->pipes, f->fd,
	    PX_RELAY_BUFFERED, true, &lim, &toy_ops, f), 0);
	/* Paced: even the first head is read alone (as r66 asks once a
	 * transfer starts). */
	if (f->paced)
		px_relay_read_head(&f->relay, PX_TO_SERVER, HEAD);
	assert_int_equal(pthread_create(&ct, NULL, client_main, f), 0);
	assert_int_equal(pthread_create(&st, NULL, server_main, f), 0);
	/* Bounded: a stuck relay fails the test instead of hanging it. */
	event_base_loopexit(f->base, &limit);
	while (!f->ended && event_base_got_exit(f->base) == 0)
		event_base_loop(f->base, EVLOOP_ONCE);
	/* Unblock the peers whatever happened, then look. */
	px_relay_free(&f->relay, NULL);
	px_relay_dispose(&f->relay);
	px_pipe_pool_flush(&f->pipes);
	close(f->fd[0]);
	close(f->fd[1]);
	assert_int_equal(pthread_join(ct, NULL), 0);
	assert_int_equal(pthread_join(st, (void **)&res), 0);
	*out = *res;
	free(res);
	close(f->cli);
	print_message("relay ended: %s; server got %u frames, %u replies, "
	    "%u bad, %llu bytes; spliced %llu\n", f->ended ? f->end_reason :
	    "(not: timed out)", out->frames, out->replies, out->bad,
	    (unsigned long long)out->bytes,
	    (unsigned long long)f->relay.pass_spliced[PX_TO_SERVER]);
	assert_true(f->ended);
	event_base_free(f->base);
}

static uint64_t
total_bytes(void)
{
	uint64_t t = 0;
	unsigned i;

	for (i = 0; i < FRAMES; i++)
		t += HEAD + BODY(i);
	return t;
}

/* The server got every frame intact and the replies between frames, in
 * order; the analyser saw no body byte; each byte was counted once (the
 * replies, queued from outside the analyser, are not the relay's to
 * count). */
static void
assert_stream_whole(const struct fixture *f, const struct server_result *res,
    uint64_t total)
{
	assert_int_equal(f->body_seen, 0);
	assert_int_equal(res->bad, 0);
	assert_int_equal(res->frames, FRAMES);
	assert_int_equal(res->replies, REPLIES);
	assert_true(res->reply_order_ok);
	assert_int_equal(f->moved[PX_TO_SERVER], total);
	assert_int_equal(res->bytes, total + REPLIES * (HEAD + 7));
}

/* Spliced bodies: every frame intact, replies between frames, each byte
 * counted once, almost every body byte spliced. */
static void
test_pass_spliced(void **unused)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct server_result res;
	uint64_t total = total_bytes();

	(void)unused;
	assert_non_null(f);
	run_relay(f, &res);
	assert_stream_whole(f, &res, total);
	assert_int_equal(f->frames_seen, FRAMES);
	/* Only what came with a head went through user space. */
	assert_true(f->relay.pass_spliced[PX_TO_SERVER] > total * 9 / 10);
	free(f);
}

/* Whole frames with pauses between them, every head read alone: after
 * each pass the relay's read of the next head most often meets an empty
 * socket. The head cap must outlive that EAGAIN, or the next frame is read
 * along with its head: every body byte is spliced. */
static void
test_pass_paced(void **unused)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct server_result res;
	uint64_t total = total_bytes();

	(void)unused;
	assert_non_null(f);
	f->paced = true;
	run_relay(f, &res);
	assert_stream_whole(f, &res, total);
	assert_int_equal(f->frames_seen, FRAMES);
	assert_int_equal(f->relay.pass_spliced[PX_TO_SERVER],
	    total - FRAMES * HEAD);
	free(f);
}

/* A bandwidth limit keeps bytes in user space: the same stream, copied. */
static void
test_pass_copied_under_rate(void **unused)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct server_result res;
	uint64_t total = total_bytes();

	(void)unused;
	assert_non_null(f);
	f->rate = 1024ull * 1024 * 1024;	/* limits, without slowing much */
	run_relay(f, &res);
	assert_stream_whole(f, &res, total);
	assert_int_equal(f->relay.pass_spliced[PX_TO_SERVER], 0);
	free(f);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);	/* a failed run's peers write on */

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pass_spliced),
		cmocka_unit_test(test_pass_paced),
		cmocka_unit_test(test_pass_copied_under_rate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
