/* Moving bytes between the two sockets of a session.
 *
 * Splice path: socket -> pipe -> socket with splice(2), so payload never
 * enters user space. A direction reads only when its pipe is empty, so the
 * pipe (sized to limits/@buffer) is the whole buffer and a slow reader
 * stops the other side's reads: backpressure with a hard bound.
 *
 * Buffered path: two conns (conn.h), for rate limits and analysers that
 * inspect bytes. The le-proxy pattern: stop reading a side while the peer's
 * output holds more than `buffer`, resume when it drains to half. Bytes
 * are written as soon as they are read; the write event is polled only
 * while the kernel pushes back. */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "bucket.h"
#include "log.h"
#include "worker.h"

static const char *const px_side_name[2] = { "client", "server" };
static const enum px_end_by px_side_fail[2] = { PX_END_CLIENT_FAIL,
    PX_END_SERVER_FAIL };

/* Side 0 (client) or 1 (server) gave EOF. */
static void
px_relay_saw_eof(struct px_session *s, int side)
{
	if (!s->eof_seen) {
		s->eof_seen = true;
		s->eof_by = side == 0 ? PX_END_CLIENT : PX_END_SERVER;
	}
}

/* A normal end: the side that closed first is who ended it. */
static void
px_relay_peer_closed(struct px_session *s)
{
	px_session_end(s, s->eof_by, s->eof_by == PX_END_CLIENT ?
	    "client-closed" : "server-closed");
}

/* ---- splice ----------------------------------------------------------- */

static int
px_splice_dir(const struct px_session *s, const struct px_splice *sp)
{
	return sp == &s->sp[PX_TO_SERVER] ? PX_TO_SERVER : PX_TO_CLIENT;
}

static void
px_relay_splice_moved(void *arg, struct px_splice *sp, size_t n)
{
	struct px_session *s = arg;
	int d = px_splice_dir(s, sp);

	s->bytes[d] += (uint64_t)n;
	PX_COUNT_BYTES(s->w, d, n);
	px_session_touch(s);
}

static void
px_relay_splice_done(void *arg, struct px_splice *sp)
{
	struct px_session *s = arg;
	int d = px_splice_dir(s, sp);

	px_relay_saw_eof(s, d == PX_TO_SERVER ? 0 : 1);
	if (!s->half_close) {
		px_relay_peer_closed(s);
		return;
	}
	/* Pass the FIN on; the other direction keeps flowing. */
	(void)shutdown(sp->to, SHUT_WR);
	if (!px_splice_active(&s->sp[!d]))
		px_relay_peer_closed(s);
}

static void
px_relay_splice_failed(void *arg, struct px_splice *sp,
    enum px_splice_fail where, int err)
{
	struct px_session *s = arg;
	int d = px_splice_dir(s, sp);
	/* Reading from the source side, or writing to the other one. */
	int side = where == PX_SPLICE_READ ? d : !d;

	px_session_endf(s, px_side_fail[side], "%s-error: %s",
	    px_side_name[side], strerror(err));
}

static const struct px_splice_ops px_relay_splice_ops = {
	.moved = px_relay_splice_moved,
	.done = px_relay_splice_done,
	.failed = px_relay_splice_failed,
};

int
px_relay_splice_start(struct px_session *s)
{
	struct px_worker *w = s->w;
	int d, size = (int)s->cfg->buffer;

	for (d = 0; d < 2; d++) {
		int from = d == PX_TO_SERVER ? s->cfd : s->sfd;
		int to = d == PX_TO_SERVER ? s->sfd : s->cfd;

		if (px_splice_init(&s->sp[d], w->base, &w->pipes, from, to,
		    size, &px_relay_splice_ops, s) == -1) {
			if (d == 1)
				px_splice_release(&s->sp[0], &w->pipes);
			return -1;
		}
	}
	/* The client's first bytes are usually waiting already: move them
	 * now. The server has only just accepted, so reading it now would
	 * almost always cost an EAGAIN; its read event reports a greeting. */
	px_splice_start(&s->sp[PX_TO_SERVER], true);
	if (s->state != PX_SS_CLOSED)
		px_splice_start(&s->sp[PX_TO_CLIENT], false);
	return 0;
}

