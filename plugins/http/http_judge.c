/* http: a parsed head judged, the one policy path of both directions.
 * A request head (an HTTP/1.1 client's, or an HTTP/2 stream's as its leg
 * reads it) is parsed once, its target made canonical, and goes through
 * the source limits, <auth>, the method/url/header rules, the upload
 * scan and the choice of a server (the pool or an HTTP/2 origin); a
 * response head (an HTTP/1.1 server's parsed here, or an HTTP/2 origin's
 * as fields, http_h2_origin.c) through its framing, the download scan and
 * the head the client gets. The state machine that feeds them and acts on
 * their outcome is http.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "conn.h"
#include "http_h2_origin.h"
#include "http_head.h"
#include "auth.h"
#include "http_int.h"
#include "log.h"
#include "parse.h"

/* The scanner's copy of an HTTP/2 server's head as the client gets it
 * (http_judge_response), one per worker, freed at its exit. */
static _Thread_local struct evbuffer *http_scan_head_buf;

void
http_thread_exit_heads(void)
{
	if (http_scan_head_buf != NULL)
		evbuffer_free(http_scan_head_buf);
	http_scan_head_buf = NULL;
}

/* ---- request ----------------------------------------------------------- */

/* A head was taken (or refused): the next one is looked at from its
 * start. */
void
http_head_restart(size_t *scan, struct http_head_scan *judge)
{
	*scan = 0;
	memset(judge, 0, sizeof(*judge));
}

/* The origin-form target made canonical (http_target_canon) into
 * h->tx.canon, and h->tx.path, for the log, what the url rules judge: the path
 * and the query. 0, or the status to refuse the request with (*why). */
static int
http_canon_target(struct http_state *h, const char *target, size_t tlen,
    struct http_target *ct, const char **why)
{
	size_t want = tlen + 3 > 256 ? tlen + 3 : 256, len;
	char *nb;
	int rc;

	if (h->tx.canon_size < want) {
		if ((nb = realloc(h->tx.canon, want)) == NULL) {
			*why = "out of memory";
			return 500;
		}
		h->tx.canon = nb;
		h->tx.canon_size = want;
	}
	if ((rc = http_target_canon(target, tlen, h->pol->merge_slashes,
	    h->tx.canon, h->tx.canon_size, ct, why)) != 0)
		return rc;
	http_copy(h->tx.path, sizeof(h->tx.path), ct->path, ct->plen);
	len = strlen(h->tx.path);
	if (ct->query != NULL && len + 1 < sizeof(h->tx.path)) {
		h->tx.path[len] = '?';
		http_copy(h->tx.path + len + 1, sizeof(h->tx.path) - len - 1,
		    ct->query, strlen(ct->query));
	}
	return 0;
}

/* Over <source-limits requests=> (the core counted and logged it): 429,
 * and the request goes nowhere. The connection is kept when nothing of
 * this request is left to read and nothing came after it yet (no body,
 * no pipelined request, not CONNECT, whose tunnel bytes may follow at
 * once): the client's next request is then read as usual. */
static void
http_limited(struct http_state *h, const struct http_head *m,
    size_t head_len, uint32_t retry_s, bool may_keep)
{
	const struct http_policy *p = h->pol;
	bool keep = may_keep && p->keepalive_client && !m->conn_close &&
	    (m->minor == 1 || m->conn_keep_alive) &&
	    (p->max_requests == 0 || h->nreq < p->max_requests) &&
	    !m->chunked && m->content_length <= 0 && !h->tx.is_connect &&
	    evbuffer_get_length(h->c->in) == head_len &&
	    !px_session_config_stale(h->s);

	px_session_count(h->s, HTTP_C_DENIED, 1);
	http_reply_limited(h, retry_s, keep);
	http_refusal_sent(h, head_len, keep,
	    "denied: http 429: source-limits requests");
}

