/* http: a parsed head judged, the one policy path of both directions.
 * A request head (an HTTP/1.1 client's, or an HTTP/2 stream's made from its
 * fields) is parsed once, its target made canonical, and goes through
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
 * t->canon, and t->path, for the log, what the url rules judge: the path
 * and the query. 0, or the status to refuse the request with (*why). */
static int
http_canon_target(struct http_txn *t, const char *target, size_t tlen,
    struct http_target *ct, const char **why)
{
	struct http_state *h = t->conn;
	size_t want = tlen + 3 > 256 ? tlen + 3 : 256, len;
	char *nb;
	int rc;

	if (t->canon_size < want) {
		if ((nb = realloc(t->canon, want)) == NULL) {
			*why = "out of memory";
			return 500;
		}
		t->canon = nb;
		t->canon_size = want;
	}
	if ((rc = http_target_canon(target, tlen, h->pol->merge_slashes,
	    t->canon, t->canon_size, ct, why)) != 0)
		return rc;
	http_copy(t->path, sizeof(t->path), ct->path, ct->plen);
	len = strlen(t->path);
	if (ct->query != NULL && len + 1 < sizeof(t->path)) {
		t->path[len] = '?';
		http_copy(t->path + len + 1, sizeof(t->path) - len - 1,
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
http_limited(struct http_txn *t, const struct http_head *m,
    uint32_t retry_s, bool may_keep)
{
	struct http_state *h = t->conn;
	const struct http_policy *p = h->pol;
	bool keep = may_keep && p->keepalive_client && !m->conn_close &&
	    (m->minor == 1 || m->conn_keep_alive) &&
	    (p->max_requests == 0 || h->nreq < p->max_requests) &&
	    !m->chunked && m->content_length <= 0 && !t->is_connect &&
	    evbuffer_get_length(h->c->in) == t->head_len &&
	    !px_session_config_stale(h->s);

	px_session_count(h->s, HTTP_C_DENIED, 1);
	http_reply_limited(t, retry_s, keep);
	http_refusal_sent(t, keep,
	    "denied: http 429: source-limits requests");
}

void
http_judge_request(struct http_txn *t, const struct http_head *m,
    bool replay)
{
	struct http_state *h = t->conn;
	const struct http_policy *p = h->pol;
	struct evbuffer *cin = http_client_in(t);
	struct sockaddr_storage dst, hostaddr;
	const char *why = NULL, *target, *auth = NULL;
	size_t tlen, alen = 0;
	uint16_t port = 0, hostport = 0;
	int rc;
	bool forward = px_session_dst(h->s)->sa_family == 0;
	struct http_hit hit;
	struct http_target ct = { .path = NULL };
	uint32_t retry;
	unsigned i;

	t->body_said = m->chunked || m->content_length > 0;
	/* A gRPC call's refusals are answered as gRPC (http_grpc.c). */
	if (http_grpc_request(t, m, &why) == -1) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(t, 400, why);
		return;
	}
	if (!http_policy_codings(p, m)) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(t, 501, "transfer coding not allowed");
		return;
	}
	h->client_10 = m->minor == 0;
	t->is_head = http_token_eq(m->method, m->mlen, "HEAD");
	t->is_connect = http_token_eq(m->method, m->mlen, "CONNECT");
	target = m->target;
	tlen = m->tlen;
	/* A Host without a port means the scheme's: https when the client
	 * spoke TLS to us (RFC 9110 4.2.2). */
	if (m->host != -1 && http_host_authority(t, m->hdr[m->host].val,
	    m->hdr[m->host].vlen, px_session_client_via_tls(h->s) ? 443 : 80,
	    &hostaddr, &hostport) == -1) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(t, 400, "malformed Host");
		return;
	}
	if (t->is_connect) {
		if (!forward) {
			http_error(t, 405, "CONNECT is only for forward mode");
			return;
		}
		if (http_authority(m->target, m->tlen, 0, t->host,
		    sizeof(t->host), &dst, &port) == -1 || port == 0) {
			http_error(t, 400, "malformed CONNECT target");
			return;
		}
	} else if (http_head_origin_form(m->target, m->tlen, &auth, &alen,
	    &target, &tlen)) {
		/* absolute-form, in every mode: its authority replaces Host
		 * (RFC 9112 3.2.2); forward mode connects to it, the others
		 * to where they always do. */
		if (http_authority(auth, alen, 80, t->host, sizeof(t->host),
		    &hostaddr, &hostport) == -1) {
			px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
			http_error(t, 400, "malformed URI authority");
			return;
		}
		if (forward) {
			memcpy(&dst, &hostaddr, sizeof(dst));
			port = hostport;
		}
	} else if (forward) {
		http_error(t, 400, "forward mode needs an absolute URI");
		return;
	} else if (m->tlen == 0 || (m->target[0] != '/' &&
	    !(m->tlen == 1 && m->target[0] == '*'))) {
		http_error(t, 400, "request target is not in origin form");
		return;
	}
	/* The url rules judge the path as the server will read it, and the
	 * server is sent that path (docs/CONFIG.md); what cannot be judged
	 * so is refused. CONNECT's target is an authority. */
	if (!t->is_connect &&
	    (rc = http_canon_target(t, target, tlen, &ct, &why)) != 0) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(t, rc, why);
		return;
	}
	if (!t->is_connect && !forward) {
		memcpy(&dst, px_session_dst(h->s), sizeof(dst));
		port = px_sockaddr_port((struct sockaddr *)&dst);
		/* Transparent: the Host (or authority) the client names must
		 * be where it was going (an IP literal is checked, a name by
		 * its port). */
		if (p->check_host && (m->host != -1 || auth != NULL) &&
		    h->transparent &&
		    (hostport != port || (hostaddr.ss_family != 0 &&
		    !px_sockaddr_same_host((struct sockaddr *)&hostaddr,
		    (struct sockaddr *)&dst)))) {
			px_session_count(h->s, HTTP_C_DENIED, 1);
			http_error(t, 400, "Host does not match the destination");
			return;
		}
	}
	t->port = port;
	if (!replay && !px_session_request_allowed(h->s,
	    http_auth_id(h) != NULL ? http_auth_id(h)->user : NULL, &retry,
	    t->rule, sizeof(t->rule))) {
		http_limited(t, m, retry, true);
		return;
	}
	/* <auth>: 0 go on, else answered or waiting for the directory. */
	if (http_auth_request(t, m) != 0)
		return;
	http_auth_bind(t);
	/* <source-limits per="user">: the connection counts as the user's
	 * from its first proven request; over the user's sessions= or
	 * connections=, 429 and the connection ends (an HTTP/2 stream:
	 * the stream, and each later one of the connection: the core
	 * judges a connection once). */
	if (http_auth_txn_id(t) != NULL && (http_auth_user_limited(h, &retry,
	    t->rule, sizeof(t->rule)) || !px_session_user_allowed(h->s,
	    http_auth_txn_id(t)->user, &retry, t->rule, sizeof(t->rule)))) {
		http_auth_user_limit(h, retry, t->rule);
		http_limited(t, m, retry, false);
		return;
	}
	if ((rc = http_policy_check_as(p, http_auth_txn_id(t), m->method,
	    m->mlen,
	    port, t->host,
	    t->is_connect ? t->path : ct.path, ct.query, &why, &hit)) != 0) {
		px_session_count(h->s, HTTP_C_DENIED, 1);
		if (hit.line == 0)
			snprintf(t->rule, sizeof(t->rule), "default");
		else
			px_rule_ref_at(hit.line, hit.label,
			    px_session_policy_file(h->s), t->rule,
			    sizeof(t->rule));
		if (rc == -1) {
			t->verdict = "abort";
			px_session_set_rule(h->s, t->rule);
			http_txn_abort(t, PX_END_POLICY,
			    "denied: http request aborted by policy");
			return;
		}
		http_error(t, rc, why);
		return;
	}
	/* Framing of the request body. */
	t->req_body = HTTP_BODY_NONE;
	if (m->chunked) {
		t->req_body = HTTP_BODY_CHUNKED;
		memset(&t->req_chunk, 0, sizeof(t->req_chunk));
		t->req_chunk.step = true;
	} else if (m->content_length > 0) {
		t->req_body = HTTP_BODY_LENGTH;
		t->req_left = (uint64_t)m->content_length;
		if (p->max_body != 0 && t->req_left > p->max_body) {
			http_error(t, 413, "request body over max-body");
			return;
		}
	}
	if (t->req_body != HTTP_BODY_NONE &&
	    http_scan_partial(t, m, PX_TO_SERVER) == -1)
		return;
	if (http_scan_request(t, t->req_body == HTTP_BODY_LENGTH ?
	    (int64_t)t->req_left : -1) == -1)
		return;
	t->te_trailers = false;
	for (i = 0; i < m->nhdr; i++)
		if (m->hdr[i].id == HTTP_F_TE &&
		    http_list_has(m->hdr[i].val, m->hdr[i].vlen, "trailers"))
			t->te_trailers = true;
	t->upgrade_ok = m->upgrade != -1 && m->conn_upgrade && !t->is_connect &&
	    http_policy_upgrade(p, m->hdr[m->upgrade].val, m->hdr[m->upgrade].vlen);
	h->client_keep = p->keepalive_client && !m->conn_close &&
	    (m->minor == 1 || m->conn_keep_alive) &&
	    (p->max_requests == 0 || h->nreq < p->max_requests);
	t->replayable = t->req_body == HTTP_BODY_NONE && !t->is_connect &&
	    (t->is_head || http_token_eq(m->method, m->mlen, "GET") ||
	    http_token_eq(m->method, m->mlen, "OPTIONS") ||
	    http_token_eq(m->method, m->mlen, "DELETE") ||
	    http_token_eq(m->method, m->mlen, "PUT") ||
	    http_token_eq(m->method, m->mlen, "TRACE"));

	/* The head as it will go out, whatever connection carries it. */
	evbuffer_drain(t->head_out, evbuffer_get_length(t->head_out));
	t->req_kept = false;
	if (!t->is_connect) {
		struct http_req_ctx rq = {
			.target = ct.path, .tlen = ct.plen,
			.query = ct.sent_query, .qlen = ct.sent_qlen,
			.host = t->host,
			.dst = (struct sockaddr *)&dst,
			.client = px_session_client(h->s),
			.upgrade = t->upgrade_ok,
			.authority = auth, .alen = alen,
			.whole = http_scan_whole(t),
			.drop = http_auth_field(h),
		};

		http_head_request(t->head_out, m, p, &rq);
		if (p->server_h2 != HTTP_SERVER_H2_NO)
			http_h2o_prepare(t, m, &rq);
	}
	evbuffer_drain(cin, t->head_len);
	t->head_len = 0;
	t->req = HTTP_REQ_WAIT;
	t->resp = HTTP_RESP_HEAD;
	http_head_restart(&t->resp_scan, &t->resp_judge);
	http_txn_timer(t, http_grpc_bound(t, p->response_timeout_ms));
	if (dst.ss_family == 0) {
		http_resolve(t, port);
		return;
	}
	http_dispatch(t, (struct sockaddr *)&dst);
}

