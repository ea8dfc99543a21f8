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
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "log.h"
#include "worker.h"

#define PX_SPLICE_ROUNDS	16	/* per wakeup, for fairness */

static const char *const px_side_name[2] = { "client", "server" };

/* ---- splice ----------------------------------------------------------- */

static void
px_splice_finish_half(struct px_session *s, int d)
{
	struct px_splice_half *h = &s->sp[d];

	h->done = true;
	px_event_want(&h->rd, &h->rd_on, false);
	px_event_want(&h->wr, &h->wr_on, false);
	if (!s->half_close) {
		px_session_close(s, s->first_eof);
		return;
	}
	/* Pass the FIN on; the other direction keeps flowing. */
	(void)shutdown(h->to, SHUT_WR);
	if (s->sp[!d].done)
		px_session_close(s, s->first_eof);
}

/* After splice() said EAGAIN: if the socket sits at the urgent mark, read
 * past it into the (empty) pipe. Returns bytes moved, 0 at EOF, or -1
 * with errno (EAGAIN: nothing to read after all). */
static ssize_t
px_splice_past_urgent(struct px_splice_half *h)
{
	char buf[16384];
	int atmark = 0;
	ssize_t n, w;

	if (ioctl(h->from, SIOCATMARK, &atmark) == -1 || !atmark) {
		errno = EAGAIN;
		return -1;
	}
	n = recv(h->from, buf, sizeof(buf) < h->pipe_cap ? sizeof(buf) :
	    h->pipe_cap, MSG_DONTWAIT);
	if (n <= 0)
		return n;
	/* The pipe is empty and at least 4k: this cannot be short. */
	w = write(h->pipe[1], buf, (size_t)n);
	if (w != n) {
		errno = w == -1 ? errno : EIO;
		return -1;
	}
	return n;
}

/* Moves what it can in direction d; may close the session. */
static void
px_splice_pump(struct px_session *s, int d)
{
	struct px_splice_half *h = &s->sp[d];
	struct px_worker *w = s->w;
	int rounds = 0;
	bool active = false, drained = false;
	ssize_t n;

	for (;;) {
		if (h->in_pipe > 0) {
			n = splice(h->pipe[0], NULL, h->to, NULL, h->in_pipe,
			    SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
			if (n > 0) {
				h->in_pipe -= (size_t)n;
				s->bytes[d] += (uint64_t)n;
				PX_COUNT_BYTES(w, d, n);
				active = true;
				continue;
			}
			if (n == -1 && errno == EINTR)
				continue;
			if (n == -1 && errno == EAGAIN) {
				/* Peer is slow: stop reading, wait to write. */
				px_event_want(&h->rd, &h->rd_on, false);
				px_event_want(&h->wr, &h->wr_on, true);
				break;
			}
			px_session_closef(s, "%s-error: %s", px_side_name[!d],
			    strerror(n == -1 ? errno : EPIPE));
			return;
		}
		px_event_want(&h->wr, &h->wr_on, false);
		if (h->eof) {
			if (active)
				px_session_touch(s);
			px_splice_finish_half(s, d);
			return;
		}
		/* A short read left the socket empty: skip the read that would
		 * only say EAGAIN; level-triggered epoll reports what's left. */
		if (drained || ++rounds > PX_SPLICE_ROUNDS) {
			px_event_want(&h->rd, &h->rd_on, true);
			break;
		}
		n = splice(h->from, NULL, h->pipe[1], NULL, h->pipe_cap,
		    SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
		/* splice() stops for good at TCP urgent data while epoll keeps
		 * saying readable: a spin and a stall. recv() steps over the
		 * urgent byte (as the buffered path and any reader without
		 * SO_OOBINLINE do) and its bytes go into the empty pipe. */
		if (n == -1 && errno == EAGAIN)
			n = px_splice_past_urgent(h);
		if (n > 0) {
			h->in_pipe = (size_t)n;
			drained = (size_t)n < h->pipe_cap;
			active = true;
			continue;
		}
		if (n == 0) {
			h->eof = true;
			if (s->first_eof == NULL)
				s->first_eof = d == PX_TO_SERVER ?
				    "client-closed" : "server-closed";
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			px_event_want(&h->rd, &h->rd_on, true);
			break;
		}
		px_session_closef(s, "%s-error: %s", px_side_name[d],
		    strerror(errno));
		return;
	}
	if (active)
		px_session_touch(s);
}

static void
px_splice_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_splice_half *h = arg;

	(void)fd; (void)what;
	px_splice_pump(h->s, h->dir);
}

int
px_relay_splice_start(struct px_session *s)
{
	struct px_worker *w = s->w;
	int d, size = (int)s->cfg->buffer;

	for (d = 0; d < 2; d++) {
		struct px_splice_half *h = &s->sp[d];
		int cap;

		if ((cap = px_pipe_get(w, h->pipe, size)) == -1) {
			if (d == 1)
				px_pipe_put(w, s->sp[0].pipe,
				    (int)s->sp[0].pipe_cap, size, true);
			s->sp[0].pipe[0] = s->sp[0].pipe[1] = -1;
			return -1;
		}
		h->pipe_cap = (size_t)cap;
		h->pipe_size = size;
		h->s = s;
		h->dir = d;
		h->from = d == PX_TO_SERVER ? s->cfd : s->sfd;
		h->to = d == PX_TO_SERVER ? s->sfd : s->cfd;
		event_assign(&h->rd, w->base, h->from, EV_READ | EV_PERSIST,
		    px_splice_cb, h);
		event_assign(&h->wr, w->base, h->to, EV_WRITE | EV_PERSIST,
		    px_splice_cb, h);
	}
	/* The client's first bytes are usually waiting already: move them
	 * now. The server has only just accepted, so reading it now would
	 * almost always cost an EAGAIN; its read event reports a greeting. */
	px_splice_pump(s, PX_TO_SERVER);
	if (s->state != PX_SS_CLOSED)
		px_event_want(&s->sp[PX_TO_CLIENT].rd, &s->sp[PX_TO_CLIENT].rd_on, true);
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
		px_session_close(s, s->first_eof);
		return;
	}
	if (!s->bev_shut[peer]) {
		s->bev_shut[peer] = true;
		(void)shutdown(bufferevent_getfd(s->bev[peer]), SHUT_WR);
	}
	if (s->bev_shut[0] && s->bev_shut[1])
		px_session_close(s, s->first_eof);
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
		px_session_finish(s, "denied: by analyser");
		return false;
	case PX_ERROR:
		px_session_close(s, "error: aborted by analyser");
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
		if (s->first_eof == NULL)
			s->first_eof = side == 0 ? "client-closed" : "server-closed";
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
			px_session_close(s, s->finish_reason);
			return;
		}
		px_session_closef(s, "%s-error: %s", px_side_name[side],
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
	px_session_close(s, s->finish_reason);
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

	for (d = 0; d < 2; d++) {
		struct px_splice_half *h = &s->sp[d];

		if (h->pipe[0] != -1) {
			px_event_want(&h->rd, &h->rd_on, false);
			px_event_want(&h->wr, &h->wr_on, false);
			px_pipe_put(s->w, h->pipe, (int)h->pipe_cap,
			    h->pipe_size, h->in_pipe == 0);
			h->pipe[0] = h->pipe[1] = -1;
		}
	}
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