/* ---- buffered --------------------------------------------------------- */

/* Sides are 0 (client) and 1 (server); what side `side` sends goes in
 * direction px_side_dir(side). */
static enum px_dir
px_side_dir(int side)
{
	return side == 0 ? PX_TO_SERVER : PX_TO_CLIENT;
}

static int
px_conn_side(const struct px_session *s, const struct px_conn *c)
{
	return c == &s->conn[0] ? 0 : 1;
}

static void
px_relay_count(struct px_session *s, enum px_dir dir, size_t len)
{
	s->moved[dir] += len;
	PX_COUNT_BYTES(s->w, dir, len);
}

/* Reading side `side` is wanted unless it ended, its peer's output is
 * full, its bandwidth is used up, or the session is finishing. */
static void
px_buf_update_read(struct px_session *s, int side)
{
	px_conn_read_enable(&s->conn[side], s->state == PX_SS_RELAY &&
	    !s->finishing && !s->conn[side].eof && !s->buf_paused[side] &&
	    !s->rate_paused[side]);
}

/* Side `side` gave EOF and everything it sent is delivered to the peer. */
static void
px_buf_half_done(struct px_session *s, int side)
{
	int peer = !side;

	if (!s->half_close) {
		px_relay_peer_closed(s);
		return;
	}
	if (!s->buf_shut[peer]) {
		s->buf_shut[peer] = true;
		if (px_conn_shutdown(&s->conn[peer]) == -1) {
			px_session_endf(s, px_side_fail[peer], "%s-error: %s",
			    px_side_name[peer], strerror(errno));
			return;
		}
	}
	if (s->buf_shut[0] && s->buf_shut[1])
		px_relay_peer_closed(s);
}

/* Writes what side x has queued; false once the session is closed. */
static bool
px_buf_flush(struct px_session *s, int x)
{
	if (px_conn_send(&s->conn[x]) == -1) {
		if (s->finishing)
			px_session_end(s, s->end_by, s->finish_reason);
		else
			px_session_endf(s, px_side_fail[x], "%s-error: %s",
			    px_side_name[x], strerror(errno));
		return false;
	}
	return true;
}

/* Runs the analyser over what side `side` sent; false once the session is
 * closed or finishing. Bytes it queued on either output count as moved. */
static bool
px_buf_analyse(struct px_session *s, int side, struct evbuffer *in)
{
	const struct px_analyser *a = s->svc->analyser;
	enum px_dir dir = px_side_dir(side);
	struct evbuffer *out[2] = { s->conn[1].out, s->conn[0].out }; /* by px_dir */
	size_t before[2], d;
	enum px_verdict v;

	before[0] = evbuffer_get_length(out[0]);
	before[1] = evbuffer_get_length(out[1]);
	v = a->on_data(s, s->an_state, dir, in);
	if (s->state == PX_SS_CLOSED)
		return false;
	for (d = 0; d < 2; d++) {
		size_t now = evbuffer_get_length(out[d]);

		/* Outputs are not written inside on_data. */
		if (now > before[d])
			px_relay_count(s, (enum px_dir)d, now - before[d]);
	}
	switch (v) {
	case PX_PASS:
		break;
	case PX_MORE:
		return false;
	case PX_DENY:
		px_session_deny(s, "by analyser");
		return false;
	case PX_ERROR:
		px_session_end(s, PX_END_PROXY, "error: aborted by analyser");
		return false;
	}
	return !s->finishing;
}

/* Closes a finishing session once both outputs are written. */
void
px_session_finish_check(struct px_session *s)
{
	int side;

	for (side = 0; side < 2; side++)
		if (s->conn[side].out != NULL && !s->buf_shut[side] &&
		    evbuffer_get_length(s->conn[side].out) != 0)
			return;
	px_session_end(s, s->end_by, s->finish_reason);
}

/* Moves what side `side` has read to its peer (through the analyser),
 * writes at once, and stops reading the side while the peer is full. */