/* A request starts (or, replay, starts again): its transaction's fields
 * from nothing, the log's method and path from m (NULL: unparsable). */
static void
http_request_begin(struct http_txn *t, const struct http_head *m,
    bool replay)
{
	struct http_state *h = t->conn;

	if (!replay)
		gettimeofday(&t->t_start, NULL);
	http_auth_unbind(t);	/* judged as nobody yet */
	t->verdict = NULL;
	t->rule[0] = '\0';
	t->status = 0;
	t->req_bytes = t->resp_bytes = t->interim_bytes = 0;
	t->host[0] = '\0';
	t->retried = false;
	t->grpc = false;
	t->grpc_status = -1;
	/* The port the request is for (a 405's Allow depends on it). */
	t->port = px_sockaddr_port(px_session_dst(h->s));
	http_copy(t->method, sizeof(t->method), m != NULL ? m->method : "-",
	    m != NULL ? m->mlen : 1);
	http_copy(t->path, sizeof(t->path), m != NULL ? m->target : "-",
	    m != NULL ? m->tlen : 1);
}

/* A complete request head (head_len bytes) is at the front of the client
 * input: parsed here, the HTTP/1.1 codec's part, then judged. */
void
http_handle_request(struct http_txn *t, const char *buf, size_t head_len)
{
	struct http_state *h = t->conn;
	static _Thread_local struct http_head m;
	const char *why = NULL;
	int rc;

	t->head_len = head_len;
	rc = http_parse_head(buf, head_len, true, &h->pol->lim, &m, &why);
	http_request_start(t, rc == 0 ? &m : NULL, rc, why);
}

