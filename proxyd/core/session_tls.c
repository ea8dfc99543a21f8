/* TLS before the analyser: the client's handshake (terminate, keybridge
 * with the server's first), a passthrough ClientHello read and judged,
 * then the analyser's turn (px_session_proceed). */
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
#include "rules.h"
#include "tls.h"
#include "tls_hello.h"
#include "ja4.h"
#include "tcp_progress.h"
#include "upstream.h"
#include "worker.h"
#include "session_int.h"

/* The client's SNI, kept for the server side and the log (allocated: few
 * sessions have one). 0, or -1 after ending the session. */
static int
px_session_keep_sni(struct px_session *s, const char *sni)
{
	if (s->client_sni != NULL || sni[0] == '\0')
		return 0;
	if ((s->client_sni = strndup(sni, 255)) == NULL) {
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return -1;
	}
	return 0;
}

const char *
px_session_fp_reason(struct px_session *s, const struct px_fp_rule *hit,
    char *buf, size_t size)
{
	char ref[PX_RULE_REF_MAX];

	px_session_set_rule(s, px_rule_ref_at(hit->line, hit->label,
	    px_session_policy_file(s), ref, sizeof(ref)));
	snprintf(buf, size, "denied: tls ja4=%s (<fingerprint> at line %ld%s%s)",
	    px_session_ja4(s)[0] != '\0' ? s->ja4 : "-", hit->line,
	    hit->list != NULL ? ", list " : "",
	    hit->list != NULL ? hit->list : "");
	return buf;
}

/* A <fingerprint> rule refused the client's ClientHello: a policy deny,
 * said with the rule, before anything reached a server. */
static void
px_session_fp_deny(struct px_session *s, const struct px_fp_rule *hit)
{
	char reason[160];

	px_session_end(s, PX_END_POLICY, px_session_fp_reason(s, hit, reason,
	    sizeof(reason)));
}

static void
px_session_handshake_step(struct px_session *s)
{
	const struct px_fp_rule *hit;
	struct px_conn *c = &s->dconn[0];
	const char *sni;

	if (px_conn_handshake(c) == -1) {
		if (errno == EAGAIN) {
			/* The hello read: its JA4 known (per="ja4"). */
			if (px_session_limits_hello(s, false) == -1)
				return;
			errno = EAGAIN;
		}
		if (errno == EAGAIN && !s->kb_started &&
		    px_tls_keybridge_waiting(c, &sni)) {
			/* Keybridge: the server first, to see its
			 * certificate; the client waits at its hello. */
			s->kb_started = true;
			px_conn_read_enable(c, false);
			if (px_session_keep_sni(s, sni) == -1)
				return;
			s->tls_handshaking = false;
			if (s->timer_on) {
				evtimer_del(&s->timer);
				s->timer_on = false;
			}
			s->admitted = true;
			px_session_connect_server(s);
			return;
		}
		if (errno != EAGAIN && (hit = px_tls_fp_denied(c)) != NULL)
			px_session_fp_deny(s, hit);
		else if (errno != EAGAIN)
			px_session_endf(s, PX_END_CLIENT_FAIL, "client-error: %s",
			    px_conn_strerror(c, errno));
		return;
	}
	if (px_session_limits_hello(s, true) == -1)
		return;
	px_conn_read_enable(c, false);
	s->tls_handshaking = false;
	px_session_stop_timer(s);
	if (s->kb_started) {
		px_session_connected(s);	/* both sides are up */
		return;
	}
	if ((sni = px_tls_client_sni(c)) != NULL &&
	    px_session_keep_sni(s, sni) == -1)
		return;
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
	struct px_conn *c;

	if (px_session_dconn(s) == -1) {
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return -1;
	}
	c = &s->dconn[side];
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
	    s->client_sni != NULL ? s->client_sni : "-", how);
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
void
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
	    s->client_sni);
	if (px_session_tls_conn(s, PX_CHAN_SERVER, px_session_kb_server_cb,
	    s->svc->tls_server, &peer) == -1)
		return;
	s->kb_server_hs = true;
	px_session_arm_timer(s, px_tls_handshake_timeout(s->svc->tls_client));
	px_session_kb_server_step(s);
}

