#include "session.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "channel.h"
#include "conntrack.h"
#include "log.h"
#include "tls.h"
#include "tcp_progress.h"
#include "upstream.h"
#include "worker.h"

static atomic_uint_fast64_t px_session_ids;

static void	px_session_release_io(struct px_session *s);
static int	px_session_check_dst(struct px_session *s);
static int	px_session_ask_conntrack(struct px_session *s);
static void	px_session_proceed(struct px_session *s);


uint64_t
px_now_ms(struct px_worker *w)
{
	(void)w;
	return px_clock_ms();
}

void
px_session_touch(struct px_session *s)
{
	s->last_active_ms = px_now_ms(s->w);
}

static void
px_session_arm_timer(struct px_session *s, uint64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
	    .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(&s->timer, &tv);
	s->timer_on = true;
}

const void *
px_session_policy(const struct px_session *s)
{
	return s->svc->analyser_policy;
}

static void
px_session_log_end(struct px_session *s, const char *reason)
{
	char client[PX_ADDRSTRLEN], dst[PX_ADDRSTRLEN], server[PX_ADDRSTRLEN];
	struct timeval now, d;

	if (!px_log_enabled(LOG_INFO))
		return;
	gettimeofday(&now, NULL);
	timersub(&now, &s->start_tv, &d);
	px_log(LOG_INFO, s->id, "session-end service=%s analyser=%s verdict=%s "
	    "client=%s dst=%s server=%s to-server=%llu to-client=%llu "
	    "duration=%ld.%03ld by=%s phase=%s end=%s",
	    s->svc->name, s->svc->analyser->name,
	    px_end_verdict_name(px_end_verdict(s->end_by, s->end_phase)),
	    px_sockaddr_str((struct sockaddr *)&s->client, client, sizeof(client)),
	    px_sockaddr_str((struct sockaddr *)&s->dst, dst, sizeof(dst)),
	    px_sockaddr_str((struct sockaddr *)&s->server, server, sizeof(server)),
	    (unsigned long long)s->bytes[PX_TO_SERVER],
	    (unsigned long long)s->bytes[PX_TO_CLIENT],
	    (long)d.tv_sec, (long)(d.tv_usec / 1000),
	    px_end_by_name(s->end_by), px_end_phase_name(s->end_phase), reason);
}

