/* A session's own part (session.h): the worker's clock (px_now_ms), its
 * timers, the relay it hands a stream analyser to (and the relay's reports
 * back: bytes, verdicts, the end), and the connect to the server.
 * Admission, TLS, the end and what analysers ask are the other session
 * files (session_int.h). */
#include "session.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
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
#include "session_int.h"

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

/* The buffer the client's JA4 is written into, made on first use (NULL
 * when memory is short: the session then has no fingerprint). */
char *
px_session_ja4_buf(struct px_session *s)
{
	if (s->ja4 == NULL)
		s->ja4 = calloc(1, PX_SESSION_JA4S + PX_JA4S_LEN + 1);
	return s->ja4;
}

struct px_tls_peer
px_session_tls_peer(struct px_session *s)
{
	const struct px_service *svc = s->svc;
	char *ja4s = NULL;

	/* Only a side with TLS writes its fingerprint: no buffer for the
	 * rest. */
	if ((svc->tls_server != NULL || svc->starttls_server != NULL) &&
	    px_session_ja4_buf(s) != NULL)
		ja4s = s->ja4 + PX_SESSION_JA4S;
	return (struct px_tls_peer){ .session_id = s->id, .tw = &s->w->tls,
	    .n = &s->m->tls, .fp = &svc->fingerprints,
	    .ja4 = svc->tls_client != NULL || svc->starttls_client != NULL ?
	    px_session_ja4_buf(s) : NULL, .ja4s = ja4s };
}

void
px_session_arm_timer(struct px_session *s, uint64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
	    .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(&s->timer, &tv);
	s->timer_on = true;
}

void
px_session_stop_timer(struct px_session *s)
{
	if (s->timer_on) {
		evtimer_del(&s->timer);
		s->timer_on = false;
	}
}