static void
px_buf_forward(struct px_session *s, int side)
{
	struct evbuffer *in = s->conn[side].in;
	struct evbuffer *out = s->conn[!side].out;
	size_t len;

	if (s->svc->analyser->on_data != NULL && !px_buf_analyse(s, side, in)) {
		/* Replies it queued (a deny's error) still go out. */
		if (s->state == PX_SS_RELAY && px_buf_flush(s, !side) &&
		    px_buf_flush(s, side) && s->finishing)
			px_session_finish_check(s);
		return;
	}
	len = evbuffer_get_length(in);
	evbuffer_add_buffer(out, in);
	px_relay_count(s, px_side_dir(side), len);
	if (!px_buf_flush(s, !side))
		return;
	if (s->svc->analyser->on_data != NULL && !px_buf_flush(s, side))
		return;
	if (evbuffer_get_length(out) >= s->cfg->buffer) {
		s->buf_paused[side] = true;
		px_buf_update_read(s, side);
	}
}

/* The bandwidth side `side` may use now: the least of its session's and
 * its worker's bucket for that direction. */
static uint64_t
px_buf_rate_avail(struct px_session *s, int side, uint64_t now)
{
	enum px_dir dir = px_side_dir(side);
	uint64_t a = UINT64_MAX, g;

	if (s->cfg->session_bandwidth != 0)
		a = px_bucket_avail(&s->rl[dir], now);
	if (s->cfg->global_bandwidth != 0 &&
	    (g = px_bucket_avail(&s->w->rl_global[dir], now)) < a)
		a = g;
	return a;
}

static void
px_buf_rate_take(struct px_session *s, int side, size_t n)
{
	enum px_dir dir = px_side_dir(side);

	if (s->cfg->session_bandwidth != 0)
		px_bucket_take(&s->rl[dir], n);
	if (s->cfg->global_bandwidth != 0)
		px_bucket_take(&s->w->rl_global[dir], n);
}

static void
px_buf_rate_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_session *s = arg;
	int side;

	(void)fd; (void)what;
	for (side = 0; side < 2; side++)
		if (s->rate_paused[side]) {
			s->rate_paused[side] = false;
			px_buf_update_read(s, side);
		}
}

/* Side `side` used up its bandwidth: read again once some is back. */
static void
px_buf_rate_pause(struct px_session *s, int side)
{
	enum px_dir dir = px_side_dir(side);
	const struct px_bucket *b = s->cfg->session_bandwidth != 0 &&
	    s->rl[dir].tokens == 0 ? &s->rl[dir] : &s->w->rl_global[dir];
	uint64_t ms = px_bucket_wait_ms(b);
	struct timeval tv = { .tv_sec = 0, .tv_usec = (suseconds_t)ms * 1000 };

	s->rate_paused[side] = true;
	px_buf_update_read(s, side);
	if (!evtimer_pending(&s->rl_timer, NULL))
		evtimer_add(&s->rl_timer, &tv);
}

static void
px_buf_eof(struct px_session *s, int side)
{
	struct evbuffer *in = s->conn[side].in;

	px_relay_saw_eof(s, side);
	px_buf_update_read(s, side);
	if (s->finishing) {
		px_session_finish_check(s);
		return;
	}
	/* Bytes the analyser held for more: its last look at them. */
	if (evbuffer_get_length(in) != 0 && s->svc->analyser->on_data != NULL) {
		px_buf_forward(s, side);
		if (s->state != PX_SS_RELAY || s->finishing)
			return;
		evbuffer_drain(in, evbuffer_get_length(in));
	}
	/* Whatever is still queued for the peer goes first: the peer's
	 * writable callback sees it drain. */
	if (evbuffer_get_length(s->conn[!side].out) == 0)
		px_buf_half_done(s, side);
}