void
http_request_start(struct http_txn *t, const struct http_head *m, int rc,
    const char *why)
{
	struct http_state *h = t->conn;

	http_request_begin(t, m, false);
	px_session_count(h->s, HTTP_C_REQUESTS, 1);
	h->nreq++;
	if (rc != 0) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(t, rc, why);
		return;
	}
	http_judge_request(t, m, false);
}

/* Handled again once its authentication was answered (http_auth.c):
 * counted and timed once. */
void
http_replay_request(struct http_txn *t, const struct http_head *m)
{
	http_request_begin(t, m, true);
	http_judge_request(t, m, true);
}

/* ---- response ---------------------------------------------------------- */

/* A response head is complete at the front of the server input: parsed
 * here, judged by http_judge_response. Returns false when the
 * transaction ended. */
bool
http_handle_response(struct http_txn *t, const char *buf, size_t head_len)
{
	struct http_state *h = t->conn;
	static _Thread_local struct http_head m;
	const char *why;
	int rc;

	rc = http_parse_head(buf, head_len, false, &h->pol->lim, &m, &why);
	if (rc != 0) {
		px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
		px_session_log(h->s, LOG_NOTICE, "http-bad-response reason=\"%s\"",
		    why);
		http_error(t, 502, why);
		return false;
	}
	return http_judge_response(t, &m, buf, head_len);
}

