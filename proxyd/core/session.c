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

#include "data_channel.h"
#include "conntrack.h"
#include "log.h"
#include "tls.h"
#include "tls_hello.h"
#include "tcp_progress.h"
#include "upstream.h"
#include "worker.h"

static atomic_uint_fast64_t px_session_ids;

static void	px_session_release_io(struct px_session *s);
static int	px_session_check_dst(struct px_session *s);
static int	px_session_ask_conntrack(struct px_session *s);
static void	px_session_proceed(struct px_session *s);
static void	px_session_server_up(struct px_session *s);
static int	px_session_client_allowed(struct px_session *s);


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

struct px_tls_peer
px_session_tls_peer(struct px_session *s)
{
	return (struct px_tls_peer){ .session_id = s->id, .tw = &s->w->tls,
	    .n = &s->m->tls };
}

static void
px_session_arm_timer(struct px_session *s, uint64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
	    .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(&s->timer, &tv);
	s->timer_on = true;
}

static void
px_session_stop_timer(struct px_session *s)
{
	if (s->timer_on) {
		evtimer_del(&s->timer);
		s->timer_on = false;
	}
}

static void
px_session_log_end(struct px_session *s, const char *reason)
{
	char client[PX_ADDRSTRLEN], dst[PX_ADDRSTRLEN], server[PX_ADDRSTRLEN];
	char zones[160] = "";
	struct timeval now, d;
	bool shared;

	if (!px_log_enabled(LOG_INFO))
		return;
	gettimeofday(&now, NULL);
	timersub(&now, &s->start_tv, &d);
	if (s->cfg->zones.n > 0)
		snprintf(zones, sizeof(zones), " client-zone=%s server-zone=%s",
		    px_zone_name(&s->cfg->zones, s->client_zone),
		    px_zone_name(&s->cfg->zones, s->server_zone));
	/* A shared listener's connection refused before its destination
	 * chose a service belongs to none of them. */
	shared = s->svc->group->n > 1 && !s->svc_chosen;
	px_log(LOG_INFO, s->id, "session-end service=%s analyser=%s verdict=%s "
	    "client=%s dst=%s server=%s%s to-server=%llu to-client=%llu "
	    "duration=%ld.%03ld by=%s phase=%s end=%s",
	    shared ? "-" : s->svc->name, shared ? "-" : s->svc->analyser->name,
	    px_end_verdict_name(px_end_verdict(s->end_by, s->end_phase)),
	    px_sockaddr_str((struct sockaddr *)&s->client, client, sizeof(client)),
	    px_sockaddr_str((struct sockaddr *)&s->dst, dst, sizeof(dst)),
	    px_sockaddr_str((struct sockaddr *)&s->server, server, sizeof(server)),
	    zones,
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

/* A driver's TLS conns end with close_notify when the session ends
 * cleanly: without it a client cannot tell the end from a cut (ab counts
 * every such response as failed). Once, without waiting: the FIN follows. */
static void
px_session_close_notify(struct px_session *s)
{
	enum px_conn_want want;
	int d;

	if (!s->finished && s->end_by != PX_END_CLIENT &&
	    s->end_by != PX_END_SERVER)
		return;
	for (d = 0; d < 2; d++)
		if (s->dconn_open[d] && s->dconn[d].tf != NULL &&
		    s->dconn[d].tf->shutdown != NULL && !s->dconn[d].shut)
			(void)s->dconn[d].tf->shutdown(&s->dconn[d], &want);
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
	px_session_close_notify(s);
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
	px_worker_load_add(w, -1);
	px_metrics_session_end(s);
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
		PX_SC_ADD(s->m, origdst[PX_ORIGDST_FAILED], 1);
		px_session_end(s, PX_END_TIMEOUT, "error: original destination "
		    "unknown (no answer from conntrack)");
		return;
	}
	if (s->kb_server_hs) {
		px_tls_handshake_timed_out(&s->dconn[1]);
		px_session_end(s, PX_END_SERVER_FAIL, "server-error: tls: "
		    "handshake timed out");
		return;
	}
	if (s->tls_handshaking) {
		/* (A passthrough ClientHello is no handshake of ours.) */
		px_tls_handshake_timed_out(&s->dconn[0]);
		px_session_end(s, PX_END_CLIENT_FAIL, "client-error: tls: "
		    "handshake timed out");
		return;
	}
	if (s->state == PX_SS_CONNECTING) {
		PX_SC_ADD(s->m, connect_failures, 1);
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
	PX_SC_ADD(s->m, idle_timeouts, 1);
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

/* ---- what the relay reports -------------------------------------------- */

static void
px_session_moved(void *arg, enum px_dir dir, size_t n)
{
	struct px_session *s = arg;

	s->bytes[dir] += n;
	PX_COUNT_BYTES(s, dir, n);
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

/* The relay's conn of a side is open: TLS goes into its slot, the
 * client's already handshaken (px_session_client_handshake). */
static int
px_session_prepare(void *arg, int side, struct px_conn *c)
{
	struct px_session *s = arg;
	struct px_tls_peer peer = px_session_tls_peer(s);

	if (side == 0) {
		if (s->dconn_open[0]) {
			px_conn_move_transform(c, &s->dconn[0]);
			px_conn_close(&s->dconn[0]);
			s->dconn_open[0] = false;
		}
		return 0;
	}
	if (s->hello_rest != NULL) {
		/* Queued before anything the relay reads: it goes first. */
		evbuffer_add_buffer(c->out, s->hello_rest);
		evbuffer_free(s->hello_rest);
		s->hello_rest = NULL;
		if (px_conn_send(c) == -1)
			return -1;
	}
	if (s->dconn_open[1]) {
		/* Keybridge: handshaken before the relay. */
		px_conn_move_transform(c, &s->dconn[1]);
		px_conn_close(&s->dconn[1]);
		s->dconn_open[1] = false;
		return 0;
	}
	if (s->svc->tls_server == NULL)
		return 0;
	peer.name = px_tls_server_name(s->svc->tls_server,
	    s->client_sni[0] != '\0' ? s->client_sni : NULL);
	peer.addr = (const struct sockaddr *)&s->server;
	return px_tls_attach(c, s->svc->tls_server, &peer);
}

static const struct px_relay_ops px_session_relay_ops = {
	.prepare = px_session_prepare,
	.moved = px_session_moved,
	.verdict = px_session_verdict,
	.ended = px_session_relay_ended,
	.flushed = px_session_flushed,
};

static const struct px_relay_ops px_session_analysed_ops = {
	.prepare = px_session_prepare,
	.moved = px_session_moved,
	.analyse = px_session_analyse,
	.verdict = px_session_verdict,
	.ended = px_session_relay_ended,
	.flushed = px_session_flushed,
};

/* Passthrough: the ClientHello read for the policy goes to the server
 * first, as it came. A fresh socket takes it whole (it is at most 16 KB);
 * what it would not take goes through the buffered relay ahead of the
 * rest. 0, or -1 after ending the session. */
static int
px_session_send_hello(struct px_session *s, struct px_relay_limits *lim)
{
	struct evbuffer *in = s->dconn[0].in;
	size_t len;
	int n;

	if (!s->dconn_open[0])
		return 0;
	len = evbuffer_get_length(in);
	px_session_account(s, PX_TO_SERVER, len);
	while (evbuffer_get_length(in) != 0 &&
	    (n = evbuffer_write(in, s->sfd)) > 0)
		;
	if (evbuffer_get_length(in) != 0 && errno != EAGAIN &&
	    errno != EWOULDBLOCK && errno != EINTR) {
		px_session_endf(s, PX_END_SERVER_FAIL, "server-error: %s",
		    strerror(errno));
		return -1;
	}
	if (evbuffer_get_length(in) != 0) {
		s->hello_rest = in;
		s->dconn[0].in = NULL;
		lim->transforms = true;		/* the buffered path */
	}
	px_conn_close(&s->dconn[0]);
	s->dconn_open[0] = false;
	return 0;
}

int
px_session_relay(struct px_session *s, enum px_relay_mode mode, bool half_close)
{
	struct px_relay_limits lim = {
		.buffer = s->cfg->buffer,
		.session_rate = s->cfg->session_bandwidth,
		.shared = s->cfg->global_bandwidth != 0 ? s->w->rl_global : NULL,
		.transforms = s->svc->tls_client != NULL ||
		    s->svc->tls_server != NULL,
	};
	int fd[2] = { s->cfd, s->sfd };
	const struct px_relay_ops *ops;

	if (s->svc->tls_passthrough != NULL &&
	    px_session_send_hello(s, &lim) == -1)
		return -1;
	ops = s->svc->analyser->on_data != NULL &&
	    s->svc->analyser->driver == NULL ? &px_session_analysed_ops :
	    &px_session_relay_ops;

	s->relay_on = true;
	if (px_relay_start(&s->relay, s->w->base, &s->w->pipes, fd, mode,
	    half_close, &lim, ops, s) == -1)
		return -1;
	if (s->relay.mode == PX_RELAY_SPLICE)
		PX_SC_ADD(s->m, splice_sessions, 1);
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
	if (s->hello_rest != NULL) {
		evbuffer_free(s->hello_rest);
		s->hello_rest = NULL;
	}
	if (s->dconn_open[1])
		px_session_log_tls_failure(s, &s->dconn[1], "server");
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

static void
px_session_connected(struct px_session *s)
{
	const struct px_analyser *a = s->svc->analyser;

	s->state = PX_SS_RELAY;
	px_session_stop_timer(s);
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

	/* Watched for reading too: a failed connect comes with EPOLLERR,
	 * which libevent reports as readable and writable, so writable
	 * alone means connected without a getsockopt(SO_ERROR). (Readable:
	 * an error, or a server that spoke first: ask.) */
	err = what == EV_WRITE ? 0 : px_upstream_result((int)fd);
	if (err != 0) {
		PX_SC_ADD(s->m, connect_failures, 1);
		px_session_endf(s, PX_END_SERVER_FAIL, "connect-failed: %s",
		    strerror(err));
		return;
	}
	px_session_upstream_connected(s, true);
	px_session_server_up(s);
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
			PX_SC_ADD(s->m, origdst[PX_ORIGDST_SOCKOPT], 1);
			break;
		}
		if (px_session_ask_conntrack(s) == 0)
			return 1;
		PX_SC_ADD(s->m, origdst[PX_ORIGDST_FAILED], 1);
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

/* Some service of the listener takes this client: its <clients> (or
 * none) holds it. 0, or -1 after ending the session. */
static int
px_session_client_allowed(struct px_session *s)
{
	const struct px_group *g = s->svc->group;
	int16_t spec[PX_GROUP_MAX];
	struct px_zone_path zp;
	struct px_key k;
	size_t i;

	px_key_from_sockaddr(&k, (struct sockaddr *)&s->client);
	px_zones_path(&s->cfg->zones, &k, &zp);
	s->client_zone = px_zone_path_zone(&zp);
	px_group_specs(g, &s->cfg->zones, PX_DIM_CLIENT, &k, &zp, spec);
	for (i = 0; i < g->n; i++)
		if (spec[i] >= 0)
			return 0;
	px_metrics_denied(s, PX_DENY_ACL, 1);
	px_session_end(s, PX_END_POLICY, "denied: client not allowed");
	return -1;
}

/* The destination's zone and what <servers> lists make of it; with
 * several services on the listener, the one both ends select becomes
 * s->svc. 0, or -1 after ending the session. */
static int
px_session_choose(struct px_session *s)
{
	const struct px_group *g = s->svc->group;
	int16_t cspec[PX_GROUP_MAX], sspec[PX_GROUP_MAX];
	struct px_zone_path czp, szp;
	struct px_key ck, sk;
	int pick;

	px_key_from_sockaddr(&ck, (struct sockaddr *)&s->client);
	px_key_from_sockaddr(&sk, (struct sockaddr *)&s->dst);
	px_zones_path(&s->cfg->zones, &ck, &czp);
	px_zones_path(&s->cfg->zones, &sk, &szp);
	s->server_zone = px_zone_path_zone(&szp);
	px_group_specs(g, &s->cfg->zones, PX_DIM_CLIENT, &ck, &czp, cspec);
	px_group_specs(g, &s->cfg->zones, PX_DIM_SERVER, &sk, &szp, sspec);
	pick = px_group_choose(g, cspec, sspec, NULL);
	if (pick >= 0) {
		s->svc = g->svc[pick];
		px_metrics_session_rebind(s);
		s->svc_chosen = true;
		return 0;
	}
	if (g->n == 1) {
		px_metrics_denied(s, PX_DENY_SERVER, 1);
		px_session_end(s, PX_END_POLICY, "denied: server not allowed");
	} else {
		/* --check refuses configs that could be ambiguous (-2). */
		px_metrics_denied(s, PX_DENY_NO_SERVICE, 1);
		px_session_end(s, PX_END_POLICY, pick == -1 ?
		    "denied: no service for this client and server" :
		    "denied: no single service for this client and server");
	}
	return -1;
}

/* The destination is known: refuse the proxy's own address and what the
 * service lists refuse. 0 or -1. */
static int
px_session_check_dst(struct px_session *s)
{
	const struct px_service *svc = s->svc;

	if (svc->mode != PX_MODE_FIXED &&
	    px_is_direct(svc, (struct sockaddr *)&s->dst)) {
		px_metrics_denied(s, PX_DENY_DIRECT, 1);
		px_session_end(s, PX_END_POLICY,
		    "denied: direct connection to the proxy");
		return -1;
	}
	if (svc->mode != PX_MODE_FIXED && px_session_choose(s) == -1)
		return -1;
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
	px_session_stop_timer(s);
	if (dst == NULL || dst->ss_family == AF_UNSPEC) {
		PX_SC_ADD(s->m, origdst[PX_ORIGDST_FAILED], 1);
		px_session_end(s, PX_END_PROXY, "error: original destination "
		    "unknown (no SO_ORIGINAL_DST, no conntrack entry)");
		return;
	}
	PX_SC_ADD(s->m, origdst[PX_ORIGDST_CONNTRACK], 1);
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
	/* Not looked up yet (0 would name the first zone). */
	s->client_zone = s->server_zone = -1;
	gettimeofday(&s->start_tv, NULL);
	s->start_ms = px_now_ms(w);
	if ((size_t)salen <= sizeof(s->client))
		memcpy(&s->client, sa, (size_t)salen);
	evtimer_assign(&s->timer, w->base, px_session_timer_cb, s);
	TAILQ_INSERT_TAIL(&w->sessions, s, link);
	px_worker_load_add(w, 1);
	px_metrics_session_start(s, l);
	/* Counted before the checks so the close path is the same for all. */
	if (atomic_fetch_add_explicit(&px_live_sessions, 1,
	    memory_order_relaxed) >= s->cfg->max_sessions) {
		px_metrics_denied(s, PX_DENY_MAX_SESSIONS, 1);
		px_session_end(s, PX_END_POLICY, "denied: max-sessions");
		return;
	}
	if (px_session_client_allowed(s) == -1)
		return;
	/* (TCP_NODELAY: inherited from the listener.) */
	if (px_session_destination(s) != 0)
		return;		/* ended, or waiting for conntrack */
	px_session_proceed(s);
}

static void	px_session_connect_server(struct px_session *s);

static void
px_session_handshake_step(struct px_session *s)
{
	struct px_conn *c = &s->dconn[0];
	const char *sni;

	if (px_conn_handshake(c) == -1) {
		if (errno == EAGAIN && !s->kb_started &&
		    px_tls_keybridge_waiting(c, &sni)) {
			/* Keybridge: the server first, to see its
			 * certificate; the client waits at its hello. */
			s->kb_started = true;
			px_conn_read_enable(c, false);
			snprintf(s->client_sni, sizeof(s->client_sni), "%s", sni);
			s->tls_handshaking = false;
			if (s->timer_on) {
				evtimer_del(&s->timer);
				s->timer_on = false;
			}
			s->admitted = true;
			px_session_connect_server(s);
			return;
		}
		if (errno != EAGAIN)
			px_session_endf(s, PX_END_CLIENT_FAIL, "client-error: %s",
			    px_conn_strerror(c, errno));
		return;
	}
	px_conn_read_enable(c, false);
	s->tls_handshaking = false;
	px_session_stop_timer(s);
	if (s->kb_started) {
		px_session_connected(s);	/* both sides are up */
		return;
	}
	if ((sni = px_tls_client_sni(c)) != NULL)
		snprintf(s->client_sni, sizeof(s->client_sni), "%s", sni);
	s->admitted = true;
	if (s->svc->analyser->driver != NULL)
		px_session_connected(s);	/* it connects on its own */
	else
		px_session_connect_server(s);
}

/* Opens the session's own conn of a side (before any relay) with TLS in
 * its slot; cb drives its handshake. 0, or -1 after ending the session. */
static int
px_session_tls_conn(struct px_session *s, enum px_chan_end side,
    px_conn_cb cb, const struct px_tls_ctx *t, const struct px_tls_peer *peer)
{
	struct px_conn *c = &s->dconn[side];

	if (px_conn_open(c, s->w->base, side == PX_CHAN_CLIENT ? s->cfd :
	    s->sfd, cb, cb, s) == -1 || (s->dconn_open[side] = true,
	    px_tls_attach(c, t, peer) == -1)) {
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return -1;
	}
	return 0;
}

/* Keybridge: the server's handshake is done; the client gets a leaf for
 * what the server showed and its handshake goes on. */
static void
px_session_kb_server_step(struct px_session *s)
{
	struct px_conn *c = &s->dconn[1];
	char how[200];
	const char *why;

	if (px_conn_handshake(c) == -1) {
		if (errno != EAGAIN)
			px_session_endf(s, PX_END_SERVER_FAIL, "server-error: %s",
			    px_conn_strerror(c, errno));
		return;
	}
	px_conn_read_enable(c, false);
	s->kb_server_hs = false;
	px_session_stop_timer(s);
	if (px_tls_keybridge_present(&s->dconn[0], c, how, sizeof(how),
	    &why) == -1) {
		px_session_endf(s, PX_END_PROXY, "error: keybridge: %s", why);
		return;
	}
	s->kb_untrusted = !px_tls_verified(c);
	px_log(LOG_INFO, s->id, "tls-keybridge name=%s %s",
	    s->client_sni[0] != '\0' ? s->client_sni : "-", how);
	s->tls_handshaking = true;
	px_session_arm_timer(s, px_tls_handshake_timeout(s->svc->tls_client));
	px_conn_read_enable(&s->dconn[0], true);
	px_session_handshake_step(s);
}

static void
px_session_kb_server_cb(struct px_conn *c, void *arg)
{
	(void)c;
	px_session_kb_server_step(arg);
}

/* The server's socket is connected. */
static void
px_session_server_up(struct px_session *s)
{
	struct px_tls_peer peer = px_session_tls_peer(s);

	if (!s->kb_started) {
		px_session_connected(s);
		return;
	}
	peer.addr = (const struct sockaddr *)&s->server;
	peer.verify_later = true;
	px_session_stop_timer(s);
	peer.name = px_tls_server_name(s->svc->tls_server,
	    s->client_sni[0] != '\0' ? s->client_sni : NULL);
	if (px_session_tls_conn(s, PX_CHAN_SERVER, px_session_kb_server_cb,
	    s->svc->tls_server, &peer) == -1)
		return;
	s->kb_server_hs = true;
	px_session_arm_timer(s, px_tls_handshake_timeout(s->svc->tls_client));
	px_session_kb_server_step(s);
}

static void
px_session_handshake_cb(struct px_conn *c, void *arg)
{
	(void)c;
	px_session_handshake_step(arg);
}

/* Any analyser under TLS from the client: the handshake first, so that
 * what is not TLS never reaches a server or an analyser, the client's name
 * is known before the server's handshake needs it, and a failed handshake
 * ends the same way everywhere (phase=accept, the TLS reason, counted). */
static void
px_session_client_handshake(struct px_session *s)
{
	struct px_tls_peer peer = px_session_tls_peer(s);

	if (px_session_tls_conn(s, PX_CHAN_CLIENT, px_session_handshake_cb,
	    s->svc->tls_client, &peer) == -1)
		return;
	s->tls_handshaking = true;
	px_session_arm_timer(s, px_tls_handshake_timeout(s->svc->tls_client));
	px_session_handshake_step(s);
}

/* Passthrough: what the ClientHello says decides, before any server is
 * connected. Its bytes stay in dconn[0].in for px_session_send_hello. */
static void
px_session_hello_step(struct px_session *s)
{
	struct px_conn *c = &s->dconn[0];
	struct px_hello h;
	enum px_hello_result r;
	ssize_t n = 0;
	size_t len;
	long line;
	char alpn[PX_HELLO_ALPN_MAX * (PX_HELLO_ALPN_LEN + 1) + 1] = "";
	unsigned i;

	while ((len = evbuffer_get_length(c->in)) < PX_HELLO_MAX &&
	    (n = px_conn_recv(c, PX_HELLO_MAX - len)) > 0)
		;
	if (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != EINTR) {
		px_session_endf(s, PX_END_CLIENT_FAIL, "client-error: %s",
		    strerror(errno));
		return;
	}
	len = evbuffer_get_length(c->in);
	r = px_hello_parse(evbuffer_pullup(c->in, -1), len, PX_HELLO_MAX, &h);
	if (r == PX_HELLO_NEED_MORE) {
		if (c->eof)
			px_session_end(s, PX_END_CLIENT_FAIL, len == 0 ?
			    "client-closed" : "client-error: tls: closed inside "
			    "the ClientHello");
		return;
	}
	if (r != PX_HELLO_OK) {
		PX_SC_ADD(s->m, tls.passthrough[0], 1);
		if (r == PX_HELLO_NOT_TLS)
			PX_SC_ADD(s->m, tls.failures[0][PX_TLS_FAIL_NOT_TLS],
			    1);
		px_session_end(s, PX_END_POLICY, r == PX_HELLO_NOT_TLS ?
		    "denied: tls: not TLS" : r == PX_HELLO_TOO_BIG ?
		    "denied: tls: ClientHello over 16384 bytes" :
		    "denied: tls: malformed ClientHello");
		return;
	}
	for (i = 0; i < h.alpn_count && i < PX_HELLO_ALPN_MAX; i++) {
		if (i > 0)
			strcat(alpn, ",");
		strcat(alpn, h.alpn[i][0] != '\0' ? h.alpn[i] : "?");
	}
	if (!px_tls_passthrough_allows(s->svc->tls_passthrough, &h, &line)) {
		PX_SC_ADD(s->m, tls.passthrough[0], 1);
		if (line != 0)
			px_session_endf(s, PX_END_POLICY, "denied: tls sni=%s "
			    "alpn=%s (rule at line %ld)", h.has_sni ? h.sni : "-",
			    alpn[0] != '\0' ? alpn : "-", line);
		else
			px_session_endf(s, PX_END_POLICY, "denied: tls sni=%s "
			    "alpn=%s (%s)", h.has_sni ? h.sni : "-",
			    alpn[0] != '\0' ? alpn : "-", h.has_sni ?
			    "no rule: the default" : "no-sni");
		return;
	}
	PX_SC_ADD(s->m, tls.passthrough[1], 1);
	px_log(LOG_INFO, s->id, "tls-passthrough sni=%s alpn=%s verdict=accept",
	    h.has_sni ? h.sni : "-", alpn[0] != '\0' ? alpn : "-");
	if (h.has_sni)
		snprintf(s->client_sni, sizeof(s->client_sni), "%s", h.sni);
	px_conn_read_enable(c, false);
	s->tls_handshaking = false;
	px_session_stop_timer(s);
	s->admitted = true;
	px_session_connect_server(s);
}

static void
px_session_hello_cb(struct px_conn *c, void *arg)
{
	(void)c;
	px_session_hello_step(arg);
}

static void
px_session_read_hello(struct px_session *s)
{
	if (px_conn_open(&s->dconn[0], s->w->base, s->cfd,
	    px_session_hello_cb, px_session_hello_cb, s) == -1) {
		s->dconn_open[0] = true;
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return;
	}
	s->dconn_open[0] = true;
	s->tls_handshaking = true;
	px_session_arm_timer(s,
	    px_tls_handshake_timeout(s->svc->tls_passthrough));
	px_conn_read_enable(&s->dconn[0], true);
	px_session_hello_step(s);
}

/* Admitted, destination known: connect (or hand over to a driver). */
static void
px_session_proceed(struct px_session *s)
{
	const struct px_service *svc = s->svc;

	if (svc->analyser->driver != NULL && svc->tls_client == NULL) {
		s->admitted = true;
		px_session_connected(s);
		return;
	}
	if (svc->tls_client != NULL) {
		px_session_client_handshake(s);
		return;
	}
	if (svc->tls_passthrough != NULL) {
		px_session_read_hello(s);
		return;
	}
	s->admitted = true;
	px_session_connect_server(s);
}

static void
px_session_connect_server(struct px_session *s)
{
	struct px_worker *w = s->w;
	const struct px_service *svc = s->svc;
	const char *stage;
	bool in_progress;
	int sfd;

	sfd = px_upstream_connect(svc->has_mark ? &svc->mark : NULL,
	    (struct sockaddr *)&s->server,
	    px_sockaddr_len((struct sockaddr *)&s->server),
	    svc->spoof_source ? (struct sockaddr *)&s->client : NULL,
	    &in_progress, &stage);
	PX_SC_ADD(s->m, upstream_connects, 1);
	if (sfd == -1) {
		PX_SC_ADD(s->m, connect_failures, 1);
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
	s->connect_start_us = px_metrics_now_us();
	if (!in_progress) {
		px_session_upstream_connected(s, true);
		px_session_server_up(s);
		return;
	}
	event_assign(&s->conn_ev, w->base, sfd, EV_READ | EV_WRITE,
	    px_session_connect_cb, s);
	event_add(&s->conn_ev, NULL);
	px_session_arm_timer(s, svc->connect_timeout_ms);
}