static void
px_buf_readable(struct px_conn *c, void *arg)
{
	struct px_session *s = arg;
	int side = px_conn_side(s, c);
	size_t room, have = evbuffer_get_length(c->in);
	size_t queued = evbuffer_get_length(s->conn[!side].out);
	uint64_t rate = UINT64_MAX;
	ssize_t n;

	if (s->state != PX_SS_RELAY || s->finishing)
		return;
	/* At most `buffer` bytes of one direction in user space. */
	if (queued >= s->cfg->buffer || have >= s->cfg->buffer) {
		s->buf_paused[side] = true;
		px_buf_update_read(s, side);
		return;
	}
	room = s->cfg->buffer - (queued > have ? queued : have);
	if (s->rl_on) {
		rate = px_buf_rate_avail(s, side, px_now_ms(s->w));
		if (rate == 0) {
			px_buf_rate_pause(s, side);
			return;
		}
		if (rate < room)
			room = (size_t)rate;
	}
	n = px_conn_recv(c, room);
	if (n > 0) {
		if (s->rl_on)
			px_buf_rate_take(s, side, (size_t)n);
		px_session_touch(s);
		px_buf_forward(s, side);
		return;
	}
	if (n == 0) {
		px_buf_eof(s, side);
		return;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return;
	if (s->finishing) {
		/* A peer gone while we flush a final reply. */
		px_session_end(s, s->end_by, s->finish_reason);
		return;
	}
	px_session_endf(s, px_side_fail[side], "%s-error: %s",
	    px_side_name[side], strerror(errno));
}

static void
px_buf_writable(struct px_conn *c, void *arg)
{
	struct px_session *s = arg;
	int side = px_conn_side(s, c), peer = !side;

	if (!px_buf_flush(s, side))
		return;
	px_session_touch(s);
	if (s->finishing) {
		px_session_finish_check(s);
		return;
	}
	/* Drained to half: a peer paused for it may read again. */
	if (s->buf_paused[peer] &&
	    evbuffer_get_length(c->out) <= s->cfg->buffer / 2) {
		s->buf_paused[peer] = false;
		px_buf_update_read(s, peer);
	}
	if (s->conn[peer].eof && evbuffer_get_length(c->out) == 0)
		px_buf_half_done(s, peer);
}

int
px_relay_buffered_start(struct px_session *s)
{
	struct px_worker *w = s->w;
	uint64_t now = px_now_ms(w);
	int side, d;

	for (side = 0; side < 2; side++) {
		int fd = side == 0 ? s->cfd : s->sfd;

		if (px_conn_open(&s->conn[side], w->base, fd, px_buf_readable,
		    px_buf_writable, s) == -1)
			return -1;
		s->conn_open[side] = true;
	}
	if (s->cfg->session_bandwidth != 0)
		for (d = 0; d < 2; d++)
			px_bucket_init(&s->rl[d], s->cfg->session_bandwidth, now);
	s->rl_on = s->cfg->session_bandwidth != 0 ||
	    s->cfg->global_bandwidth != 0;
	evtimer_assign(&s->rl_timer, w->base, px_buf_rate_cb, s);
	s->rl_timer_set = true;
	for (side = 0; side < 2; side++)
		px_buf_update_read(s, side);
	return 0;
}

struct evbuffer *
px_session_output(struct px_session *s, enum px_dir dir)
{
	return s->conn[dir == PX_TO_SERVER ? 1 : 0].out;
}

bool
px_session_input_closed(const struct px_session *s, enum px_dir dir)
{
	return s->conn[dir == PX_TO_SERVER ? 0 : 1].eof;
}

void
px_relay_finish(struct px_session *s)
{
	int side;

	for (side = 0; side < 2; side++)
		if (s->conn_open[side])
			px_buf_update_read(s, side);
	px_session_finish_check(s);
}

/* ---- teardown --------------------------------------------------------- */

void
px_relay_free(struct px_session *s)
{
	int d;

	for (d = 0; d < 2; d++)
		px_splice_release(&s->sp[d], &s->w->pipes);
	for (d = 0; d < 2; d++) {
		if (!s->conn_open[d])
			continue;
		/* Count what reached the kernel, not what was left queued.
		 * (A driver analyser accounts its bytes itself.) */
		if (!s->driven)
			s->bytes[!d] += s->moved[!d] -
			    evbuffer_get_length(s->conn[d].out);
		px_conn_close(&s->conn[d]);
		s->conn_open[d] = false;
	}
	if (s->rl_timer_set) {
		evtimer_del(&s->rl_timer);
		s->rl_timer_set = false;
	}
	if (s->an_timer_set) {
		evtimer_del(&s->an_timer);
		s->an_timer_set = false;
	}
}