/* close() then sends an RST and drops anything unsent. */
static void
px_socket_abort(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (fd != -1)
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

enum px_end_verdict
px_end_verdict(enum px_end_by by, enum px_end_phase phase)
{
	switch (by) {
	case PX_END_POLICY:
		return PX_VERDICT_DENY;
	case PX_END_CLIENT_FAIL:
	case PX_END_SERVER_FAIL:
	case PX_END_PROXY:
		return PX_VERDICT_ERROR;
	case PX_END_TIMEOUT:
		return phase == PX_PHASE_CONNECT ? PX_VERDICT_ERROR :
		    PX_VERDICT_ACCEPT;
	default:
		return PX_VERDICT_ACCEPT;
	}
}

const char *
px_end_by_name(enum px_end_by by)
{
	static const char *const names[] = {
		[PX_END_CLIENT] = "client",
		[PX_END_SERVER] = "server",
		[PX_END_CLIENT_FAIL] = "client-fail",
		[PX_END_SERVER_FAIL] = "server-fail",
		[PX_END_POLICY] = "policy",
		[PX_END_TIMEOUT] = "timeout",
		[PX_END_PROXY] = "proxy",
		[PX_END_SHUTDOWN] = "shutdown",
	};

	return (unsigned)by < sizeof(names) / sizeof(names[0]) ? names[by] : "-";
}

const char *
px_end_phase_name(enum px_end_phase phase)
{
	static const char *const names[] = {
		[PX_PHASE_ACCEPT] = "accept",
		[PX_PHASE_CONNECT] = "connect",
		[PX_PHASE_DATA] = "data",
	};

	return (unsigned)phase < sizeof(names) / sizeof(names[0]) ?
	    names[phase] : "-";
}

const char *
px_end_verdict_name(enum px_end_verdict v)
{
	return v == PX_VERDICT_DENY ? "deny" : v == PX_VERDICT_ERROR ?
	    "error" : "accept";
}

/* The first end or finish decides who and when. */
static void
px_session_mark_end(struct px_session *s, enum px_end_by by)
{
	if (s->end_marked)
		return;
	s->end_marked = true;
	s->end_by = by;
	s->end_phase = !s->admitted ? PX_PHASE_ACCEPT :
	    s->state == PX_SS_CONNECTING ? PX_PHASE_CONNECT : PX_PHASE_DATA;
}

void
px_session_end(struct px_session *s, enum px_end_by by, const char *reason)
{
	struct px_worker *w = s->w;
	bool relayed = s->state == PX_SS_RELAY;

	if (s->state == PX_SS_CLOSED)
		return;
	px_session_mark_end(s, by);
	s->state = PX_SS_CLOSED;
	if (s->ct_waiting) {
		TAILQ_REMOVE(&w->ct_wait, s, ct_link);
		s->ct_waiting = false;
	}
	if (s->an_state != NULL && s->svc->analyser->on_close != NULL)
		s->svc->analyser->on_close(s, s->an_state);
	px_channels_close(&s->chan_host);
	px_session_release_io(s);	/* settles s->bytes before the log */
	px_session_log_end(s, reason);
	if (event_initialized(&s->conn_ev))
		event_del(&s->conn_ev);
	if (s->timer_on)
		evtimer_del(&s->timer);
	/* A relayed session ends with a FIN only when its ends finished.
	 * Errors, timeouts and shutdown reset what is left, so a peer never
	 * takes a truncated stream for a whole one. (A denied or failed
	 * session relayed nothing: a plain close says enough.) */
	if (relayed && !s->finished && s->end_by != PX_END_CLIENT &&
	    s->end_by != PX_END_SERVER) {
		px_socket_abort(s->cfd);
		px_socket_abort(s->sfd);
	}
	if (s->sfd != -1)
		close(s->sfd);
	if (s->cfd != -1)
		close(s->cfd);
	s->sfd = s->cfd = -1;
	TAILQ_REMOVE(&w->sessions, s, link);
	PX_COUNT_ADD(w, active, -1);
	atomic_fetch_sub_explicit(&px_live_sessions, 1, memory_order_relaxed);
	/* Freed by the worker's reaper once the current callback has
	 * returned: code that called something which closed the session can
	 * still look at s->state, wherever it is on the stack. */
	TAILQ_INSERT_TAIL(&w->dead, s, link);
	event_active(w->reap_ev, EV_TIMEOUT, 0);
	if (w->draining && TAILQ_EMPTY(&w->sessions))
		event_base_loopbreak(w->base);
}

void
px_session_reap(struct px_worker *w)
{
	struct px_session *s;

	while ((s = TAILQ_FIRST(&w->dead)) != NULL) {
		TAILQ_REMOVE(&w->dead, s, link);
		px_config_unref(s->cfg);
		free(s->an_state);
		free(s);
	}
}

void
px_session_endf(struct px_session *s, enum px_end_by by, const char *fmt, ...)
{
	char reason[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	px_session_end(s, by, reason);
}

void
px_session_deny(struct px_session *s, const char *why)
{
	char reason[160];

	snprintf(reason, sizeof(reason), "denied: %s", why);
	px_session_finish(s, PX_END_POLICY, reason);
}

void
px_session_abort(struct px_session *s, const char *why)
{
	char reason[160];

	snprintf(reason, sizeof(reason), "aborted: %s", why);
	px_session_end(s, PX_END_POLICY, reason);
}

static void
px_session_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_session *s = arg;
	uint64_t now, last, progress, idle = s->cfg->idle_timeout_ms;

	(void)fd; (void)what;
	s->timer_on = false;
	if (s->finishing) {
		/* The peer does not read the final reply: give up on it. */
		s->finished = false;
		px_session_endf(s, s->end_by, "%s (flush timed out)",
		    s->finish_reason);
		return;
	}
	if (s->ct_waiting) {
		PX_COUNT_ADD(s->w, origdst_failed, 1);
		px_session_end(s, PX_END_TIMEOUT, "error: original destination "
		    "unknown (no answer from conntrack)");
		return;
	}
	if (s->state == PX_SS_CONNECTING) {
		PX_COUNT_ADD(s->w, connect_failures, 1);
		px_session_end(s, PX_END_TIMEOUT, "connect-timeout");
		return;
	}
	if (idle == 0)
		return;
	/* Sliding deadline without an event_add per byte: on expiry, re-arm
	 * for what is left if proxyd moved bytes meanwhile, or for a whole
	 * period if the kernel did (a slow reader draining what proxyd
	 * already queued). So a session ends between one and two periods
	 * after the last byte moved. */
	now = px_now_ms(s->w);
	progress = px_tcp_progress(s->cfd) + px_tcp_progress(s->sfd);
	if (progress != s->tcp_progress) {
		/* Happened some time since the last check: count it as now. */
		s->tcp_progress = progress;
		s->tcp_progress_ms = now;
	}
	last = s->last_active_ms > s->tcp_progress_ms ? s->last_active_ms :
	    s->tcp_progress_ms;
	if (now - last < idle) {
		px_session_arm_timer(s, idle - (now - last));
		return;
	}
	PX_COUNT_ADD(s->w, idle_timeouts, 1);
	px_session_end(s, PX_END_TIMEOUT, "idle-timeout");
}

/* A driver analyser's conns hold nothing unwritten. */
static bool
px_session_driver_flushed(const struct px_session *s)
{
	int d;

	for (d = 0; d < 2; d++)
		if (s->dconn_open[d] && evbuffer_get_length(s->dconn[d].out) != 0)
			return false;
	return s->dconn_open[0];
}

void
px_session_finish(struct px_session *s, enum px_end_by by, const char *reason)
{
	if (s->state == PX_SS_CLOSED || s->finishing)
		return;
	px_session_mark_end(s, by);
	snprintf(s->finish_reason, sizeof(s->finish_reason), "%s", reason);
	if (s->state == PX_SS_RELAY && !s->relay_on) {
		/* A driver analyser finishes once it wrote its last reply:
		 * then a FIN, not a reset. */
		s->finished = px_session_driver_flushed(s);
		px_session_end(s, by, s->finish_reason);
		return;
	}
	if (s->state != PX_SS_RELAY || s->relay.mode != PX_RELAY_BUFFERED) {
		px_session_end(s, by, s->finish_reason);
		return;
	}
	s->finishing = true;
	s->finished = true;	/* a FIN after the reply, not an RST */
	if (s->timer_on)
		evtimer_del(&s->timer);
	px_session_arm_timer(s, PX_FINISH_GRACE_MS);
	px_relay_finish(&s->relay);
}

uint64_t
px_session_id(const struct px_session *s)
{
	return s->id;
}

const struct sockaddr *
px_session_client(const struct px_session *s)
{
	return (const struct sockaddr *)&s->client;
}

const struct sockaddr *
px_session_server(const struct px_session *s)
{
	return (const struct sockaddr *)&s->server;
}

struct event_base *
px_session_base(struct px_session *s)
{
	return s->w->base;
}

void
px_session_log(struct px_session *s, int level, const char *fmt, ...)
{
	va_list ap;

	if (!px_log_enabled(level))
		return;
	va_start(ap, fmt);
	px_logv(level, s->id, fmt, ap);
	va_end(ap);
}

void
px_session_count(struct px_session *s, unsigned index, uint64_t n)
{
	unsigned a = px_analyser_index(s->svc->analyser);
	atomic_uint_fast64_t *c;

	if (a >= PX_ANALYSERS_MAX || index >= PX_AN_COUNTERS_MAX)
		return;
	c = &s->w->counters.analyser[a][index];
	atomic_store_explicit(c, atomic_load_explicit(c,
	    memory_order_relaxed) + n, memory_order_relaxed);
}

const struct sockaddr *
px_session_dst(const struct px_session *s)
{
	return (const struct sockaddr *)&s->dst;
}

bool
px_session_is_transparent(const struct px_session *s)
{
	return s->svc->mode == PX_MODE_TRANSPARENT ||
	    s->svc->mode == PX_MODE_REDIRECT;
}

size_t
px_session_buffer(const struct px_session *s)
{
	return s->cfg->buffer;
}

/* A server socket to dst: pooled (connected) or a new connect under way. */
static int
px_session_upstream_fd(struct px_session *s, const struct sockaddr *dst,
    bool pooled_ok, bool *reused, const char **stage)
{
	const struct px_service *svc = s->svc;
	const struct sockaddr *src = svc->spoof_source ?
	    (const struct sockaddr *)&s->client : NULL;
	struct px_pool_key key;
	bool in_progress;
	int fd;

	px_pool_key_init(&key, svc, dst, src);
	if (pooled_ok && (fd = px_pool_take(&s->w->pool, &key)) != -1) {
		*reused = true;
		PX_COUNT_ADD(s->w, upstream_reused, 1);
		return fd;
	}
	*reused = false;
	fd = px_upstream_connect(svc, dst, px_sockaddr_len(dst), src,
	    &in_progress, stage);
	if (fd == -1)
		PX_COUNT_ADD(s->w, connect_failures, 1);
	else
		PX_COUNT_ADD(s->w, upstream_new, 1);
	return fd;
}

int
px_upstream_error(int fd)
{
	return px_upstream_result(fd);
}

/* ---- driver analysers (struct px_driver) ------------------------------ */

static void
px_drv_readable(struct px_conn *c, void *arg)
{
	struct px_session *s = arg;

	s->svc->analyser->driver->on_readable(s, s->an_state,
	    c == &s->dconn[0] ? PX_CHAN_CLIENT : PX_CHAN_SERVER);
}

static void
px_drv_writable(struct px_conn *c, void *arg)
{
	struct px_session *s = arg;

	s->svc->analyser->driver->on_writable(s, s->an_state,
	    c == &s->dconn[0] ? PX_CHAN_CLIENT : PX_CHAN_SERVER);
}

static void
px_drv_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_session *s = arg;

	(void)fd; (void)what;
	if (s->state == PX_SS_RELAY && s->an_timer_set)
		s->svc->analyser->driver->on_timer(s, s->an_state);
}

