/* Moving bytes between the two sockets of a session.
 *
 * Splice path: socket -> pipe -> socket with splice(2), so payload never
 * enters user space. A direction reads only when its pipe is empty, so the
 * pipe (sized to limits/@buffer) is the whole buffer and a slow reader
 * stops the other side's reads: backpressure with a hard bound.
 *
 * Buffered path: libevent bufferevents, for rate limits and analysers that
 * inspect bytes. The le-proxy pattern: stop reading a side while the peer's
 * output holds more than `buffer`, resume when it drains to half. */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

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

/* ---- bufferevents ----------------------------------------------------- */

static void
px_relay_count(struct px_session *s, enum px_dir dir, size_t len)
{
	s->moved[dir] += len;
	PX_COUNT_BYTES(s->w, dir, len);
}

static int
px_bev_side(struct px_session *s, struct bufferevent *bev)
{
	return bev == s->bev[0] ? 0 : 1;
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
	if (!s->bev_shut[peer]) {
		s->bev_shut[peer] = true;
		(void)shutdown(bufferevent_getfd(s->bev[peer]), SHUT_WR);
	}
	if (s->bev_shut[0] && s->bev_shut[1])
		px_relay_peer_closed(s);
}

/* Runs the analyser over what side `side` sent; false once the session is
 * closed or finishing. Bytes it queued on either output count as moved. */