void
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
		/* (A passthrough ClientHello is no handshake of ours.) A
		 * client that sent nothing fails its handshake as one that
		 * stopped in it: counted alike. */
		if (s->dconn[0].tf == NULL && s->svc->tls_client != NULL &&
		    px_session_client_tls(s) == -1)
			return;
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
	if (event_initialized(&s->conn_ev) &&
	    event_pending(&s->conn_ev, EV_READ | EV_WRITE, NULL)) {
		/* Forward mode's server connect (px_session_server_connect):
		 * the session relays already, its connect is as timed. */
		PX_SC_ADD(s->m, connect_failures, 1);
		px_session_upstream_connected(s, false);
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
	if (s->drv != NULL) {
		const struct px_upconn *u;

		LIST_FOREACH(u, &s->drv->ups, link)
			progress += px_tcp_progress(u->c.fd);
	}
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
	/* Forward mode's stand-in (px_session_connect_server) is no server:
	 * the TLS goes on the one connected later (px_session_later_cb). */
	if (s->svc->tls_server == NULL ||
	    (px_session_server_later(s) && c->fd == s->sfd))
		return 0;
	peer.name = px_tls_server_name(s->svc->tls_server,
	    px_session_server_later(s) ? NULL : s->client_sni);
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
int
px_session_send_hello(struct px_session *s, struct px_relay_limits *lim)
{
	struct evbuffer *in;
	size_t len;
	int n;

	if (!s->dconn_open[0])
		return 0;
	in = s->dconn[0].in;
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

	if (s->relay == NULL &&
	    (s->relay = malloc(sizeof(*s->relay))) == NULL)
		return -1;
	s->relay_on = true;
	if (px_relay_start(s->relay, s->w->base, &s->w->pipes, fd, mode,
	    half_close, &lim, ops, s) == -1)
		return -1;
	if (s->relay->mode == PX_RELAY_SPLICE)
		PX_SC_ADD(s->m, splice_sessions, 1);
	return 0;
}

/* Frees the relay and a driver's conns; what the kernel never took of the
 * buffered path's queues is taken off the totals. */
void
px_session_release_io(struct px_session *s)
{
	uint64_t unsent[2];
	int d;

	if (s->relay_on) {
		/* (Its memory goes with the session's, at the reap: the
		 * relay's own code may still be on the stack, this being
		 * called from one of its callbacks.) */
		px_relay_free(s->relay, unsent);
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
	px_drv_free(s);
}

void
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

void
px_session_connect_server(struct px_session *s)
{
	struct px_worker *w = s->w;
	const struct px_service *svc = s->svc;
	const char *stage;
	bool in_progress;
	int sfd;

	if (svc->mode == PX_MODE_FORWARD && svc->analyser->driver == NULL) {
		/* A stream analyser in forward mode learns the server from
		 * the client (FTP's USER name@server) and connects it then
		 * (px_session_server_connect). Until then its relay's server
		 * side is an eventfd: never readable, never at its end. */
		if ((sfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
			px_session_endf(s, PX_END_PROXY, "error: eventfd: %s",
			    strerror(errno));
			return;
		}
		s->sfd = sfd;
		px_session_connected(s);
		return;
	}
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

void
px_session_server_tls_failed(struct px_session *s, const struct px_conn *c,
    int err)
{
	px_session_endf(s, PX_END_SERVER_FAIL, "server-error: %s",
	    px_conn_strerror(c, err));
}

/* Forward mode, a stream analyser: the server its client named, connected
 * now and put in the stand-in's place (px_session_connect_server). */
static void
px_session_later_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_session *s = arg;
	int err = what == EV_WRITE ? 0 : px_upstream_result((int)fd);

	if (err != 0) {
		close((int)fd);
		PX_SC_ADD(s->m, connect_failures, 1);
		px_session_upstream_connected(s, false);
		px_session_endf(s, PX_END_SERVER_FAIL, "connect-failed: %s",
		    strerror(err));
		return;
	}
	px_session_upstream_connected(s, true);
	/* The connect's deadline over: the idle one again. */
	px_session_stop_timer(s);
	if (s->cfg->idle_timeout_ms != 0)
		px_session_arm_timer(s, s->cfg->idle_timeout_ms);
	if (!s->relay_on || px_relay_set_server(s->relay, (int)fd) == -1) {
		close((int)fd);
		if (s->state != PX_SS_CLOSED)
			px_session_end(s, PX_END_PROXY, "error: the server "
			    "connection could not take the relay's place");
		return;
	}
	close(s->sfd);		/* the eventfd that stood in */
	s->sfd = (int)fd;
}

int
px_session_server_connect(struct px_session *s, const struct sockaddr *dst)
{
	const struct px_service *svc = s->svc;
	const char *stage;
	bool in_progress;
	int fd;

	if (!px_session_server_later(s) || !s->relay_on ||
	    event_initialized(&s->conn_ev)) {
		errno = EBUSY;
		return -1;
	}
	fd = px_upstream_connect(svc->has_mark ? &svc->mark : NULL, dst,
	    px_sockaddr_len(dst), NULL, &in_progress, &stage);
	PX_SC_ADD(s->m, upstream_connects, 1);
	if (fd == -1) {
		PX_SC_ADD(s->m, connect_failures, 1);
		return -1;
	}
	px_session_set_server(s, dst);
	s->connect_start_us = px_metrics_now_us();
	event_assign(&s->conn_ev, s->w->base, fd, EV_READ | EV_WRITE,
	    px_session_later_cb, s);
	if (!in_progress) {
		/* Connected at once (loopback): finished on the loop's next
		 * turn, not inside the analyser's call, which a failure there
		 * (the session ended, its state freed) would pull from under
		 * it. Ending the session before then closes fd (session_end.c:
		 * an active conn_ev is pending). */
		event_active(&s->conn_ev, EV_WRITE, 0);
		return 0;
	}
	event_add(&s->conn_ev, NULL);
	/* upstream/@connect-timeout, as for any server (the idle timer's
	 * place until then: px_session_timer_cb). */
	px_session_arm_timer(s, svc->connect_timeout_ms);
	return 0;
}