/* Before on_open: the client's conn and the analyser's timer. */
static int
px_drv_open(struct px_session *s)
{
	if (px_conn_open(&s->dconn[0], s->w->base, s->cfd, px_drv_readable,
	    px_drv_writable, s) == -1)
		return -1;
	s->dconn_open[0] = true;
	if (s->svc->tls_client != NULL &&
	    px_tls_attach(&s->dconn[0], s->svc->tls_client) == -1)
		return -1;
	evtimer_assign(&s->an_timer, s->w->base, px_drv_timer_cb, s);
	s->an_timer_set = true;
	return 0;
}

struct px_conn *
px_session_conn(struct px_session *s, enum px_chan_end side)
{
	return s->dconn_open[side] ? &s->dconn[side] : NULL;
}

void
px_session_timer(struct px_session *s, uint64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
	    .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	if (!s->an_timer_set)
		return;
	if (ms == 0)
		evtimer_del(&s->an_timer);
	else
		evtimer_add(&s->an_timer, &tv);
}

struct px_conn *
px_session_upstream_open(struct px_session *s, const struct sockaddr *dst,
    bool pooled_ok, bool *reused, const char **stage)
{
	int fd, err;

	*stage = "connect";
	if (s->dconn_open[1]) {
		errno = EBUSY;
		return NULL;
	}
	if ((fd = px_session_upstream_fd(s, dst, pooled_ok, reused,
	    stage)) == -1)
		return NULL;
	if (px_conn_open(&s->dconn[1], s->w->base, fd, px_drv_readable,
	    px_drv_writable, s) == -1) {
		err = errno;
		px_conn_close(&s->dconn[1]);
		close(fd);
		*stage = "buffers";
		errno = err != 0 ? err : ENOMEM;
		return NULL;
	}
	s->dconn_open[1] = true;
	s->sfd = fd;
	px_session_set_server(s, dst);
	return &s->dconn[1];
}

