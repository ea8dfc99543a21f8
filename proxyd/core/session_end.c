/* How a session ends, one model for every analyser: who ended it and in
 * which phase (the verdict follows from those two), the end, finish, deny
 * and abort calls, the reaping of ended sessions and the session-end log
 * line. */
#include "session.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
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
#include "rules.h"
#include "tls.h"
#include "tls_hello.h"
#include "tcp_progress.h"
#include "upstream.h"
#include "worker.h"
#include "session_int.h"
#include "srclimit.h"

static void
px_session_log_end(struct px_session *s, const char *reason, const char *who)
{
	char client[PX_ADDRSTRLEN], dst[PX_ADDRSTRLEN], server[PX_ADDRSTRLEN];
	char zones[160] = "";
	struct timeval now, d;
	bool shared, deny;

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
	/* Which rule refused: rule= (before by=, so "by=... end=..." stay
	 * side by side for the lines' readers). */
	deny = px_end_verdict(s->end_by, s->end_phase) == PX_VERDICT_DENY;
	px_log(LOG_INFO, s->id, "session-end service=%s analyser=%s verdict=%s "
	    "client=%s dst=%s server=%s%s to-server=%llu to-client=%llu "
	    "duration=%ld.%03ld%s%s%s%s%s%s%s by=%s phase=%s end=%s",
	    shared ? "-" : s->svc->name, shared ? "-" : s->svc->analyser->name,
	    px_end_verdict_name(px_end_verdict(s->end_by, s->end_phase)),
	    px_sockaddr_str((struct sockaddr *)&s->client, client, sizeof(client)),
	    px_sockaddr_str((struct sockaddr *)&s->dst, dst, sizeof(dst)),
	    px_sockaddr_str((struct sockaddr *)&s->server, server, sizeof(server)),
	    zones,
	    (unsigned long long)s->bytes[PX_TO_SERVER],
	    (unsigned long long)s->bytes[PX_TO_CLIENT],
	    (long)d.tv_sec, (long)(d.tv_usec / 1000),
	    px_session_ja4(s)[0] != '\0' ? " ja4=" : "", px_session_ja4(s),
	    px_session_ja4s(s)[0] != '\0' ? " ja4s=" : "", px_session_ja4s(s),
	    deny ? " rule=" : "", !deny ? "" : s->rule != NULL &&
	    s->rule[0] != '\0' ? s->rule : "builtin", who, px_end_by_name(s->end_by),
	    px_end_phase_name(s->end_phase), reason);
}

