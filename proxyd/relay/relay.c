/* Moving bytes between two sockets (see relay.h). */
#include "relay.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/event.h>

static const char *const px_side_name[2] = { "client", "server" };
static const enum px_end_by px_side_fail[2] = { PX_END_CLIENT_FAIL,
    PX_END_SERVER_FAIL };

/* What side `side` sends goes in this direction. */
static enum px_dir
px_side_dir(int side)
{
	return side == 0 ? PX_TO_SERVER : PX_TO_CLIENT;
}

/* Side 0 (client) or 1 (server) gave EOF. */
static void
px_relay_saw_eof(struct px_relay *r, int side)
{
	if (!r->eof_seen) {
		r->eof_seen = true;
		r->eof_by = side == 0 ? PX_END_CLIENT : PX_END_SERVER;
	}
}

static void
px_relay_end(struct px_relay *r, enum px_end_by by, const char *reason)
{
	r->running = false;
	r->ops->ended(r->arg, by, reason);
}

/* A normal end: the side that closed first is who ended it. */
static void
px_relay_peer_closed(struct px_relay *r)
{
	px_relay_end(r, r->eof_by, r->eof_by == PX_END_CLIENT ?
	    "client-closed" : "server-closed");
}

/* Side `side`'s socket failed with err. */
static void
px_relay_failed(struct px_relay *r, int side, int err)
{
	char reason[160];

	snprintf(reason, sizeof(reason), "%s-error: %s", px_side_name[side],
	    r->conn_open[side] ? px_conn_strerror(&r->conn[side], err) :
	    strerror(err));
	px_relay_end(r, px_side_fail[side], reason);
}

/* ---- splice ----------------------------------------------------------- */

static enum px_dir
px_splice_dir(const struct px_relay *r, const struct px_splice *sp)
{
	return sp == &r->sp[PX_TO_SERVER] ? PX_TO_SERVER : PX_TO_CLIENT;
}

static void
px_relay_splice_moved(void *arg, struct px_splice *sp, size_t n)
{
	struct px_relay *r = arg;

	r->ops->moved(r->arg, px_splice_dir(r, sp), n);
}

static void
px_relay_splice_done(void *arg, struct px_splice *sp)
{
	struct px_relay *r = arg;
	enum px_dir d = px_splice_dir(r, sp);

	px_relay_saw_eof(r, d == PX_TO_SERVER ? 0 : 1);
	if (!r->half_close) {
		px_relay_peer_closed(r);
		return;
	}
	/* Both directions ended: the owner closes both sockets now, and a
	 * close sends the FIN (one shutdown less per connection). */
	if (!px_splice_active(&r->sp[!d])) {
		px_relay_peer_closed(r);
		return;
	}
	/* Pass the FIN on; the other direction keeps flowing. */
	(void)shutdown(sp->to, SHUT_WR);
}

static void
px_relay_splice_failed(void *arg, struct px_splice *sp,
    enum px_splice_fail where, int err)
{
	struct px_relay *r = arg;
	enum px_dir d = px_splice_dir(r, sp);
	/* Reading from the source side, or writing to the other one. */
	int src = d == PX_TO_SERVER ? 0 : 1;

	px_relay_failed(r, where == PX_SPLICE_READ ? src : !src, err);
}

static const struct px_splice_ops px_relay_splice_ops = {
	.moved = px_relay_splice_moved,
	.done = px_relay_splice_done,
	.failed = px_relay_splice_failed,
};

static int
px_relay_splice_start(struct px_relay *r)
{
	int d, size = (int)r->lim.buffer;

	for (d = 0; d < 2; d++) {
		int from = d == PX_TO_SERVER ? r->fd[0] : r->fd[1];
		int to = d == PX_TO_SERVER ? r->fd[1] : r->fd[0];

		if (px_splice_init(&r->sp[d], r->base, r->pipes, from, to,
		    size, &px_relay_splice_ops, r) == -1) {
			if (d == 1)
				px_splice_release(&r->sp[0], r->pipes);
			return -1;
		}
	}
	r->running = true;
	/* The client's first bytes are usually waiting already: move them
	 * now. The server has only just accepted, so reading it now would
	 * almost always cost an EAGAIN; its read event reports a greeting. */
	px_splice_start(&r->sp[PX_TO_SERVER], true);
	if (r->running)
		px_splice_start(&r->sp[PX_TO_CLIENT], false);
	return 0;
}

/* ---- buffered --------------------------------------------------------- */

static int
px_conn_side(const struct px_relay *r, const struct px_conn *c)
{
	return c == &r->conn[0] ? 0 : 1;
}