void
px_session_upstream_close(struct px_session *s, const struct sockaddr *dst,
    bool reusable, unsigned max, uint64_t idle_ms)
{
	struct px_pool_key key;
	int fd = s->sfd;

	if (!s->dconn_open[1])
		return;
	px_conn_close(&s->dconn[1]);
	s->dconn_open[1] = false;
	s->sfd = -1;
	if (!reusable || s->w->draining) {
		close(fd);
		return;
	}
	px_pool_key_init(&key, s->svc, dst, s->svc->spoof_source ?
	    (const struct sockaddr *)&s->client : NULL);
	px_pool_put(&s->w->pool, &key, fd, max, idle_ms);
}

void
px_session_set_server(struct px_session *s, const struct sockaddr *server)
{
	memcpy(&s->server, server, px_sockaddr_len(server));
}

void
px_session_account(struct px_session *s, enum px_dir dir, uint64_t n)
{
	s->bytes[dir] += n;
	PX_COUNT_BYTES(s->w, dir, n);
}

void
px_session_channel_bytes(struct px_session *s, enum px_dir dir, uint64_t n)
{
	s->bytes[dir] += n;
	PX_COUNT_BYTES(s->w, dir, n);
	px_session_touch(s);
}

void
px_session_active(struct px_session *s)
{
	px_session_touch(s);
}