/* A complete request head is at the front of the client input. */
void
http_handle_request(struct http_state *h, const char *buf, size_t head_len)
{
	static _Thread_local struct http_head m;
	const struct http_policy *p = h->pol;
	struct evbuffer *cin = h->c->in;
	struct sockaddr_storage dst, hostaddr;
	const char *why = NULL, *target, *auth = NULL;
	size_t tlen, alen = 0;
	uint16_t port = 0, hostport = 0;
	int rc;
	bool forward = px_session_dst(h->s)->sa_family == 0;
	struct http_hit hit;
	struct http_target ct = { .path = NULL };
	uint32_t retry;
	/* Handled again once its authentication was answered
	 * (http_auth.c): counted and timed once. */
	bool replay = h->auth_replay;
	unsigned i;

	h->auth_replay = false;
	if (!replay)
		gettimeofday(&h->tx.t_start, NULL);
	h->tx.verdict = NULL;
	h->tx.rule[0] = '\0';
	h->tx.status = 0;
	h->tx.req_bytes = h->tx.resp_bytes = h->tx.interim_bytes = 0;
	h->tx.host[0] = '\0';
	h->tx.retried = false;
	h->tx.grpc = false;
	h->tx.grpc_status = -1;
	/* The port the request is for (a 405's Allow depends on it). */
	h->tx.port = px_sockaddr_port(px_session_dst(h->s));
	rc = http_parse_head(buf, head_len, true, &p->lim, &m, &why);
	http_copy(h->tx.method, sizeof(h->tx.method), rc == 0 ? m.method : "-",
	    rc == 0 ? m.mlen : 1);
	http_copy(h->tx.path, sizeof(h->tx.path), rc == 0 ? m.target : "-",
	    rc == 0 ? m.tlen : 1);
	if (!replay) {
		px_session_count(h->s, HTTP_C_REQUESTS, 1);
		h->nreq++;
	}
	if (rc != 0) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(h, rc, why);
		return;
	}
	/* A gRPC call's refusals are answered as gRPC (http_grpc.c). */
	if (http_grpc_request(h, &m, &why) == -1) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(h, 400, why);
		return;
	}
	if (!http_policy_codings(p, &m)) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(h, 501, "transfer coding not allowed");
		return;
	}
	h->client_10 = m.minor == 0;
	h->tx.is_head = http_token_eq(m.method, m.mlen, "HEAD");
	h->tx.is_connect = http_token_eq(m.method, m.mlen, "CONNECT");
	target = m.target;
	tlen = m.tlen;
	/* A Host without a port means the scheme's: https when the client
	 * spoke TLS to us (RFC 9110 4.2.2). */
	if (m.host != -1 && http_host_authority(h, m.hdr[m.host].val,
	    m.hdr[m.host].vlen, px_session_client_via_tls(h->s) ? 443 : 80,
	    &hostaddr, &hostport) == -1) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(h, 400, "malformed Host");
		return;
	}
	if (h->tx.is_connect) {
		if (!forward) {
			http_error(h, 405, "CONNECT is only for forward mode");
			return;
		}
		if (http_authority(m.target, m.tlen, 0, h->tx.host,
		    sizeof(h->tx.host), &dst, &port) == -1 || port == 0) {
			http_error(h, 400, "malformed CONNECT target");
			return;
		}
	} else if (http_head_origin_form(m.target, m.tlen, &auth, &alen,
	    &target, &tlen)) {
		/* absolute-form, in every mode: its authority replaces Host
		 * (RFC 9112 3.2.2); forward mode connects to it, the others
		 * to where they always do. */
		if (http_authority(auth, alen, 80, h->tx.host, sizeof(h->tx.host),
		    &hostaddr, &hostport) == -1) {
			px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
			http_error(h, 400, "malformed URI authority");
			return;
		}
		if (forward) {
			memcpy(&dst, &hostaddr, sizeof(dst));
			port = hostport;
		}
	} else if (forward) {
		http_error(h, 400, "forward mode needs an absolute URI");
		return;
	} else if (m.tlen == 0 || (m.target[0] != '/' &&
	    !(m.tlen == 1 && m.target[0] == '*'))) {
		http_error(h, 400, "request target is not in origin form");
		return;
	}
	/* The url rules judge the path as the server will read it, and the
	 * server is sent that path (docs/CONFIG.md); what cannot be judged
	 * so is refused. CONNECT's target is an authority. */
	if (!h->tx.is_connect &&
	    (rc = http_canon_target(h, target, tlen, &ct, &why)) != 0) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(h, rc, why);
		return;
	}
	if (!h->tx.is_connect && !forward) {
		memcpy(&dst, px_session_dst(h->s), sizeof(dst));
		port = px_sockaddr_port((struct sockaddr *)&dst);
		/* Transparent: the Host (or authority) the client names must
		 * be where it was going (an IP literal is checked, a name by
		 * its port). */
		if (p->check_host && (m.host != -1 || auth != NULL) &&
		    h->transparent &&
		    (hostport != port || (hostaddr.ss_family != 0 &&
		    !px_sockaddr_same_host((struct sockaddr *)&hostaddr,
		    (struct sockaddr *)&dst)))) {
			px_session_count(h->s, HTTP_C_DENIED, 1);
			http_error(h, 400, "Host does not match the destination");
			return;
		}
	}
	h->tx.port = port;
	if (!replay && !px_session_request_allowed(h->s,
	    http_auth_id(h) != NULL ? http_auth_id(h)->user : NULL, &retry,
	    h->tx.rule, sizeof(h->tx.rule))) {
		http_limited(h, &m, head_len, retry, true);
		return;
	}
	/* <auth>: 0 go on, else answered or waiting for the directory. */
	if (http_auth_request(h, &m, head_len) != 0)
		return;
	/* <source-limits per="user">: the connection counts as the user's
	 * from its first proven request; over the user's sessions= or
	 * connections=, 429 and the connection ends. */
	if (http_auth_id(h) != NULL && !px_session_user_allowed(h->s,
	    http_auth_id(h)->user, &retry, h->tx.rule, sizeof(h->tx.rule))) {
		http_limited(h, &m, head_len, retry, false);
		return;
	}
	if ((rc = http_policy_check_as(p, http_auth_id(h), m.method, m.mlen,
	    port, h->tx.host,
	    h->tx.is_connect ? h->tx.path : ct.path, ct.query, &why, &hit)) != 0) {
		px_session_count(h->s, HTTP_C_DENIED, 1);
		if (hit.line == 0)
			snprintf(h->tx.rule, sizeof(h->tx.rule), "default");
		else
			px_rule_ref_at(hit.line, hit.label,
			    px_session_policy_file(h->s), h->tx.rule,
			    sizeof(h->tx.rule));
		if (rc == -1) {
			h->tx.verdict = "abort";
			px_session_set_rule(h->s, h->tx.rule);
			http_abort(h, PX_END_POLICY,
			    "denied: http request aborted by policy");
			return;
		}
		http_error(h, rc, why);
		return;
	}
	/* Framing of the request body. */
	h->tx.req_body = HTTP_BODY_NONE;
	if (m.chunked) {
		h->tx.req_body = HTTP_BODY_CHUNKED;
		memset(&h->tx.req_chunk, 0, sizeof(h->tx.req_chunk));
		h->tx.req_chunk.step = true;
	} else if (m.content_length > 0) {
		h->tx.req_body = HTTP_BODY_LENGTH;
		h->tx.req_left = (uint64_t)m.content_length;
		if (p->max_body != 0 && h->tx.req_left > p->max_body) {
			http_error(h, 413, "request body over max-body");
			return;
		}
	}
	if (h->tx.req_body != HTTP_BODY_NONE &&
	    http_scan_partial(h, &m, PX_TO_SERVER) == -1)
		return;
	if (http_scan_request(h, h->tx.req_body == HTTP_BODY_LENGTH ?
	    (int64_t)h->tx.req_left : -1) == -1)
		return;
	h->tx.te_trailers = false;
	for (i = 0; i < m.nhdr; i++)
		if (m.hdr[i].id == HTTP_F_TE &&
		    http_list_has(m.hdr[i].val, m.hdr[i].vlen, "trailers"))
			h->tx.te_trailers = true;
	h->tx.upgrade_ok = m.upgrade != -1 && m.conn_upgrade && !h->tx.is_connect &&
	    http_policy_upgrade(p, m.hdr[m.upgrade].val, m.hdr[m.upgrade].vlen);
	h->client_keep = p->keepalive_client && !m.conn_close &&
	    (m.minor == 1 || m.conn_keep_alive) &&
	    (p->max_requests == 0 || h->nreq < p->max_requests);
	h->tx.replayable = h->tx.req_body == HTTP_BODY_NONE && !h->tx.is_connect &&
	    (h->tx.is_head || http_token_eq(m.method, m.mlen, "GET") ||
	    http_token_eq(m.method, m.mlen, "OPTIONS") ||
	    http_token_eq(m.method, m.mlen, "DELETE") ||
	    http_token_eq(m.method, m.mlen, "PUT") ||
	    http_token_eq(m.method, m.mlen, "TRACE"));

	/* The head as it will go out, whatever connection carries it. */
	evbuffer_drain(h->tx.head_out, evbuffer_get_length(h->tx.head_out));
	h->tx.req_kept = false;
	if (!h->tx.is_connect) {
		struct http_req_ctx rq = {
			.target = ct.path, .tlen = ct.plen,
			.query = ct.sent_query, .qlen = ct.sent_qlen,
			.host = h->tx.host,
			.dst = (struct sockaddr *)&dst,
			.client = px_session_client(h->s),
			.upgrade = h->tx.upgrade_ok,
			.authority = auth, .alen = alen,
			.whole = http_scan_whole(h),
			.drop = http_auth_field(h),
		};

		http_head_request(h->tx.head_out, &m, p, &rq);
		if (p->server_h2 != HTTP_SERVER_H2_NO)
			http_h2o_prepare(h, &m, &rq);
	}
	evbuffer_drain(cin, head_len);
	h->tx.req = HTTP_REQ_WAIT;
	h->tx.resp = HTTP_RESP_HEAD;
	http_head_restart(&h->tx.resp_scan, &h->tx.resp_judge);
	px_session_timer(h->s, http_grpc_bound(h, p->response_timeout_ms));
	if (dst.ss_family == 0) {
		http_resolve(h, port);
		return;
	}
	http_dispatch(h, (struct sockaddr *)&dst);
}