static void
px_relay_count(struct px_relay *r, enum px_dir dir, size_t len)
{
	r->ops->moved(r->arg, dir, len);
}

/* Reading side `side` is wanted unless it ended, its peer's output is
 * full, its bandwidth is used up, or the relay is finishing. */
static void
px_buf_update_read(struct px_relay *r, int side)
{
	px_conn_read_enable(&r->conn[side], r->running && !r->finishing &&
	    !r->conn[side].eof && !r->paused[side] && !r->rate_paused[side] &&
	    !r->read_held[side] &&
	    r->pass_state[px_side_dir(side)] == PX_PASS_COPY);
}

static void px_pass_begin(struct px_relay *, int);

/* A pass is splicing into side x: its bytes must stay whole, so nothing
 * else is written there until it is done. */
static bool
px_pass_into(const struct px_relay *r, int x)
{
	return r->pass_state[x == 1 ? PX_TO_SERVER : PX_TO_CLIENT] ==
	    PX_PASS_SPLICE;
}

/* Side `side` gave EOF and everything it sent is delivered to the peer. */
static void
px_buf_half_done(struct px_relay *r, int side)
{
	int peer = !side;

	if (!r->half_close) {
		px_relay_peer_closed(r);
		return;
	}
	if (!r->shut[peer]) {
		r->shut[peer] = true;
		if (px_conn_shutdown(&r->conn[peer]) == -1) {
			px_relay_failed(r, peer, errno);
			return;
		}
	}
	if (r->shut[0] && r->shut[1])
		px_relay_peer_closed(r);
}

/* Writes what side x has queued; false once the relay ended. */
static bool
px_buf_flush(struct px_relay *r, int x)
{
	enum px_dir into = x == 1 ? PX_TO_SERVER : PX_TO_CLIENT;

	if (px_pass_into(r, x))
		return true;
	if (px_conn_send(&r->conn[x]) == -1) {
		px_relay_failed(r, x, errno);
		return false;
	}
	/* A pass waiting for this output to be written starts now, whoever
	 * wrote it (the conn polls for room only while bytes are left). */
	if (r->pass_state[into] == PX_PASS_WAIT &&
	    evbuffer_get_length(r->conn[x].out) == 0) {
		px_pass_begin(r, !x);
		return r->running;
	}
	return true;
}

/* A finishing relay is flushed once both outputs are written. */
static bool
px_buf_finish_check(struct px_relay *r)
{
	int side;

	/* A pass under way ends the frame it is in first. */
	if (r->pass_state[0] != PX_PASS_COPY ||
	    r->pass_state[1] != PX_PASS_COPY)
		return false;
	for (side = 0; side < 2; side++)
		if (r->conn_open[side] && !r->shut[side] &&
		    evbuffer_get_length(r->conn[side].out) != 0)
			return false;
	r->running = false;
	r->ops->flushed(r->arg);
	return true;
}

/* Bytes queued for direction dir's peer, held ones included. */
static size_t
px_relay_queued(const struct px_relay *r, enum px_dir dir)
{
	int peer = dir == PX_TO_SERVER ? 1 : 0;

	return evbuffer_get_length(r->conn[peer].out) + (r->held[dir] != NULL ?
	    evbuffer_get_length(r->held[dir]) : 0);
}

/* A pass in direction dir is through: what waited for it follows. */
static void
px_pass_release_held(struct px_relay *r, enum px_dir dir)
{
	int peer = dir == PX_TO_SERVER ? 1 : 0;

	if (r->held[dir] != NULL && evbuffer_get_length(r->held[dir]) != 0)
		evbuffer_add_buffer(r->conn[peer].out, r->held[dir]);
}

/* Runs the analyser over what side `side` sent; false when the bytes left
 * are not to be passed on now (held, or the relay stopped). Bytes it
 * queued on either output count as moved. */
static bool
px_buf_analyse(struct px_relay *r, int side, struct evbuffer *in)
{
	enum px_dir dir = px_side_dir(side);
	size_t before[2], d;
	enum px_verdict v;

	before[0] = px_relay_queued(r, PX_TO_SERVER);
	before[1] = px_relay_queued(r, PX_TO_CLIENT);
	v = r->ops->analyse(r->arg, dir, in);
	if (!r->running)
		return false;	/* the owner ended it from inside */
	for (d = 0; d < 2; d++) {
		size_t now = px_relay_queued(r, (enum px_dir)d);

		/* Outputs are not written inside the analyser. */
		if (now > before[d])
			px_relay_count(r, (enum px_dir)d, now - before[d]);
	}
	switch (v) {
	case PX_PASS:
		break;
	case PX_MORE:
		return false;
	case PX_DENY:
	case PX_ERROR:
		r->ops->verdict(r->arg, v);
		return false;
	}
	return !r->finishing;
}