int
px_session_tunnel(struct px_session *s)
{
	int side;

	if (!s->dconn_open[1]) {
		errno = ENOTCONN;
		return -1;
	}
	/* The sockets stay; the relay takes them over. */
	for (side = 0; side < 2; side++) {
		px_conn_close(&s->dconn[side]);
		s->dconn_open[side] = false;
	}
	if (s->an_timer_set) {
		evtimer_del(&s->an_timer);
		s->an_timer_set = false;
	}
	return px_session_relay(s, PX_RELAY_SPLICE, true);
}

/* ---- what the relay reports -------------------------------------------- */

static void
px_session_moved(void *arg, enum px_dir dir, size_t n)
{
	struct px_session *s = arg;

	s->bytes[dir] += n;
	PX_COUNT_BYTES(s->w, dir, n);
	px_session_touch(s);
}

static enum px_verdict
px_session_analyse(void *arg, enum px_dir dir, struct evbuffer *in)
{
	struct px_session *s = arg;

	return s->svc->analyser->on_data(s, s->an_state, dir, in);
}

static void
px_session_verdict(void *arg, enum px_verdict v)
{
	struct px_session *s = arg;

	if (v == PX_DENY)
		px_session_deny(s, "by analyser");
	else
		px_session_end(s, PX_END_PROXY, "error: aborted by analyser");
}

static void
px_session_relay_ended(void *arg, enum px_end_by by, const char *reason)
{
	struct px_session *s = arg;

	/* A peer gone while a final reply is flushed: the finish's end. */
	if (s->finishing)
		px_session_end(s, s->end_by, s->finish_reason);
	else
		px_session_end(s, by, reason);
}

static void
px_session_flushed(void *arg)
{
	struct px_session *s = arg;

	px_session_end(s, s->end_by, s->finish_reason);
}

static const struct px_relay_ops px_session_relay_ops = {
	.moved = px_session_moved,
	.verdict = px_session_verdict,
	.ended = px_session_relay_ended,
	.flushed = px_session_flushed,
};

static const struct px_relay_ops px_session_analysed_ops = {
	.moved = px_session_moved,
	.analyse = px_session_analyse,
	.verdict = px_session_verdict,
	.ended = px_session_relay_ended,
	.flushed = px_session_flushed,
};

int
px_session_relay(struct px_session *s, enum px_relay_mode mode, bool half_close)
{
	struct px_relay_limits lim = {
		.buffer = s->cfg->buffer,
		.session_rate = s->cfg->session_bandwidth,
		.shared = s->cfg->global_bandwidth != 0 ? s->w->rl_global : NULL,
		.tls = { s->svc->tls_client, NULL },
	};
	int fd[2] = { s->cfd, s->sfd };
	const struct px_relay_ops *ops = s->svc->analyser->on_data != NULL &&
	    s->svc->analyser->driver == NULL ? &px_session_analysed_ops :
	    &px_session_relay_ops;

	s->relay_on = true;
	if (px_relay_start(&s->relay, s->w->base, &s->w->pipes, fd, mode,
	    half_close, &lim, ops, s) == -1)
		return -1;
	if (s->relay.mode == PX_RELAY_SPLICE)
		PX_COUNT_ADD(s->w, splice_sessions, 1);
	return 0;
}

/* Frees the relay and a driver's conns; what the kernel never took of the
 * buffered path's queues is taken off the totals. */
static void
px_session_release_io(struct px_session *s)
{
	uint64_t unsent[2];
	int d;

	if (s->relay_on) {
		px_relay_free(&s->relay, unsent);
		s->relay_on = false;
		for (d = 0; d < 2; d++)
			s->bytes[d] -= unsent[d] < s->bytes[d] ? unsent[d] :
			    s->bytes[d];
	}
	for (d = 0; d < 2; d++)
		if (s->dconn_open[d]) {
			px_conn_close(&s->dconn[d]);
			s->dconn_open[d] = false;
		}
	if (s->an_timer_set) {
		evtimer_del(&s->an_timer);
		s->an_timer_set = false;
	}
}