static void	px_session_client_hello_cb(struct px_conn *c, void *arg);

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
void
px_session_client_handshake(struct px_session *s)
{
	/* No TLS until the client's first bytes (or its end): a handshake
	 * holds some 43 KB in OpenSSL from its first step, which a client
	 * that connects and says nothing need not cost. */
	if (px_session_dconn(s) == -1 || px_conn_open(&s->dconn[0],
	    s->w->base, s->cfd, px_session_client_hello_cb,
	    px_session_client_hello_cb, s) == -1) {
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return;
	}
	s->dconn_open[0] = true;
	s->tls_handshaking = true;
	px_session_arm_timer(s, px_tls_handshake_timeout(s->svc->tls_client));
	px_conn_read_enable(&s->dconn[0], true);
}

int
px_session_client_tls(struct px_session *s)
{
	struct px_tls_peer peer = px_session_tls_peer(s);

	s->dconn[0].on_readable = s->dconn[0].on_writable =
	    px_session_handshake_cb;
	if (px_tls_attach(&s->dconn[0], s->svc->tls_client, &peer) == -1) {
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return -1;
	}
	return 0;
}

static void
px_session_client_hello_cb(struct px_conn *c, void *arg)
{
	struct px_session *s = arg;

	(void)c;
	if (px_session_client_tls(s) == 0)
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
	const struct px_rule *hit;
	const struct px_fp_rule *fp;
	char ref[PX_RULE_REF_MAX];
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
	/* The same bytes and function as a terminated hello's (tls.c). */
	if (px_session_ja4_buf(s) != NULL)
		(void)px_ja4_records(evbuffer_pullup(c->in, -1), h.consumed,
		    s->ja4);
	if ((fp = px_fp_match(&s->svc->fingerprints, px_session_ja4(s))) !=
	    NULL &&
	    fp->action == PX_ACT_DENY) {
		PX_SC_ADD(s->m, tls.passthrough[0], 1);
		PX_SC_ADD(s->m, tls.fingerprint_denied, 1);
		px_session_fp_deny(s, fp);
		return;
	}
	if (!px_tls_passthrough_allows(s->svc->tls_passthrough, &h, &hit)) {
		PX_SC_ADD(s->m, tls.passthrough[0], 1);
		px_session_set_rule(s, h.has_sni ? px_rule_ref(hit,
		    px_session_policy_file(s), ref, sizeof(ref)) : "tls/@no-sni");
		if (hit != NULL)
			px_session_endf(s, PX_END_POLICY, "denied: tls sni=%s "
			    "alpn=%s (rule at line %ld)", h.has_sni ? h.sni : "-",
			    alpn[0] != '\0' ? alpn : "-", hit->line);
		else
			px_session_endf(s, PX_END_POLICY, "denied: tls sni=%s "
			    "alpn=%s (%s)", h.has_sni ? h.sni : "-",
			    alpn[0] != '\0' ? alpn : "-", h.has_sni ?
			    "no rule: the default" : "no-sni");
		return;
	}
	if (px_session_limits_hello(s, true) == -1)
		return;
	PX_SC_ADD(s->m, tls.passthrough[1], 1);
	px_log(LOG_INFO, s->id, "tls-passthrough sni=%s alpn=%s verdict=accept "
	    "ja4=%s", h.has_sni ? h.sni : "-", alpn[0] != '\0' ? alpn : "-",
	    px_session_ja4(s)[0] != '\0' ? s->ja4 : "-");
	if (h.has_sni && px_session_keep_sni(s, h.sni) == -1)
		return;
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
	if (px_session_dconn(s) == -1) {
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return;
	}
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
void
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