/* The bytes of a pass that came through user space go on as they are. */
static void
px_pass_copy(struct px_relay *r, int side)
{
	enum px_dir dir = px_side_dir(side);
	struct evbuffer *in = r->conn[side].in;
	size_t len = evbuffer_get_length(in);

	if (len > r->pass_left[dir])
		len = (size_t)r->pass_left[dir];
	evbuffer_remove_buffer(in, r->conn[!side].out, len);
	r->pass_left[dir] -= len;
	px_relay_count(r, dir, len);
	if (r->pass_left[dir] != 0 && r->conn[side].eof) {
		r->pass_owed[dir] = r->pass_left[dir];
		r->pass_left[dir] = 0;
	}
	if (r->pass_left[dir] == 0)
		px_pass_release_held(r, dir);
}

/* Moves what side `side` has read to its peer (through the analyser),
 * writes at once, and stops reading the side while the peer is full.
 * false once the relay ended (then nothing of r: its owner may have
 * freed it) or stopped. */
static bool
px_buf_forward(struct px_relay *r, int side)
{
	struct evbuffer *in = r->conn[side].in;
	struct evbuffer *out = r->conn[!side].out;
	size_t len;

	if (r->pass_left[px_side_dir(side)] > 0) {
		px_pass_copy(r, side);
		if (evbuffer_get_length(in) == 0 &&
		    !(r->conn[side].eof && r->ops->analyse != NULL))
			goto sent;
	}
	if (r->ops->analyse != NULL && !px_buf_analyse(r, side, in)) {
		/* Replies it queued (a deny's error page) still go out. */
		if (!r->running || !px_buf_flush(r, !side) ||
		    !px_buf_flush(r, side))
			return false;
		if (r->finishing) {
			(void)px_buf_finish_check(r);
			return false;
		}
		return true;
	}
	len = evbuffer_get_length(in);
	evbuffer_add_buffer(out, in);
	px_relay_count(r, px_side_dir(side), len);
sent:
	/* A pass to splice takes a small queued head into its pipe. */
	if (r->pass_left[px_side_dir(side)] > 0) {
		px_pass_begin(r, side);
		if (!r->running)
			return false;
	}
	if (!px_buf_flush(r, !side))
		return false;
	if (r->ops->analyse != NULL && !px_buf_flush(r, side))
		return false;
	if (evbuffer_get_length(out) >= r->lim.buffer) {
		r->paused[side] = true;
		px_buf_update_read(r, side);
	}
	return true;
}

/* The bandwidth side `side` may use now: the least of the relay's own
 * bucket and the shared one for that direction. */
static uint64_t
px_buf_rate_avail(struct px_relay *r, int side, uint64_t now)
{
	enum px_dir dir = px_side_dir(side);
	uint64_t a = UINT64_MAX, g;

	if (r->lim.session_rate != 0)
		a = px_bucket_avail(&r->rl[dir], now);
	if (r->lim.shared != NULL &&
	    (g = px_bucket_avail(&r->lim.shared[dir], now)) < a)
		a = g;
	return a;
}

static void
px_buf_rate_take(struct px_relay *r, int side, size_t n)
{
	enum px_dir dir = px_side_dir(side);

	if (r->lim.session_rate != 0)
		px_bucket_take(&r->rl[dir], n);
	if (r->lim.shared != NULL)
		px_bucket_take(&r->lim.shared[dir], n);
}

static void
px_buf_rate_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_relay *r = arg;
	int side;

	(void)fd; (void)what;
	for (side = 0; side < 2; side++)
		if (r->rate_paused[side]) {
			r->rate_paused[side] = false;
			px_buf_update_read(r, side);
		}
}

/* Side `side` used up its bandwidth: read again once some is back. */
static void
px_buf_rate_pause(struct px_relay *r, int side)
{
	enum px_dir dir = px_side_dir(side);
	const struct px_bucket *b = r->lim.session_rate != 0 &&
	    r->rl[dir].tokens == 0 ? &r->rl[dir] : &r->lim.shared[dir];
	uint64_t ms = px_bucket_wait_ms(b);
	struct timeval tv = { .tv_sec = 0, .tv_usec = (suseconds_t)ms * 1000 };

	r->rate_paused[side] = true;
	px_buf_update_read(r, side);
	if (!evtimer_pending(&r->rl_timer, NULL))
		evtimer_add(&r->rl_timer, &tv);
}