struct evbuffer *
px_session_output(struct px_session *s, enum px_dir dir)
{
	return s->relay_on ? px_relay_output(&s->relay, dir) : NULL;
}

bool
px_session_input_closed(const struct px_session *s, enum px_dir dir)
{
	return s->relay_on && px_relay_input_closed(&s->relay, dir);
}

static void
px_session_connected(struct px_session *s)
{
	const struct px_analyser *a = s->svc->analyser;

	s->state = PX_SS_RELAY;
	if (s->timer_on) {
		evtimer_del(&s->timer);
		s->timer_on = false;
	}
	px_session_touch(s);
	s->tcp_progress_ms = s->last_active_ms;
	if (s->cfg->idle_timeout_ms != 0)
		px_session_arm_timer(s, s->cfg->idle_timeout_ms);
	if (a->state_size != 0 &&
	    (s->an_state = calloc(1, a->state_size)) == NULL) {
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return;
	}
	if (a->driver != NULL && px_drv_open(s) == -1) {
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return;
	}
	if (a->on_open(s, s->an_state) == -1 && s->state != PX_SS_CLOSED)
		px_session_end(s, PX_END_PROXY, "error: analyser refused to open");
}

static void
px_session_connect_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_session *s = arg;
	int err;

	(void)what;
	err = px_upstream_result((int)fd);
	if (err != 0) {
		PX_COUNT_ADD(s->w, connect_failures, 1);
		px_session_endf(s, PX_END_SERVER_FAIL, "connect-failed: %s",
		    strerror(err));
		return;
	}
	px_session_connected(s);
}

/* Whether addr is one of this host's own addresses: only those can be
 * bound without IP_FREEBIND/IP_TRANSPARENT. */
static bool
px_is_local_address(const struct sockaddr *addr)
{
	struct sockaddr_storage ss;
	socklen_t len = px_sockaddr_len(addr);
	int fd, rc;

	px_sockaddr_copy(&ss, addr);
	px_sockaddr_set_port(&ss, 0);
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return true;	/* can't tell: refuse rather than loop */
	rc = bind(fd, (struct sockaddr *)&ss, len);
	close(fd);
	return rc == 0 || errno != EADDRNOTAVAIL;
}

/* A connection addressed to the listener itself rather than diverted to
 * it: relaying it would loop back into the proxy (Zorp refuses it too).
 * On a wildcard listener that means the listen port on one of our own
 * addresses; a diverted connection to a far host on that port is fine. */
static bool
px_is_direct(const struct px_service *svc, const struct sockaddr *dst)
{
	const struct sockaddr *l = (const struct sockaddr *)&svc->listen;

	if (px_sockaddr_port(dst) != px_sockaddr_port(l))
		return false;
	if (!px_sockaddr_is_wildcard(l))
		return px_sockaddr_same_host(dst, l);
	return px_is_local_address(dst);
}

/* Sets s->dst and s->server from the deployment mode. 0, or -1 after
 * closing the session. */
static int
px_session_destination(struct px_session *s)
{
	struct px_worker *w = s->w;
	const struct px_service *svc = s->svc;
	socklen_t len = sizeof(s->local);

	/* Fixed mode never needs our end of the client socket (the admin
	 * listing asks for it itself): one syscall less per session. */
	if (svc->mode != PX_MODE_FIXED &&
	    getsockname(s->cfd, (struct sockaddr *)&s->local, &len) == -1) {
		px_session_endf(s, PX_END_CLIENT_FAIL, "client-error: %s",
		    strerror(errno));
		return -1;
	}
	switch (svc->mode) {
	case PX_MODE_TRANSPARENT:
		/* TPROXY keeps the original destination as our local end. */
		memcpy(&s->dst, &s->local, sizeof(s->dst));
		break;
	case PX_MODE_REDIRECT:
		/* SO_ORIGINAL_DST first, as HAProxy and nginx do: no netlink
		 * round trip. conntrack otherwise, asked without blocking: its
		 * answer continues the session (px_session_origdst_answer). */
		if (!svc->origdst_conntrack && px_origdst_sockopt(s->cfd,
		    s->local.ss_family, &s->dst) == 0) {
			PX_COUNT_ADD(w, origdst_sockopt, 1);
			break;
		}
		if (px_session_ask_conntrack(s) == 0)
			return 1;
		PX_COUNT_ADD(w, origdst_failed, 1);
		px_session_endf(s, PX_END_PROXY, "error: original destination "
		    "unknown (no SO_ORIGINAL_DST, conntrack: %s)",
		    strerror(errno));
		return -1;
	case PX_MODE_FORWARD:
		/* The analyser learns it from each request. */
		return 0;
	default:
		memcpy(&s->dst, &svc->target, svc->target_len);
		break;
	}
	return px_session_check_dst(s);
}