/* close() then sends an RST and drops anything unsent. */
static void
px_socket_abort(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (fd != -1)
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

/* A client answered with its protocol's refusal at accept: what it sent
 * already is read and dropped (closing with unread bytes would send a
 * reset that may overtake the answer), then our side ends with a FIN. */
static void
px_socket_refused_close(int fd)
{
	char junk[4096];
	int i;

	for (i = 0; i < 16; i++)
		if (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) <= 0)
			break;
	(void)shutdown(fd, SHUT_WR);
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

/* The first end or finish decides who and when. The client's TLS
 * handshake is part of its admission (phase=accept) also where keybridge
 * resumes it after the server's handshake, the server connected: a client
 * that refuses the leaf or stalls ends as under terminate. */
static void
px_session_mark_end(struct px_session *s, enum px_end_by by)
{
	if (s->end_marked)
		return;
	s->end_marked = true;
	s->end_by = by;
	s->end_phase = !s->admitted || s->tls_handshaking ? PX_PHASE_ACCEPT :
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
	const struct px_fp_rule *hit = NULL;
	char fp_reason[160], who[192] = "";

	if (s->state == PX_SS_CLOSED)
		return;
	/* A client's TLS started by the analyser (FTP's AUTH TLS), refused
	 * by a <fingerprint>: the analyser saw a failed handshake, the
	 * policy refused it. */
	if (by == PX_END_CLIENT_FAIL && s->relay_on &&
	    s->relay->conn_open[0])
		hit = px_tls_fp_denied(px_relay_conn(s->relay, 0));
	if (hit != NULL) {
		by = PX_END_POLICY;
		reason = px_session_fp_reason(s, hit, fp_reason,
		    sizeof(fp_reason));
	}
	px_session_mark_end(s, by);
	s->state = PX_SS_CLOSED;
	if (s->ct_waiting) {
		TAILQ_REMOVE(&w->ct_wait, s, ct_link);
		s->ct_waiting = false;
	}
	if (s->an_state != NULL && s->svc->analyser->who != NULL &&
	    px_log_enabled(LOG_INFO))
		s->svc->analyser->who(s, s->an_state, who, sizeof(who));
	if (who[0] == '\0' && px_log_enabled(LOG_INFO)) {
		char user[128];

		/* No analyser's proof: a client certificate's (identity=). */
		if (px_session_client_identity(s, user, sizeof(user)))
			snprintf(who, sizeof(who), " user=%s auth=certificate",
			    user);
	}
	if (s->an_state != NULL && s->svc->analyser->on_close != NULL)
		s->svc->analyser->on_close(s, s->an_state);
	px_channels_close(&s->chan_host);
	px_session_close_notify(s);
	px_session_release_io(s);	/* settles s->bytes before the log */
	if (s->sl_held) {
		px_sl_release(&s->sl_ref);
		s->sl_held = false;
	}
	if (s->limited && s->limit_answered)
		px_socket_refused_close(s->cfd);
	else if (s->limited)
		px_socket_abort(s->cfd);	/* refused: a reset at once */
	else if (!s->handed)
		px_session_log_end(s, reason, who);	/* (handed: the new one's) */
	if (w->handing && !s->handed)
		PX_HO_COUNT(w, ho_drained);
	if (event_initialized(&s->conn_ev)) {
		/* A forward-mode connect still under way
		 * (px_session_server_connect): its socket is not s->sfd yet,
		 * and nothing else will close it. */
		if (event_pending(&s->conn_ev, EV_READ | EV_WRITE, NULL) &&
		    event_get_fd(&s->conn_ev) != s->sfd)
			close((int)event_get_fd(&s->conn_ev));
		event_del(&s->conn_ev);
	}
	if (s->timer_on)
		evtimer_del(&s->timer);
	/* A relayed session ends with a FIN only when its ends finished.
	 * Errors, timeouts and shutdown reset what is left, so a peer never
	 * takes a truncated stream for a whole one. (A denied or failed
	 * session relayed nothing: a plain close says enough.) */
	if (relayed && !s->finished && !s->handed &&
	    s->end_by != PX_END_CLIENT && s->end_by != PX_END_SERVER) {
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
	if (w->draining && !w->handing && TAILQ_EMPTY(&w->sessions))
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
		free(s->dconn);
		free(s->client_sni);
		free(s->ja4);
		free(s->rule);
		free(s->finish_reason);
		if (s->relay != NULL)
			px_relay_dispose(s->relay);
		free(s->relay);
		free(s);
	}
	px_tls_trim_if_due();
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

/* A driver analyser's conns hold nothing unwritten: its client's and
 * the server conns it took. */
static bool
px_session_driver_flushed(const struct px_session *s)
{
	const struct px_upconn *u;

	if (s->drv != NULL)
		LIST_FOREACH(u, &s->drv->ups, link)
			if (evbuffer_get_length(u->c.out) != 0)
				return false;
	return s->dconn_open[0] && evbuffer_get_length(s->dconn[0].out) == 0;
}

void
px_session_finish(struct px_session *s, enum px_end_by by, const char *reason)
{
	if (s->state == PX_SS_CLOSED || s->finishing)
		return;
	px_session_mark_end(s, by);
	/* Kept for the end line, which comes later: allocated, since few
	 * sessions finish this way and an idle one should not carry it. */
	s->finish_reason = strdup(reason);
	if (s->finish_reason == NULL) {
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return;
	}
	if (s->state == PX_SS_RELAY && !s->relay_on) {
		/* A driver analyser finishes once it wrote its last reply:
		 * then a FIN, not a reset. */
		s->finished = px_session_driver_flushed(s);
		px_session_end(s, by, s->finish_reason);
		return;
	}
	if (s->state != PX_SS_RELAY || s->relay->mode != PX_RELAY_BUFFERED) {
		px_session_end(s, by, s->finish_reason);
		return;
	}
	s->finishing = true;
	s->finished = true;	/* a FIN after the reply, not an RST */
	if (s->timer_on)
		evtimer_del(&s->timer);
	px_session_arm_timer(s, PX_FINISH_GRACE_MS);
	px_relay_finish(s->relay);
}