static void
px_buf_eof(struct px_relay *r, int side)
{
	struct evbuffer *in = r->conn[side].in;

	px_relay_saw_eof(r, side);
	px_buf_update_read(r, side);
	if (r->finishing) {
		(void)px_buf_finish_check(r);
		return;
	}
	/* The analyser's last look, at what it held for more or, with
	 * nothing left here, at the end itself (it may hold bytes of its
	 * own: a partial frame). What it left behind an end it holds is
	 * for it to look at again (px_relay_resume). */
	if (r->ops->analyse != NULL) {
		if (!px_buf_forward(r, side) || r->finishing)
			return;
		if (!r->end_held[px_side_dir(side)])
			evbuffer_drain(in, evbuffer_get_length(in));
	}
	/* Whatever is still queued for the peer goes first: the peer's
	 * writable callback sees it drain. */
	if (evbuffer_get_length(r->conn[!side].out) == 0 &&
	    !r->end_held[px_side_dir(side)])
		px_buf_half_done(r, side);
}

/* Reads in a row after a capped read that filled its cap (see below). */
#define PX_READ_AGAIN	8

static void
px_buf_readable(struct px_conn *c, void *arg)
{
	struct px_relay *r = arg;
	int side = px_conn_side(r, c), turn = 0;
	size_t room, have, queued;
	uint64_t rate;
	ssize_t n;
	bool capped;

again:
	if (!r->running || r->finishing)
		return;
	have = evbuffer_get_length(c->in);
	queued = evbuffer_get_length(r->conn[!side].out);
	capped = false;
	/* At most `buffer` bytes of one direction in user space. */
	if (queued >= r->lim.buffer || have >= r->lim.buffer) {
		r->paused[side] = true;
		px_buf_update_read(r, side);
		return;
	}
	room = r->lim.buffer - (queued > have ? queued : have);
	if (r->read_cap[side] != 0 && r->read_cap[side] < room) {
		room = r->read_cap[side];
		capped = true;
	}
	if (r->rl_on) {
		rate = px_buf_rate_avail(r, side, px_clock_ms());
		if (rate == 0) {
			px_buf_rate_pause(r, side);
			return;
		}
		if (rate < room)
			room = (size_t)rate;
	}
	n = px_conn_recv(c, room);
	/* The cap holds until a read gets something (an EAGAIN keeps it). */
	if (n >= 0)
		r->read_cap[side] = 0;
	if (n > 0) {
		if (r->rl_on)
			px_buf_rate_take(r, side, (size_t)n);
		/* Progress even if the analyser holds the bytes for more. */
		r->ops->moved(r->arg, px_side_dir(side), 0);
		if (!px_buf_forward(r, side))
			return;
		/* A capped read (a frame head the analyser asked for alone)
		 * that filled its cap: the rest of the frame, or once the
		 * pass behind the head is through, the next head, is most
		 * likely waiting already. Read it now, not after another
		 * epoll turn; an EAGAIN costs what that turn would. */
		if (capped && (size_t)n == room && ++turn < PX_READ_AGAIN &&
		    r->running && c->reading)
			goto again;
		return;
	}
	if (n == 0) {
		px_buf_eof(r, side);
		return;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return;
	px_relay_failed(r, side, errno);
}

static void
px_buf_writable(struct px_conn *c, void *arg)
{
	struct px_relay *r = arg;
	int side = px_conn_side(r, c), peer = !side;

	if (!px_buf_flush(r, side))
		return;
	r->ops->moved(r->arg, px_side_dir(peer), 0);	/* progress */
	if (r->finishing) {
		(void)px_buf_finish_check(r);
		return;
	}
	/* Drained to half: a peer paused for it may read again. */
	if (r->paused[peer] &&
	    evbuffer_get_length(c->out) <= r->lim.buffer / 2) {
		r->paused[peer] = false;
		px_buf_update_read(r, peer);
	}
	if (r->conn[peer].eof && evbuffer_get_length(c->out) == 0 &&
	    !r->end_held[px_side_dir(peer)])
		px_buf_half_done(r, peer);
}

static int
px_relay_buffered_start(struct px_relay *r)
{
	uint64_t now = px_clock_ms();
	int side, d;

	for (side = 0; side < 2; side++) {
		if (px_conn_open(&r->conn[side], r->base, r->fd[side],
		    px_buf_readable, px_buf_writable, r) == -1)
			return -1;
		r->conn_open[side] = true;
		if (r->ops->prepare != NULL &&
		    r->ops->prepare(r->arg, side, &r->conn[side]) == -1)
			return -1;
	}
	/* Towards the server we are the TLS client and speak first: a
	 * server that waits for our hello before it says anything (FTP's
	 * greeting on port 990) would otherwise wait for ever. A failure
	 * shows on the first read. */
	if (r->conn[1].tf != NULL)
		(void)px_conn_handshake(&r->conn[1]);
	if (r->lim.session_rate != 0)
		for (d = 0; d < 2; d++)
			px_bucket_init(&r->rl[d], r->lim.session_rate, now);
	r->rl_on = r->lim.session_rate != 0 || r->lim.shared != NULL;
	evtimer_assign(&r->rl_timer, r->base, px_buf_rate_cb, r);
	r->rl_timer_set = true;
	r->running = true;
	for (side = 0; side < 2; side++)
		px_buf_update_read(r, side);
	return 0;
}

int
px_relay_set_server(struct px_relay *r, int fd)
{
	struct px_conn *c = &r->conn[1];
	struct evbuffer *queued;

	if (!r->running || r->mode != PX_RELAY_BUFFERED || !r->conn_open[1] ||
	    r->pass != NULL || c->tf != NULL || c->eof || r->shut[1])
		return -1;
	/* What was queued for the placeholder goes to the server. */
	queued = c->out;
	c->out = NULL;
	px_conn_close(c);
	r->conn_open[1] = false;
	r->fd[1] = fd;
	if (px_conn_open(c, r->base, fd, px_buf_readable, px_buf_writable,
	    r) == -1 || (r->ops->prepare != NULL &&
	    r->ops->prepare(r->arg, 1, c) == -1)) {
		/* Its buffers and any half-made TLS; the socket stays the
		 * caller's to close. */
		px_conn_close(c);
		evbuffer_free(queued);
		return -1;
	}
	r->conn_open[1] = true;
	evbuffer_add_buffer(c->out, queued);
	evbuffer_free(queued);
	/* TLS from the first byte: our hello first, as at the start. */
	if (c->tf != NULL)
		(void)px_conn_handshake(c);
	px_buf_update_read(r, 1);
	px_buf_update_read(r, 0);
	return px_buf_flush(r, 1) ? 0 : -1;
}

/* ---- passes ----------------------------------------------------------- */

/* Below this a pass is copied: the pump's set-up costs about what copying
 * that much does. */
#define PX_PASS_SPLICE_MIN	(32 * 1024)

static bool
px_pass_can_splice(const struct px_relay *r, int side)
{
	int k;

	if (r->pipes == NULL || r->rl_on || r->conn[side].eof ||
	    r->pass_left[px_side_dir(side)] < PX_PASS_SPLICE_MIN)
		return false;
	for (k = 0; k < 2; k++)
		if (r->conn[k].tf != NULL || r->conn[k].tf_next != NULL)
			return false;
	return true;
}

static int
px_pass_side(const struct px_relay *r, const struct px_splice *sp)
{
	return sp == &r->pass[PX_TO_SERVER] ? 0 : 1;
}

/* The pump is done (or gone): back to reading through the conn. */
static void
px_pass_stop(struct px_relay *r, int side)
{
	enum px_dir dir = px_side_dir(side);

	if (r->pass_state[dir] == PX_PASS_SPLICE)
		px_splice_release(&r->pass[dir], r->pipes);
	r->pass_state[dir] = PX_PASS_COPY;
}

static void
px_pass_moved(void *arg, struct px_splice *sp, size_t n)
{
	struct px_relay *r = arg;
	enum px_dir dir = px_side_dir(px_pass_side(r, sp));

	r->pass_spliced[dir] += n;
	/* The head put in the pipe was counted when it was queued. */
	if (r->pass_preload[dir] != 0) {
		size_t k = n < r->pass_preload[dir] ? n : r->pass_preload[dir];

		r->pass_preload[dir] -= k;
		r->pass_spliced[dir] -= k;
		n -= k;
	}
	r->ops->moved(r->arg, dir, n);
}

/* What is queued for the pump's destination (a frame's head, a few
 * bytes) goes into its empty pipe, ahead of the body: one write to the
 * socket for both, not a small segment of its own. At most PIPE_BUF, which
 * a pipe takes whole or not at all. */
static void
px_pass_preload(struct px_relay *r, enum px_dir dir, int peer)
{
	struct px_splice *sp = &r->pass[dir];
	struct evbuffer *out = r->conn[peer].out;
	size_t len = evbuffer_get_length(out);
	struct iovec iov[8];
	struct evbuffer_iovec v[8];
	ssize_t w;
	int n, k;

	if (len == 0 || len > PIPE_BUF || len > sp->pipe_cap)
		return;
	n = evbuffer_peek(out, -1, NULL, v, 8);
	if (n < 1 || n > 8)
		return;
	for (k = 0; k < n; k++) {
		iov[k].iov_base = v[k].iov_base;
		iov[k].iov_len = v[k].iov_len;
	}
	w = writev(sp->pipe[1], iov, n);
	if (w != (ssize_t)len)
		return;		/* EAGAIN: nothing went in; the conn sends it */
	evbuffer_drain(out, len);
	sp->in_pipe = len;
	r->pass_preload[dir] = len;
}

static void
px_pass_reached(void *arg, struct px_splice *sp)
{
	struct px_relay *r = arg;
	int side = px_pass_side(r, sp);

	r->pass_left[px_side_dir(side)] = 0;
	r->read_cap[side] = r->pass_then[px_side_dir(side)];
	px_pass_stop(r, side);
	px_pass_release_held(r, px_side_dir(side));
	/* What waited for the peer goes now, then the source is read again. */
	if (!px_buf_flush(r, !side))
		return;
	if (r->finishing) {
		(void)px_buf_finish_check(r);
		return;
	}
	px_buf_update_read(r, side);
}

/* The source ended inside the pass: the analyser hears of it as of any
 * end (px_relay_pass_left() says where it came). */
static void
px_pass_done(void *arg, struct px_splice *sp)
{
	struct px_relay *r = arg;
	int side = px_pass_side(r, sp);

	r->pass_owed[px_side_dir(side)] = sp->left;
	r->pass_left[px_side_dir(side)] = 0;
	px_pass_stop(r, side);
	px_pass_release_held(r, px_side_dir(side));
	if (!px_buf_flush(r, !side))
		return;
	r->conn[side].eof = true;
	px_buf_eof(r, side);
}

static void
px_pass_failed(void *arg, struct px_splice *sp, enum px_splice_fail where,
    int err)
{
	struct px_relay *r = arg;
	int side = px_pass_side(r, sp);

	px_pass_stop(r, side);
	px_relay_failed(r, where == PX_SPLICE_READ ? side : !side, err);
}

static const struct px_splice_ops px_pass_ops = {
	.moved = px_pass_moved,
	.done = px_pass_done,
	.reached = px_pass_reached,
	.failed = px_pass_failed,
};

static int
px_pass_alloc(struct px_relay *r)
{
	int d;

	if ((r->pass = calloc(2, sizeof(*r->pass))) == NULL)
		return -1;
	for (d = 0; d < 2; d++) {
		r->pass[d].pipe[0] = r->pass[d].pipe[1] = -1;
		r->pass[d].stopped = true;
	}
	return 0;
}

/* After forward(): the rest of a pass is spliced when it can be, once the
 * peer's output is written (else the pump's bytes would overtake it). */
static void
px_pass_begin(struct px_relay *r, int side)
{
	enum px_dir dir = px_side_dir(side);
	struct px_splice *sp;

	if (!r->running || r->pass_state[dir] == PX_PASS_SPLICE)
		return;
	/* The conn stops reading the source only if the pass has to wait:
	 * one that is through before this returns leaves its read event as
	 * it was (no epoll_ctl to take it off and put it back). */
	if (r->pass_state[dir] == PX_PASS_COPY) {
		if (!px_pass_can_splice(r, side) ||
		    evbuffer_get_length(r->conn[side].in) != 0)
			return;
		r->pass_state[dir] = PX_PASS_WAIT;
	}
	/* What is queued must go first: in the pipe when it is small, else
	 * by the conn (the peer's writable callback comes back). */
	if (evbuffer_get_length(r->conn[!side].out) > PIPE_BUF ||
	    px_conn_write_blocked(&r->conn[!side]))
		goto wait;
	if (r->pass == NULL && px_pass_alloc(r) == -1) {
		r->pass_state[dir] = PX_PASS_COPY;	/* then copied */
		px_buf_update_read(r, side);
		return;
	}
	sp = &r->pass[dir];
	if (px_splice_init(sp, r->base, r->pipes, r->fd[side], r->fd[!side],
	    (int)r->lim.buffer, &px_pass_ops, r) == -1) {
		/* Out of pipes: the pass goes through user space. */
		r->pass_state[dir] = PX_PASS_COPY;
		px_buf_update_read(r, side);
		return;
	}
	r->pass_preload[dir] = 0;
	px_pass_preload(r, dir, !side);
	if (evbuffer_get_length(r->conn[!side].out) != 0) {
		px_splice_release(sp, r->pipes);
		goto wait;
	}
	px_splice_bound(sp, r->pass_left[dir]);
	r->pass_state[dir] = PX_PASS_SPLICE;
	px_splice_start(sp, true);
	/* Through already (reached), or ended: nothing to stop. */
	if (!r->running || r->pass_state[dir] == PX_PASS_COPY)
		return;
wait:
	px_buf_update_read(r, side);
}

bool
px_relay_pass(struct px_relay *r, enum px_dir dir, uint64_t n, size_t then)
{
	if (r->mode != PX_RELAY_BUFFERED || !r->running || n == 0)
		return false;
	if (r->held[dir] == NULL && (r->held[dir] = evbuffer_new()) == NULL)
		return false;	/* then the analyser holds the frame whole */
	r->pass_left[dir] = n;
	r->pass_then[dir] = then;
	return px_pass_can_splice(r, dir == PX_TO_SERVER ? 0 : 1);
}

void
px_relay_read_head(struct px_relay *r, enum px_dir dir, size_t n)
{
	int side = dir == PX_TO_SERVER ? 0 : 1, k;

	if (r->mode != PX_RELAY_BUFFERED || r->pipes == NULL || r->rl_on)
		return;
	for (k = 0; k < 2; k++)
		if (r->conn[k].tf != NULL || r->conn[k].tf_next != NULL)
			return;
	r->read_cap[side] = n;
}

void
px_relay_hold_read(struct px_relay *r, enum px_dir dir, bool hold)
{
	int side = dir == PX_TO_SERVER ? 0 : 1;

	if (r->mode != PX_RELAY_BUFFERED || r->read_held[side] == hold)
		return;
	r->read_held[side] = hold;
	px_buf_update_read(r, side);
}

void
px_relay_hold_end(struct px_relay *r, enum px_dir dir, bool hold)
{
	if (r->mode == PX_RELAY_BUFFERED)
		r->end_held[dir] = hold;
}

void
px_relay_resume(struct px_relay *r, enum px_dir dir, bool release_end)
{
	int side = dir == PX_TO_SERVER ? 0 : 1;

	if (r->mode != PX_RELAY_BUFFERED || !r->running || r->finishing ||
	    r->ops->analyse == NULL)
		return;
	if (release_end)
		r->end_held[dir] = false;
	if (!px_buf_forward(r, side))
		return;
	if (r->conn[side].eof) {
		/* (Passed on already unless it was held.) */
		if (!r->end_held[dir] && !r->shut[!side] &&
		    evbuffer_get_length(r->conn[!side].out) == 0)
			px_buf_half_done(r, side);
		return;
	}
	if (r->paused[side] && evbuffer_get_length(r->conn[!side].out) <=
	    r->lim.buffer / 2 && evbuffer_get_length(r->conn[side].in) <
	    r->lim.buffer) {
		r->paused[side] = false;
		px_buf_update_read(r, side);
	}
}

bool
px_relay_quiet(const struct px_relay *r)
{
	int d;

	if (!r->running || r->finishing || r->eof_seen)
		return false;
	for (d = 0; d < 2; d++) {
		if (r->shut[d] || r->end_held[d] || r->pass_left[d] != 0 ||
		    r->pass_owed[d] != 0 || r->pass_state[d] != PX_PASS_COPY ||
		    (r->held[d] != NULL && evbuffer_get_length(r->held[d]) != 0))
			return false;
		if (r->mode == PX_RELAY_SPLICE) {
			if (r->sp[d].in_pipe != 0 || r->sp[d].eof ||
			    r->sp[d].stopped)
				return false;
			continue;
		}
		if (!r->conn_open[d] || r->conn[d].tf != NULL ||
		    r->conn[d].tf_next != NULL || r->conn[d].shut_pending ||
		    r->conn[d].shut ||
		    evbuffer_get_length(r->conn[d].in) != 0 ||
		    evbuffer_get_length(r->conn[d].out) != 0)
			return false;
	}
	return true;
}

uint64_t
px_relay_pass_left(const struct px_relay *r, enum px_dir dir)
{
	return r->pass_left[dir] != 0 ? r->pass_left[dir] : r->pass_owed[dir];
}

/* ---- the relay -------------------------------------------------------- */

int
px_relay_start(struct px_relay *r, struct event_base *base,
    struct px_pipe_pool *pipes, const int fd[2], enum px_relay_mode mode,
    bool half_close, const struct px_relay_limits *lim,
    const struct px_relay_ops *ops, void *arg)
{
	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->arg = arg;
	r->base = base;
	r->pipes = pipes;
	r->fd[0] = fd[0];
	r->fd[1] = fd[1];
	r->half_close = half_close;
	r->lim = *lim;
	/* Bandwidth limits, TLS and byte inspection need the bytes in user
	 * space. */
	if (mode == PX_RELAY_SPLICE && (lim->session_rate != 0 ||
	    lim->shared != NULL || ops->analyse != NULL || lim->transforms))
		mode = PX_RELAY_BUFFERED;
	r->mode = mode;
	if (mode == PX_RELAY_SPLICE) {
		r->sp[0].pipe[0] = r->sp[0].pipe[1] = -1;
		r->sp[1].pipe[0] = r->sp[1].pipe[1] = -1;
		r->sp[0].stopped = r->sp[1].stopped = true;
		if (px_relay_splice_start(r) == 0)
			return 0;
		/* Out of pipes (fd limit): the buffered path still works. The
		 * conns share the pumps' memory. */
		r->mode = PX_RELAY_BUFFERED;
		memset(r->conn, 0, sizeof(r->conn));
	}
	return px_relay_buffered_start(r);
}

void
px_relay_finish(struct px_relay *r)
{
	int side, d;

	if (r->mode != PX_RELAY_BUFFERED || !r->running)
		return;
	r->finishing = true;
	/* A pass through user space gets no more bytes (nothing is read
	 * now): what waited for it goes. A spliced one ends its frame. */
	for (d = 0; d < 2; d++)
		if (r->pass_state[d] == PX_PASS_COPY && r->pass_left[d] > 0) {
			r->pass_left[d] = 0;
			px_pass_release_held(r, (enum px_dir)d);
		}
	for (side = 0; side < 2; side++)
		if (r->conn_open[side])
			px_buf_update_read(r, side);
	(void)px_buf_finish_check(r);
}

struct evbuffer *
px_relay_output(struct px_relay *r, enum px_dir dir)
{
	int side = dir == PX_TO_SERVER ? 1 : 0;

	if (r->pass_left[dir] > 0 || r->pass_state[dir] != PX_PASS_COPY)
		return r->held[dir];

	return r->conn_open[side] ? r->conn[side].out : NULL;
}

bool
px_relay_input_closed(const struct px_relay *r, enum px_dir dir)
{
	int side = dir == PX_TO_SERVER ? 0 : 1;

	return r->conn_open[side] && r->conn[side].eof;
}

const struct px_conn *
px_relay_conn(const struct px_relay *r, int side)
{
	return r->conn_open[side] ? &r->conn[side] : NULL;
}

size_t
px_relay_unsent(const struct px_relay *r, enum px_dir dir)
{
	size_t n = r->held[dir] != NULL ? evbuffer_get_length(r->held[dir]) : 0;
	int peer = dir == PX_TO_SERVER ? 1 : 0;

	if (r->conn_open[peer])
		n += evbuffer_get_length(r->conn[peer].out);
	return n;
}

void
px_relay_dispose(struct px_relay *r)
{
	free(r->pass);
	r->pass = NULL;
}

void
px_relay_free(struct px_relay *r, uint64_t unsent[2])
{
	int d;

	r->running = false;
	if (unsent != NULL)
		unsent[0] = unsent[1] = 0;
	if (r->pipes != NULL)
		for (d = 0; d < 2; d++) {
			if (r->mode == PX_RELAY_SPLICE)
				px_splice_release(&r->sp[d], r->pipes);
			if (r->pass_state[d] == PX_PASS_SPLICE)
				px_splice_release(&r->pass[d], r->pipes);
			r->pass_state[d] = PX_PASS_COPY;
		}
	for (d = 0; d < 2; d++) {
		if (!r->conn_open[d])
			continue;
		/* Queued for side d: direction !d's bytes it never took. */
		if (unsent != NULL)
			unsent[d == 1 ? PX_TO_SERVER : PX_TO_CLIENT] =
			    evbuffer_get_length(r->conn[d].out);
		px_conn_close(&r->conn[d]);
		r->conn_open[d] = false;
	}
	for (d = 0; d < 2; d++)
		if (r->held[d] != NULL) {
			if (unsent != NULL)
				unsent[d] += evbuffer_get_length(r->held[d]);
			evbuffer_free(r->held[d]);
			r->held[d] = NULL;
		}
	if (r->rl_timer_set) {
		evtimer_del(&r->rl_timer);
		r->rl_timer_set = false;
	}
}