/* The destination is known: refuse the proxy's own address. 0 or -1. */
static int
px_session_check_dst(struct px_session *s)
{
	const struct px_service *svc = s->svc;

	if (svc->mode != PX_MODE_FIXED &&
	    px_is_direct(svc, (struct sockaddr *)&s->dst)) {
		PX_COUNT_ADD(s->w, denied_direct, 1);
		px_session_end(s, PX_END_POLICY,
		    "denied: direct connection to the proxy");
		return -1;
	}
	memcpy(&s->server, &s->dst, sizeof(s->dst));
	return 0;
}

/* Asks the worker's conntrack handle for the original destination. 0
 * (the session waits for the answer, bounded by connect-timeout), or -1
 * with errno. */
static int
px_session_ask_conntrack(struct px_session *s)
{
	struct px_worker *w = s->w;
	struct px_conntrack *ct = px_worker_conntrack(w);

	if (ct == NULL)
		return -1;
	if (px_conntrack_ask_origdst(ct, 0, (struct sockaddr *)&s->client,
	    (struct sockaddr *)&s->local, &s->ct_seq) == -1)
		return -1;
	s->ct_waiting = true;
	TAILQ_INSERT_TAIL(&w->ct_wait, s, ct_link);
	px_session_arm_timer(s, s->svc->connect_timeout_ms);
	return 0;
}

void
px_session_origdst_answer(struct px_session *s,
    const struct sockaddr_storage *dst)
{
	struct px_worker *w = s->w;

	TAILQ_REMOVE(&w->ct_wait, s, ct_link);
	s->ct_waiting = false;
	if (s->timer_on) {
		evtimer_del(&s->timer);
		s->timer_on = false;
	}
	if (dst == NULL || dst->ss_family == AF_UNSPEC) {
		PX_COUNT_ADD(w, origdst_failed, 1);
		px_session_end(s, PX_END_PROXY, "error: original destination "
		    "unknown (no SO_ORIGINAL_DST, no conntrack entry)");
		return;
	}
	PX_COUNT_ADD(w, origdst_conntrack, 1);
	memcpy(&s->dst, dst, sizeof(s->dst));
	if (px_session_check_dst(s) == -1)
		return;
	px_session_proceed(s);
}

void
px_session_accept(struct px_listener *l, int fd, const struct sockaddr *sa,
    int salen)
{
	struct px_worker *w = l->w;
	const struct px_service *svc = l->svc;
	struct px_session *s;
	int one = 1;

	PX_COUNT_ADD(w, accepted, 1);
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		close(fd);
		return;
	}
	s->id = atomic_fetch_add_explicit(&px_session_ids, 1,
	    memory_order_relaxed) + 1;
	s->w = w;
	s->cfg = px_config_ref(w->cfg);
	s->svc = svc;
	s->cfd = fd;
	s->sfd = -1;
	gettimeofday(&s->start_tv, NULL);
	s->start_ms = px_now_ms(w);
	if ((size_t)salen <= sizeof(s->client))
		memcpy(&s->client, sa, (size_t)salen);
	evtimer_assign(&s->timer, w->base, px_session_timer_cb, s);
	TAILQ_INSERT_TAIL(&w->sessions, s, link);
	PX_COUNT_ADD(w, active, 1);
	/* Counted before the checks so the close path is the same for all. */
	if (atomic_fetch_add_explicit(&px_live_sessions, 1,
	    memory_order_relaxed) >= s->cfg->max_sessions) {
		PX_COUNT_ADD(w, denied_max, 1);
		px_session_end(s, PX_END_POLICY, "denied: max-sessions");
		return;
	}
	if (svc->nallow != 0 && !px_cidr_list_match(svc->allow, svc->nallow, sa)) {
		PX_COUNT_ADD(w, denied_acl, 1);
		px_session_end(s, PX_END_POLICY, "denied: client not allowed");
		return;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (px_session_destination(s) != 0)
		return;		/* ended, or waiting for conntrack */
	px_session_proceed(s);
}