bool
http_judge_response(struct http_txn *t, const struct http_head *m,
    const char *buf, size_t head_len)
{
	struct http_state *h = t->conn;
	struct evbuffer *cout = http_client_out(t);
	struct http_resp_ctx rs;
	size_t before, n = 0;
	int kept = 0;

	if (!http_policy_codings(h->pol, m)) {
		px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
		px_session_log(h->s, LOG_NOTICE, "http-bad-response reason=\"%s\"",
		    "transfer coding not allowed");
		http_error(t, 502, "transfer coding not allowed");
		return false;
	}
	if (m->status == 101 && !t->upgrade_ok) {
		px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
		http_error(t, 502, "101 without an accepted Upgrade");
		return false;
	}
	if (m->status < 200 && h->client_10) {
		/* HTTP/1.0 has no 1xx (RFC 9110 15.2): an HTTP/1.0 client
		 * would take an interim head for the response. Dropped; the
		 * final head follows. */
		if (t->srv.io != NULL)
			evbuffer_drain(t->srv.io->in, head_len);
		t->resp = HTTP_RESP_HEAD;
		return true;
	}
	/* Framing: RFC 9112 6.3, in order. */
	t->resp_body = HTTP_BODY_CLOSE;
	if (t->is_head || m->status < 200 || m->status == 204 || m->status == 304)
		t->resp_body = HTTP_BODY_NONE;
	else if (m->chunked)
		t->resp_body = HTTP_BODY_CHUNKED;
	else if (m->content_length >= 0) {
		t->resp_body = m->content_length ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
		t->resp_left = (uint64_t)m->content_length;
	}
	/* An HTTP/1.1 server's connection; an h2 stream is never kept (it
	 * ends with its transaction: http_server_drop). */
	t->srv.keep = t->srv.io != NULL && !m->conn_close && m->minor == 1 &&
	    t->resp_body != HTTP_BODY_CLOSE;
	if (m->status >= 200 || m->status == 101) {
		t->status = m->status;
		if (t->resp_body == HTTP_BODY_CLOSE)
			h->client_keep = false;
		t->dechunk = h->client_10 && t->resp_body == HTTP_BODY_CHUNKED;
		if (t->dechunk && m->te_other) {
			/* Without chunks, no Transfer-Encoding: the other
			 * codings could not be said. */
			px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
			http_error(t, 502, "transfer coding for an HTTP/1.0 client");
			return false;
		}
		if (t->dechunk) {
			/* An HTTP/1.0 client cannot read chunks: send the
			 * data, end it by closing. */
			h->client_keep = false;
		}
	}
	/* The policy changed since this connection came: it serves no
	 * request under the old one after this (see http_on_config). */
	if (px_session_config_stale(h->s))
		h->client_keep = false;
	/* An early answer (the request's body not all read: an early 413)
	 * from an HTTP/1.1 server: the connection ends after it
	 * (http_transaction_done), and the client, still sending, is told
	 * so (RFC 9112 9.6). An HTTP/2 server's stream still takes the body
	 * after its answer (the transaction ends once it all went, or its
	 * window stays shut for request-timeout): whether the client keeps
	 * its connection is known only then, and the close lingers. */
	if (m->status >= 200 && t->req != HTTP_REQ_DONE && t->h2o == NULL)
		h->client_keep = false;
	rs.dechunk = t->dechunk;
	rs.client_keep = h->client_keep;
	rs.client_10 = h->client_10;
	rs.extra = m->status >= 200 ? http_auth_reply(t) : NULL;
	rs.own = false;
	if (m->status >= 200 && t->resp_body != HTTP_BODY_NONE &&
	    http_scan_partial(t, m, PX_TO_CLIENT) == -1)
		return false;
	if (m->status >= 200 && t->resp_body != HTTP_BODY_NONE &&
	    buf == NULL && http_scan_downloads(t)) {
		/* An HTTP/2 server's head came as fields: the scanner is
		 * shown the one the client gets. */
		struct evbuffer *hb = http_scan_head_buf;

		if (hb == NULL &&
		    (hb = http_scan_head_buf = evbuffer_new()) == NULL) {
			http_txn_abort(t, PX_END_PROXY, "error: out of memory");
			return false;
		}
		evbuffer_drain(hb, evbuffer_get_length(hb));
		http_head_response(hb, m, h->pol, &rs);
		head_len = evbuffer_get_length(hb);
		buf = (const char *)evbuffer_pullup(hb, -1);
	}
	/* A head the scan holds is kept parsed, and written at its
	 * release; counted now either way. */
	if (m->status >= 200 && t->resp_body != HTTP_BODY_NONE &&
	    (kept = http_scan_response(t, m, &rs, buf, head_len, &n)) == -1)
		return false;
	if (kept == 0) {
		before = evbuffer_get_length(cout);
		http_client(t)->head(t, m, &rs, cout);
		n = evbuffer_get_length(cout) - before;
		/* An HTTP/2 stream's HEADERS are nghttp2's: counted by
		 * their fields, so that "part of the response went" holds
		 * for them too (http_error resets rather than answer). */
		if (t->h2w != NULL)
			n += http_h2w_head_bytes(t->h2w);
	}
	if (rs.extra != NULL)
		http_auth_reply_sent(t);
	/* An HTTP/1.1 server's head leaves its input (an h2 one has none). */
	if (t->srv.io != NULL)
		evbuffer_drain(t->srv.io->in, head_len);
	t->resp_bytes += n;
	px_session_account(h->s, PX_TO_CLIENT, n);
	if (m->status == 101) {
		http_txn_tunnel(t);
		return false;
	}
	if (m->status < 200) {
		/* Interim (100, 103): the final response follows. */
		t->interim_bytes = t->resp_bytes;
		t->resp = HTTP_RESP_HEAD;
		return true;
	}
	if (t->resp_body == HTTP_BODY_CHUNKED) {
		memset(&t->resp_chunk, 0, sizeof(t->resp_chunk));
		t->resp_chunk.step = true;
	}
	t->resp = t->resp_body == HTTP_BODY_NONE ? HTTP_RESP_DONE :
	    HTTP_RESP_BODY;
	/* A gRPC call's deadline bounds its streams too. */
	http_txn_timer(t, http_grpc_bound(t, 0));
	return true;
}