/* ---- response ---------------------------------------------------------- */

/* A response head is complete at the front of the server input: parsed
 * here, judged by http_judge_response. Returns false when the
 * transaction ended. */
bool
http_handle_response(struct http_state *h, const char *buf, size_t head_len)
{
	static _Thread_local struct http_head m;
	const char *why;
	int rc;

	rc = http_parse_head(buf, head_len, false, &h->pol->lim, &m, &why);
	if (rc != 0) {
		px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
		px_session_log(h->s, LOG_NOTICE, "http-bad-response reason=\"%s\"",
		    why);
		http_error(h, 502, why);
		return false;
	}
	return http_judge_response(h, &m, buf, head_len);
}

bool
http_judge_response(struct http_state *h, const struct http_head *m,
    const char *buf, size_t head_len)
{
	struct evbuffer *cout = h->c->out;
	struct http_resp_ctx rs;
	size_t before;

	if (!http_policy_codings(h->pol, m)) {
		px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
		px_session_log(h->s, LOG_NOTICE, "http-bad-response reason=\"%s\"",
		    "transfer coding not allowed");
		http_error(h, 502, "transfer coding not allowed");
		return false;
	}
	if (m->status == 101 && !h->tx.upgrade_ok) {
		px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
		http_error(h, 502, "101 without an accepted Upgrade");
		return false;
	}
	if (m->status < 200 && h->client_10) {
		/* HTTP/1.0 has no 1xx (RFC 9110 15.2): an HTTP/1.0 client
		 * would take an interim head for the response. Dropped; the
		 * final head follows. */
		if (h->tx.srv.io != NULL)
			evbuffer_drain(h->tx.srv.io->in, head_len);
		h->tx.resp = HTTP_RESP_HEAD;
		return true;
	}
	before = evbuffer_get_length(cout);
	/* Framing: RFC 9112 6.3, in order. */
	h->tx.resp_body = HTTP_BODY_CLOSE;
	if (h->tx.is_head || m->status < 200 || m->status == 204 || m->status == 304)
		h->tx.resp_body = HTTP_BODY_NONE;
	else if (m->chunked)
		h->tx.resp_body = HTTP_BODY_CHUNKED;
	else if (m->content_length >= 0) {
		h->tx.resp_body = m->content_length ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
		h->tx.resp_left = (uint64_t)m->content_length;
	}
	/* An HTTP/1.1 server's connection; an h2 stream is never kept (it
	 * ends with its transaction: http_server_drop). */
	h->tx.srv.keep = h->tx.srv.io != NULL && !m->conn_close && m->minor == 1 &&
	    h->tx.resp_body != HTTP_BODY_CLOSE;
	if (m->status >= 200 || m->status == 101) {
		h->tx.status = m->status;
		if (h->tx.resp_body == HTTP_BODY_CLOSE)
			h->client_keep = false;
		h->tx.dechunk = h->client_10 && h->tx.resp_body == HTTP_BODY_CHUNKED;
		if (h->tx.dechunk && m->te_other) {
			/* Without chunks, no Transfer-Encoding: the other
			 * codings could not be said. */
			px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
			http_error(h, 502, "transfer coding for an HTTP/1.0 client");
			return false;
		}
		if (h->tx.dechunk) {
			/* An HTTP/1.0 client cannot read chunks: send the
			 * data, end it by closing. */
			h->client_keep = false;
		}
	}
	/* The policy changed since this connection came: it serves no
	 * request under the old one after this (see http_on_config). */
	if (px_session_config_stale(h->s))
		h->client_keep = false;
	rs.dechunk = h->tx.dechunk;
	rs.client_keep = h->client_keep;
	rs.client_10 = h->client_10;
	rs.extra = m->status >= 200 ? http_auth_reply(h) : NULL;
	if (m->status >= 200 && h->tx.resp_body != HTTP_BODY_NONE &&
	    http_scan_partial(h, m, PX_TO_CLIENT) == -1)
		return false;
	if (m->status >= 200 && h->tx.resp_body != HTTP_BODY_NONE &&
	    buf == NULL && http_scan_downloads(h)) {
		/* An HTTP/2 server's head came as fields: the scanner is
		 * shown the one the client gets. */
		struct evbuffer *hb = http_scan_head_buf;

		if (hb == NULL &&
		    (hb = http_scan_head_buf = evbuffer_new()) == NULL) {
			http_abort(h, PX_END_PROXY, "error: out of memory");
			return false;
		}
		evbuffer_drain(hb, evbuffer_get_length(hb));
		http_head_response(hb, m, h->pol, &rs);
		head_len = evbuffer_get_length(hb);
		buf = (const char *)evbuffer_pullup(hb, -1);
	}
	if (m->status >= 200 && h->tx.resp_body != HTTP_BODY_NONE &&
	    (cout = http_scan_response(h, buf, head_len)) == NULL)
		return false;
	before = evbuffer_get_length(cout);
	http_head_response(cout, m, h->pol, &rs);
	if (rs.extra != NULL)
		http_auth_reply_sent(h);
	/* An HTTP/1.1 server's head leaves its input (an h2 one has none). */
	if (h->tx.srv.io != NULL)
		evbuffer_drain(h->tx.srv.io->in, head_len);
	h->tx.resp_bytes += evbuffer_get_length(cout) - before;
	px_session_account(h->s, PX_TO_CLIENT, evbuffer_get_length(cout) - before);
	if (m->status == 101) {
		http_start_tunnel(h);
		return false;
	}
	if (m->status < 200) {
		/* Interim (100, 103): the final response follows. */
		h->tx.interim_bytes = h->tx.resp_bytes;
		h->tx.resp = HTTP_RESP_HEAD;
		return true;
	}
	if (h->tx.resp_body == HTTP_BODY_CHUNKED) {
		memset(&h->tx.resp_chunk, 0, sizeof(h->tx.resp_chunk));
		h->tx.resp_chunk.step = true;
	}
	h->tx.resp = h->tx.resp_body == HTTP_BODY_NONE ? HTTP_RESP_DONE :
	    HTTP_RESP_BODY;
	/* A gRPC call's deadline bounds its streams too. */
	px_session_timer(h->s, http_grpc_bound(h, 0));
	return true;
}