/* Admitted, destination known: connect (or hand over to a driver). */
static void
px_session_proceed(struct px_session *s)
{
	struct px_worker *w = s->w;
	const struct px_service *svc = s->svc;
	const char *stage;
	bool in_progress;
	int sfd;

	s->admitted = true;
	if (svc->analyser->driver != NULL) {
		px_session_connected(s);
		return;
	}
	sfd = px_upstream_connect(svc, (struct sockaddr *)&s->server,
	    px_sockaddr_len((struct sockaddr *)&s->server),
	    svc->spoof_source ? (struct sockaddr *)&s->client : NULL,
	    &in_progress, &stage);
	if (sfd == -1) {
		PX_COUNT_ADD(w, connect_failures, 1);
		if (strcmp(stage, "connect") == 0)
			px_session_endf(s, PX_END_SERVER_FAIL,
			    "connect-failed: %s", strerror(errno));
		else
			px_session_endf(s, PX_END_SERVER_FAIL,
			    "connect-failed: %s: %s", stage,
			    strerror(errno));
		return;
	}
	s->sfd = sfd;
	if (!in_progress) {
		px_session_connected(s);
		return;
	}
	event_assign(&s->conn_ev, w->base, sfd, EV_WRITE, px_session_connect_cb, s);
	event_add(&s->conn_ev, NULL);
	px_session_arm_timer(s, svc->connect_timeout_ms);
}

static const char *
px_session_state_name(const struct px_session *s)
{
	switch (s->state) {
	case PX_SS_CONNECTING: return "connecting";
	case PX_SS_RELAY: return !s->relay_on ? "analysing" :
	    s->relay.mode == PX_RELAY_SPLICE ? "relay-splice" :
	    "relay-buffered";
	default: return "closing";
	}
}

void
px_session_snapshot(const struct px_session *s, uint64_t now,
    struct px_session_snap *p)
{
	socklen_t len;

	memset(p, 0, sizeof(*p));
	p->id = s->id;
	p->worker = s->w->id;
	snprintf(p->service, sizeof(p->service), "%s", s->svc->name);
	p->ct_zone = s->svc->ct_zone;
	p->state = px_session_state_name(s);
	p->client = s->client;
	p->local = s->local;
	len = sizeof(p->local);
	if (p->local.ss_family == AF_UNSPEC)
		(void)getsockname(s->cfd, (struct sockaddr *)&p->local, &len);
	p->dst = s->dst;
	p->server = s->server;
	len = sizeof(p->upstream_local);
	if (s->sfd == -1 || getsockname(s->sfd,
	    (struct sockaddr *)&p->upstream_local, &len) == -1)
		p->upstream_local.ss_family = AF_UNSPEC;
	p->to_server = s->bytes[PX_TO_SERVER];
	p->to_client = s->bytes[PX_TO_CLIENT];
	p->age = (double)(now - s->start_ms) / 1000.0;
}

/* ---- data channels: what they need of their session ------------------ */

static void
px_session_chan_touch(struct px_session *s)
{
	px_session_touch(s);
}

static void
px_session_chan_bytes(struct px_session *s, enum px_dir dir, size_t n)
{
	px_session_channel_bytes(s, dir, n);
}

struct px_channel *
px_channel_new(struct px_session *s, uint64_t timeout_ms, px_channel_cb cb,
    void *arg)
{
	struct px_chan_host *h = &s->chan_host;

	if (h->owner == NULL) {
		h->owner = s;
		h->base = s->w->base;
		h->pipes = &s->w->pipes;
		h->id = s->id;
		h->buffer = s->cfg->buffer;
		h->idle_ms = s->cfg->idle_timeout_ms;
		h->transparent = s->svc->mode == PX_MODE_TRANSPARENT;
		h->has_mark = s->svc->has_mark;
		h->mark = s->svc->mark;
		h->bytes = px_session_chan_bytes;
		h->touch = px_session_chan_touch;
	}
	return px_chan_new(h, timeout_ms, cb, arg);
}

int
px_session_local(struct px_session *s, enum px_chan_end end,
    struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);
	int fd = end == PX_CHAN_CLIENT ? s->cfd : s->sfd;

	if (fd == -1) {
		errno = ENOTCONN;
		return -1;
	}
	return getsockname(fd, (struct sockaddr *)ss, &len);
}