static bool
px_buf_analyse(struct px_session *s, int side, struct evbuffer *in)
{
	const struct px_analyser *a = s->svc->analyser;
	enum px_dir dir = side == 0 ? PX_TO_SERVER : PX_TO_CLIENT;
	struct evbuffer *out[2] = { bufferevent_get_output(s->bev[1]),
	    bufferevent_get_output(s->bev[0]) };	/* by px_dir */
	size_t before[2], d;
	enum px_verdict v;

	before[0] = evbuffer_get_length(out[0]);
	before[1] = evbuffer_get_length(out[1]);
	v = a->on_data(s, s->an_state, dir, in);
	if (s->state == PX_SS_CLOSED)
		return false;
	for (d = 0; d < 2; d++) {
		size_t now = evbuffer_get_length(out[d]);

		/* Outputs only drain from the event loop, never inside on_data. */
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

static void
px_buf_read_cb(struct bufferevent *bev, void *arg)
{
	struct px_session *s = arg;
	int side = px_bev_side(s, bev);
	enum px_dir dir = side == 0 ? PX_TO_SERVER : PX_TO_CLIENT;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer *out = bufferevent_get_output(s->bev[!side]);
	size_t len;

	if (s->state != PX_SS_RELAY || s->finishing)
		return;
	px_session_touch(s);
	if (s->svc->analyser->on_data != NULL && !px_buf_analyse(s, side, in))
		return;
	len = evbuffer_get_length(in);
	evbuffer_add_buffer(out, in);
	px_relay_count(s, dir, len);
	if (evbuffer_get_length(out) >= s->cfg->buffer) {
		s->bev_paused[side] = true;
		bufferevent_disable(bev, EV_READ);
		bufferevent_setwatermark(s->bev[!side], EV_WRITE,
		    s->cfg->buffer / 2, 0);
	}
}

static void
px_buf_write_cb(struct bufferevent *bev, void *arg)
{
	struct px_session *s = arg;
	int side = px_bev_side(s, bev), peer = !side;

	if (s->finishing) {
		px_session_finish_check(s);
		return;
	}
	/* Our output drained to the low watermark: a peer paused for it may
	 * read again. (Without a pause there is nothing to undo: this runs
	 * after every write that empties the output.) */
	if (!s->bev_eof[peer]) {
		if (s->bev_paused[peer]) {
			s->bev_paused[peer] = false;
			bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
			bufferevent_enable(s->bev[peer], EV_READ);
		}
		return;
	}
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		px_buf_half_done(s, peer);
}

static void
px_buf_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct px_session *s = arg;
	int side = px_bev_side(s, bev);

	if (what & BEV_EVENT_EOF) {
		struct evbuffer *in = bufferevent_get_input(bev);

		s->bev_eof[side] = true;
		px_relay_saw_eof(s, side);
		bufferevent_disable(bev, EV_READ);
		if (s->finishing) {
			px_session_finish_check(s);
			return;
		}
		/* Bytes the analyser held for more: its last look at them. */
		if (evbuffer_get_length(in) != 0 &&
		    s->svc->analyser->on_data != NULL) {
			if (px_buf_analyse(s, side, in)) {
				size_t len = evbuffer_get_length(in);

				evbuffer_add_buffer(bufferevent_get_output(
				    s->bev[!side]), in);
				px_relay_count(s, side == 0 ? PX_TO_SERVER :
				    PX_TO_CLIENT, len);
			}
			if (s->state != PX_SS_RELAY || s->finishing)
				return;
			evbuffer_drain(in, evbuffer_get_length(in));
		}
		/* Whatever is still queued for the peer goes first; the write
		 * callback fires at empty (low watermark 0). */
		bufferevent_setwatermark(s->bev[!side], EV_WRITE, 0, 0);
		if (evbuffer_get_length(bufferevent_get_output(s->bev[!side])) == 0)
			px_buf_half_done(s, side);
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		int err = EVUTIL_SOCKET_ERROR();

		/* A peer gone while we flush a final reply: nothing to wait for. */
		if (s->finishing) {
			px_session_end(s, s->end_by, s->finish_reason);
			return;
		}
		px_session_endf(s, px_side_fail[side], "%s-error: %s",
		    px_side_name[side],
		    err ? strerror(err) : "unknown error");
	}
}

int
px_relay_buffered_start(struct px_session *s)
{
	struct px_worker *w = s->w;
	int side;

	for (side = 0; side < 2; side++) {
		int fd = side == 0 ? s->cfd : s->sfd;
		struct bufferevent *bev;

		bev = bufferevent_socket_new(w->base, fd, 0);
		if (bev == NULL)
			return -1;
		s->bev[side] = bev;
		bufferevent_setcb(bev, px_buf_read_cb, px_buf_write_cb,
		    px_buf_event_cb, s);
		/* Don't pull more than `buffer` into user space at once. */
		bufferevent_setwatermark(bev, EV_READ, 0, s->cfg->buffer);
	}
	if (s->cfg->session_bandwidth != 0) {
		struct timeval tick = { 0, 100 * 1000 };
		size_t rate = s->cfg->session_bandwidth / 10;

		if (rate == 0)
			rate = 1;
		s->rl_cfg = ev_token_bucket_cfg_new(rate, rate, rate, rate, &tick);
		if (s->rl_cfg == NULL)
			return -1;
	}
	for (side = 0; side < 2; side++) {
		if (s->rl_cfg != NULL)
			bufferevent_set_rate_limit(s->bev[side], s->rl_cfg);
		bufferevent_enable(s->bev[side], EV_READ | EV_WRITE);
	}
	/* Only the client side joins the worker's group: its read bucket
	 * meters what goes to servers and its write bucket what goes to
	 * clients, so each direction gets the whole global rate. */
	if (s->cfg->global_bandwidth != 0 && w->rl_group != NULL)
		bufferevent_add_to_rate_limit_group(s->bev[0], w->rl_group);
	return 0;
}

struct evbuffer *
px_session_output(struct px_session *s, enum px_dir dir)
{
	struct bufferevent *bev = s->bev[dir == PX_TO_SERVER ? 1 : 0];

	return bev != NULL ? bufferevent_get_output(bev) : NULL;
}

bool
px_session_input_closed(const struct px_session *s, enum px_dir dir)
{
	return s->bev_eof[dir == PX_TO_SERVER ? 0 : 1];
}

/* Closes a finishing session once both outputs are written. */
void
px_session_finish_check(struct px_session *s)
{
	int side;

	for (side = 0; side < 2; side++)
		if (s->bev[side] != NULL && !s->bev_shut[side] &&
		    evbuffer_get_length(bufferevent_get_output(s->bev[side])) != 0)
			return;
	px_session_end(s, s->end_by, s->finish_reason);
}

void
px_relay_finish(struct px_session *s)
{
	int side;

	for (side = 0; side < 2; side++) {
		if (s->bev[side] == NULL)
			continue;
		bufferevent_disable(s->bev[side], EV_READ);
		bufferevent_setwatermark(s->bev[side], EV_WRITE, 0, 0);
	}
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
		struct bufferevent *bev = s->bev[d];

		if (bev == NULL)
			continue;
		/* Count what reached the kernel, not what was left queued. */
		s->bytes[!d] += s->moved[!d] -
		    evbuffer_get_length(bufferevent_get_output(bev));
		if (d == 0 && s->w->rl_group != NULL)
			bufferevent_remove_from_rate_limit_group(bev);
		bufferevent_free(bev);
		s->bev[d] = NULL;
	}
	if (s->rl_cfg != NULL) {
		ev_token_bucket_cfg_free(s->rl_cfg);
		s->rl_cfg = NULL;
	}
}
