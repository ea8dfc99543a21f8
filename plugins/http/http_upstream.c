/* Which server a request goes to and over which connection: the
 * authority a request names, the server connection (this client's kept
 * one, a pooled one or a new one), forward mode's DNS, and the one retry
 * of a replayable request whose reused connection turned out dead; and
 * that connection's events for its transaction: the response read (its
 * head parsed, then judged in http_judge.c; its body pumped), its end,
 * and one step of an HTTP/2 stream's transaction (http_txn_step) and its
 * timer (http_txn_timeout). */
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <syslog.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/util.h>

#include "conn.h"
#include "http_h2_origin.h"
#include "http_int.h"
#include "icap.h"
#include "parse.h"

/* Per worker thread: each worker has one event_base, so one resolver
 * (nameservers from /etc/resolv.conf, names from /etc/hosts). */
static _Thread_local struct evdns_base *http_dns;

/* RFC 3986 3.2.2 reg-name: unreserved, pct-encoded, sub-delims; an
 * IPv4 address is one too (px_parse_ip tells them apart). */
static bool
http_reg_name(const char *a, size_t len)
{
	static const char other[] = "-._~!$&'()*+,;=";
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)a[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || (c != '\0' && strchr(other, c)))
			continue;
		if (c == '%' && i + 2 < len && isxdigit((unsigned char)a[i + 1]) &&
		    isxdigit((unsigned char)a[i + 2])) {
			i += 2;
			continue;
		}
		return false;
	}
	return true;
}

/* http_authority, and *hostlen: the bytes of a that are the host. */
static int
http_authority_host(const char *a, size_t len, uint16_t defport, char *host,
    size_t hsize, struct sockaddr_storage *ss, uint16_t *port,
    size_t *hostlen)
{
	const char *colon = NULL;
	size_t hlen = len;
	socklen_t sl;
	const char *why;
	char tmp[128];

	*port = defport;
	memset(ss, 0, sizeof(*ss));
	if (len == 0 || len >= sizeof(tmp))
		return -1;
	if (a[0] == '[') {
		const char *rb = memchr(a, ']', len);

		if (rb == NULL)
			return -1;
		hlen = (size_t)(rb - a) + 1;
		if (hlen < len) {
			if (a[hlen] != ':')
				return -1;
			colon = a + hlen;
		}
	} else if ((colon = memchr(a, ':', len)) != NULL)
		hlen = (size_t)(colon - a);
	if (colon != NULL) {
		size_t plen = len - (size_t)(colon - a) - 1;
		uint64_t u;
		size_t k;

		if (plen == 0 || plen > 5)
			return -1;
		for (k = 1; k <= plen; k++)
			if (colon[k] < '0' || colon[k] > '9')
				return -1;
		memcpy(tmp, colon + 1, plen);
		tmp[plen] = '\0';
		if (px_parse_uint(tmp, 1, 65535, &u, &why) == -1)
			return -1;
		*port = (uint16_t)u;
	}
	if (hlen == 0 || hlen >= hsize)
		return -1;
	if (a[0] == '[') {
		/* IP-literal: an IPv6 address (no IPvFuture). */
		if (hlen < 3)
			return -1;
		memcpy(tmp, a + 1, hlen - 2);
		tmp[hlen - 2] = '\0';
		if (px_parse_ip(tmp, *port, ss, &sl, &why) == -1 ||
		    ss->ss_family != AF_INET6)
			return -1;
	} else {
		if (!http_reg_name(a, hlen))
			return -1;
		memcpy(tmp, a, hlen);
		tmp[hlen] = '\0';
		if (px_parse_ip(tmp, *port, ss, &sl, &why) == -1 ||
		    ss->ss_family != AF_INET)
			memset(ss, 0, sizeof(*ss));
	}
	http_copy(host, hsize, a, hlen);
	*hostlen = hlen;
	return 0;
}

int
http_authority(const char *a, size_t len, uint16_t defport, char *host,
    size_t hsize, struct sockaddr_storage *ss, uint16_t *port)
{
	size_t hlen;

	return http_authority_host(a, len, defport, host, hsize, ss, port,
	    &hlen);
}

/* The last Host value http_host_authority parsed in this worker, and
 * what it made of it: a keep-alive client names the same Host on every
 * request, and most clients of a service the same one. Per worker, not
 * per connection: it costs an idle session nothing, and the result
 * depends on the bytes and the default port alone. */
struct http_host_memo {
	char			 val[64];	/* as sent; longer: not kept */
	uint8_t			 len;		/* 0: none */
	uint8_t			 hlen;		/* of val, the host */
	uint16_t		 defport, port;
	struct sockaddr_in6	 addr;		/* or _in; family 0: a name */
};
static _Thread_local struct http_host_memo http_host_memo;

int
http_host_authority(struct http_txn *t, const char *a, size_t len,
    uint16_t defport, struct sockaddr_storage *ss, uint16_t *port)
{
	struct http_host_memo *hm = &http_host_memo;
	size_t hlen;

	if (hm->len != 0 && hm->len == len && hm->defport == defport &&
	    memcmp(hm->val, a, len) == 0) {
		*port = hm->port;
		memset(ss, 0, sizeof(*ss));
		memcpy(ss, &hm->addr, sizeof(hm->addr));
		http_copy(t->host, sizeof(t->host), a, hm->hlen);
		return 0;
	}
	hm->len = 0;
	if (http_authority_host(a, len, defport, t->host, sizeof(t->host), ss,
	    port, &hlen) == -1)
		return -1;
	/* ss is AF_INET, AF_INET6 or none: all of it fits in addr. */
	if (len < sizeof(hm->val)) {
		memcpy(hm->val, a, len);
		hm->len = (uint8_t)len;
		hm->hlen = (uint8_t)hlen;
		hm->defport = defport;
		hm->port = *port;
		memcpy(&hm->addr, ss, sizeof(hm->addr));
	}
	return 0;
}

int
http_server_open(struct http_txn *t, const struct sockaddr *dst,
    bool pooled_ok)
{
	struct http_state *h = t->conn;
	struct http_server *sv = &t->srv;
	const char *stage = "connect";
	bool reused;

	/* A tunnel takes its connection for good: never a pooled one. */
	sv->io = px_session_upstream_take(h->s, dst, pooled_ok &&
	    !t->is_connect, http_server_rd_cb, http_server_wr_cb, t, &reused,
	    &stage);
	if (sv->io == NULL) {
		px_session_log(h->s, LOG_NOTICE, "http-upstream %s failed: %s",
		    stage, strerror(errno));
		return -1;
	}
	memcpy(&sv->dst, dst, px_sockaddr_len(dst));
	sv->reused = reused;
	sv->kept = false;
	sv->got_bytes = false;
	sv->keep = false;
	sv->boundary = true;	/* the pool's are, a new one is */
	/* A new one is connecting: writable means done (or failed). */
	sv->connected = reused;
	t->connecting = !reused;
	if (!reused)
		px_conn_want_writable(sv->io, true);
	return 0;
}

struct evbuffer *
http_server_out(struct http_txn *t)
{
	if (t->h2o != NULL)
		return http_h2o_req_buf(t);
	return t->srv.io != NULL ? t->srv.io->out : NULL;
}

/* Whether t->srv, between responses, holds bytes the loop has not read
 * (in its socket, or decrypted already): the server sent more than its
 * response, and the next request on it would take them for its own
 * (logged: the connection is not to be reused). No system call while
 * the connection is quiet (px_conn_quiet: its last read emptied it and
 * the loop has not reported it since), as it is after a response read
 * whole; else a peek (its FIN too: the server closed it). */
static bool
http_server_unread(struct http_txn *t)
{
	if (t->srv.io == NULL || px_conn_quiet(t->srv.io) ||
	    !px_conn_unread(t->srv.io))
		return false;
	px_session_log(t->conn->s, LOG_NOTICE, "http-upstream server sent "
	    "bytes after its response: connection not reused");
	return true;
}

void
http_server_drop(struct http_txn *t, bool reusable)
{
	struct http_state *h = t->conn;
	struct http_server *sv = &t->srv;

	http_h2o_drop(t);
	if (sv->io == NULL)
		return;
	/* Not reusable with bytes still queued either way, nor inside a
	 * message: a server still waiting for a request's body would take
	 * the next request for it. */
	if (t->connecting || !sv->boundary ||
	    evbuffer_get_length(sv->io->out) != 0 ||
	    evbuffer_get_length(sv->io->in) != 0 || sv->io->eof)
		reusable = false;
	/* Nor with the server's bytes after the response decrypted already
	 * (TLS: in OpenSSL's buffer): the pool's read event, that drops a
	 * plain one with bytes in its socket, never sees them, and the next
	 * request on it would get them as its response. (Plain: no ioctl
	 * per request, the pool's event does it.) */
	if (reusable && sv->io->tf != NULL && http_server_unread(t))
		reusable = false;
	px_session_upstream_park(h->s, sv->io, (struct sockaddr *)&sv->dst,
	    reusable && sv->connected && h->pol->keepalive_server,
	    h->pol->server_pool, h->pol->server_idle_ms);
	sv->io = NULL;
	t->connecting = false;
	sv->connected = false;
}

void
http_dispatch(struct http_txn *t, const struct sockaddr *dst)
{
	struct http_state *h = t->conn;
	struct evbuffer *sout;
	char zones[160];
	size_t n;

	/* Forward mode: the request names the server, so <servers> is
	 * asked per request (the other modes asked once, at accept). */
	if (px_session_dst(h->s)->sa_family == 0 &&
	    px_session_server_allowed(h->s, dst, zones, sizeof(zones)) == -1) {
		char why[200];

		t->req = HTTP_REQ_DONE;
		snprintf(why, sizeof(why), "server not allowed (%s)", zones);
		http_error(t, 403, why);
		return;
	}
	if (http_h2o_wanted(t, dst)) {
		/* HTTP/2 to the server: a stream on a shared connection. */
		if (http_h2o_dispatch(t, dst) == -1) {
			t->req = HTTP_REQ_DONE;
			http_error(t, 502, "cannot connect to the server");
			return;
		}
		h->progress++;
		t->req = t->req_body == HTTP_BODY_NONE ? HTTP_REQ_DONE :
		    HTTP_REQ_BODY;
		t->req_bytes += evbuffer_get_length(t->head_out);
		px_session_account(h->s, PX_TO_SERVER,
		    evbuffer_get_length(t->head_out));
		if (t->req == HTTP_REQ_BODY)
			http_pump_request(t);
		return;
	}
	if (t->srv.io != NULL && (t->is_connect || memcmp(&t->srv.dst, dst,
	    px_sockaddr_len(dst)) != 0))
		http_server_drop(t, true);
	/* The connection this client keeps, unless its server sent more
	 * than its last response: the request would take that for its own
	 * response. Those bytes may have come since the loop last read it
	 * (in a write of their own, reported in this very pass after the
	 * client's request), or a read the buffer bounded left them. */
	if (t->srv.io != NULL && http_server_unread(t))
		http_server_drop(t, false);
	if (t->srv.io != NULL) {
		t->srv.reused = true;
		t->srv.kept = true;
	} else if (http_server_open(t, dst, true) == -1) {
		t->req = HTTP_REQ_DONE;
		http_error(t, 502, "cannot connect to the server");
		return;
	}
	h->progress++;
	if (t->is_connect) {
		/* The 200 goes out once the server accepted: see
		 * http_server_wr_cb. Nothing of the client's goes before. */
		t->req = HTTP_REQ_DONE;
		return;
	}
	sout = t->srv.io->out;
	n = evbuffer_get_length(t->head_out);
	/* A replayable request on a reused connection keeps its head for one
	 * retry; the output only references it (no buffer made and freed
	 * per request: head_out is drained by the next one). */
	t->req_kept = t->replayable && t->srv.reused &&
	    evbuffer_add_buffer_reference(sout, t->head_out) == 0;
	if (!t->req_kept)
		evbuffer_add_buffer(sout, t->head_out);
	t->srv.boundary = false;
	t->req_bytes += n;
	px_session_account(h->s, PX_TO_SERVER, n);
	t->req = t->req_body == HTTP_BODY_NONE ? HTTP_REQ_DONE : HTTP_REQ_BODY;
	if (t->req == HTTP_REQ_BODY)
		http_pump_request(t);
}

static void
http_resolved(int result, struct evutil_addrinfo *ai, void *arg)
{
	struct http_txn *t = arg;
	struct http_state *h = t->conn;

	if (result == EVUTIL_EAI_CANCEL)
		return;		/* the session is closing: t is going */
	t->dns = NULL;
	if (result != 0 || ai == NULL) {
		char why[192];

		snprintf(why, sizeof(why), "cannot resolve %s: %s", t->host,
		    evutil_gai_strerror(result));
		if (ai != NULL)
			evutil_freeaddrinfo(ai);
		t->req = HTTP_REQ_DONE;
		http_error(t, 502, why);
	} else {
		struct sockaddr_storage dst;

		memset(&dst, 0, sizeof(dst));
		memcpy(&dst, ai->ai_addr, ai->ai_addrlen <= sizeof(dst) ?
		    ai->ai_addrlen : sizeof(dst));
		evutil_freeaddrinfo(ai);
		http_dispatch(t, (struct sockaddr *)&dst);
	}
	if (!h->gone)
		http_txn_drive(t);
}

void
http_resolve(struct http_txn *t, uint16_t port)
{
	struct http_state *h = t->conn;
	struct evutil_addrinfo hints;
	char service[8];
	char name[sizeof(t->host)];

	if (http_dns == NULL)
		http_dns = evdns_base_new(px_session_base(h->s),
		    EVDNS_BASE_INITIALIZE_NAMESERVERS |
		    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (http_dns == NULL) {
		t->req = HTTP_REQ_DONE;
		http_error(t, 502, "no resolver for forward mode");
		return;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
	snprintf(service, sizeof(service), "%u", port);
	snprintf(name, sizeof(name), "%s", t->host);
	t->dns = evdns_getaddrinfo(http_dns, name, service, &hints,
	    http_resolved, t);
	/* NULL: answered already (from /etc/hosts), callback done. */
}

void
http_worker_exit(void)
{
	if (http_dns != NULL)
		evdns_base_free(http_dns, 1);
	http_dns = NULL;
	http_h2o_worker_exit();
	http_thread_exit_heads();
	http_auth_worker_exit();
	px_icap_worker_exit();
}

bool
http_retry(struct http_txn *t)
{
	struct http_state *h = t->conn;
	struct sockaddr_storage dst;

	if (!t->srv.reused || t->srv.got_bytes || t->retried ||
	    !t->req_kept || t->resp != HTTP_RESP_HEAD)
		return false;
	memcpy(&dst, &t->srv.dst, sizeof(dst));
	http_server_drop(t, false);
	t->retried = true;
	/* A fresh connection, never the pool's: the origin that closed this
	 * one has likely closed its idle siblings in the pool the same way,
	 * and the one retry must not be spent on another of them. */
	if (http_server_open(t, (struct sockaddr *)&dst, false) == -1) {
		http_error(t, 502, "cannot connect to the server");
		return true;
	}
	px_session_count(h->s, HTTP_C_RETRIED, 1);
	evbuffer_add_buffer_reference(t->srv.io->out, t->head_out);
	t->srv.boundary = false;
	h->progress++;
	return true;
}

/* ---- the server side's events: its response read, its end ------------- */

/* The server sent bytes after a complete response: they are dropped
 * and its connection is not reused. */
void
http_unasked_bytes(struct http_txn *t, struct evbuffer *sin)
{
	struct http_state *h = t->conn;
	size_t n = evbuffer_get_length(sin);

	px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
	px_session_log(h->s, LOG_NOTICE, "http-bad-response reason=\"%zu "
	    "bytes after a complete response\" (server connection closed)", n);
	t->srv.keep = false;
	evbuffer_drain(sin, n);
}

/* Response bytes from the server: heads, then body. */
void
http_server_input(struct http_txn *t)
{
	struct http_state *h = t->conn;
	struct evbuffer *sin = t->srv.io->in;

	/* No response is read before the upload's verdict: the server
	 * may not even have its whole body. */
	if (http_scan_pending(t, PX_TO_SERVER))
		return;
	while (t->resp == HTTP_RESP_HEAD && !h->closing && !h->gone) {
		size_t len = evbuffer_get_length(sin), want;
		const char *buf, *why;
		ssize_t end;

		if (len == 0)
			return;
		want = len < h->pol->lim.max_header_bytes + 4 ? len :
		    h->pol->lim.max_header_bytes + 4;
		if ((buf = (const char *)evbuffer_pullup(sin, (ssize_t)want)) ==
		    NULL) {
			http_txn_abort(t, PX_END_PROXY, "error: out of memory");
			return;
		}
		end = http_head_end(buf, want, h->pol->lim.max_header_bytes,
		    &t->resp_scan);
		if (end <= 0 && http_head_judge(buf, want, false,
		    &h->pol->lim, &t->resp_judge, &why) != 0) {
			/* Refused as the bad line arrives: a server that
			 * does not speak HTTP is not waited for. */
			http_head_restart(&t->resp_scan, &t->resp_judge);
			h->progress++;
			px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
			px_session_log(h->s, LOG_NOTICE, "http-bad-response "
			    "reason=\"%s\"", why);
			http_error(t, 502, why);
			return;
		}
		if (end == 0)
			return;
		/* The next head (after a 1xx) starts from scratch. */
		http_head_restart(&t->resp_scan, &t->resp_judge);
		h->progress++;
		if (end < 0) {
			px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
			http_error(t, 502, "response head over max-header-bytes");
			return;
		}
		if (!http_handle_response(t, buf, (size_t)end))
			return;
	}
	if (h->gone || h->closing || h->tunnel || t->ended)
		return;
	if (t->resp == HTTP_RESP_NONE && evbuffer_get_length(sin) != 0) {
		/* Bytes nobody asked for, on the connection this client keeps
		 * between requests: it is not reused (the next request would
		 * read them as its response). */
		http_unasked_bytes(t, sin);
		http_server_drop(t, false);
		return;
	}
	if (t->resp == HTTP_RESP_BODY)
		http_pump_response(t);
	/* A close-delimited body whose end was held up by a full client. */
	if (t->resp == HTTP_RESP_BODY && t->resp_body == HTTP_BODY_CLOSE &&
	    t->srv.io->eof && evbuffer_get_length(sin) == 0) {
		t->resp = HTTP_RESP_DONE;
		t->srv.keep = false;
	}
	/* A scanned body's end waits for its verdict (http_scan.c). */
	if (!h->gone && !t->ended && t->resp == HTTP_RESP_DONE &&
	    !http_scan_hold(t, PX_TO_CLIENT, http_client_out(t)))
		http_response_complete(t);
}

/* The server connection ended (EOF) or failed (err != 0). */
void
http_server_gone(struct http_txn *t, int err)
{
	struct http_state *h = t->conn;
	bool eof = err == 0;

	h->progress++;
	if (t->tunnel) {
		t->eng->tunnel_gone(t, err);
		return;
	}
	if (h->tunnel) {
		px_session_endf(h->s, PX_END_SERVER_FAIL, "server-error: %s",
		    err ? strerror(err) : "closed during tunnel setup");
		return;
	}
	if (t->resp == HTTP_RESP_DONE && http_scan_pending(t, PX_TO_CLIENT)) {
		/* The whole response is here; its verdict is awaited. */
		t->srv.keep = false;
		http_server_drop(t, false);
		return;
	}
	if (http_retry(t))
		return;
	if (t->resp == HTTP_RESP_BODY && t->resp_body == HTTP_BODY_CLOSE &&
	    eof) {
		/* Close-delimited: the end of the body. */
		http_pump_response(t);
		if (h->gone || h->closing || t->ended)
			return;
		if (evbuffer_get_length(t->srv.io->in) == 0) {
			t->resp = HTTP_RESP_DONE;
			t->srv.keep = false;
			if (http_scan_hold(t, PX_TO_CLIENT, http_client_out(t))) {
				http_server_drop(t, false);
				return;
			}
			http_transaction_end(t);
		}
		/* Else the client output is full: the rest moves as it
		 * drains, and EOF is seen again then. */
		return;
	}
	if (t->resp == HTTP_RESP_NONE) {
		/* Idle between requests: nothing lost. */
		http_server_drop(t, false);
		return;
	}
	px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
	if (t->resp == HTTP_RESP_HEAD && t->resp_bytes == 0) {
		http_error(t, 502, !eof ? "server connection failed" :
		    t->srv.io != NULL && evbuffer_get_length(t->srv.io->in) != 0 ?
		    "server closed inside the response head" :
		    "server closed before responding");
		return;
	}
	t->verdict = "error";
	http_txn_abort(t, PX_END_SERVER_FAIL, eof ?
	    "server-closed: inside a response" :
	    "server-error: inside a response");
}

void
http_txn_step(struct http_txn *t)
{
	struct http_state *h = t->conn;
	struct px_conn *io;

	if (t->req == HTTP_REQ_BODY)
		http_pump_request(t);
	if (h->gone || t->ended)
		return;
	if (t->srv.io != NULL && t->srv.connected)
		http_server_input(t);
	else if (t->h2o != NULL)
		http_h2o_input(t);
	if (h->gone || t->ended || (io = t->srv.io) == NULL || !t->srv.connected)
		return;
	if (evbuffer_get_length(io->out) != 0 && !px_conn_write_blocked(io) &&
	    px_conn_send(io) == -1) {
		http_server_gone(t, errno);
		return;
	}
	px_conn_read_enable(io, !io->eof && http_txn_room(t, PX_TO_CLIENT) > 0);
}

bool
http_txn_timeout(struct http_txn *t)
{
	struct http_state *h = t->conn;

	if (t->resp == HTTP_RESP_HEAD && t->resp_bytes == t->interim_bytes &&
	    http_scan_pending(t, PX_TO_SERVER)) {
		/* The upload's body ended and waits for its verdict (the
		 * server for its end; a 100 Continue may have come; a body
		 * the client stopped sending waits for nothing, and times
		 * out as any response would): the scanner's timeout
		 * bounds that, and the server's response-timeout starts
		 * again after it. */
		http_txn_timer(t, http_grpc_bound(t,
		    h->pol->response_timeout_ms));
		return true;
	}
	/* An h2 server's answer is whole, the request's rest waits for
	 * its window: bounded while nothing of it goes. */
	if (http_h2o_timer(t))
		return true;
	px_session_count(h->s, HTTP_C_TIMEOUTS, 1);
	if (t->resp != HTTP_RESP_NONE && http_grpc_expired(t)) {
		/* The call's grpc-timeout: DEADLINE_EXCEEDED while nothing
		 * of the response went, else the stream is cut (CANCEL). */
		if (t->resp_bytes == t->interim_bytes)
			http_error(t, 504, "no response within grpc-timeout");
		else
			http_txn_cut(t, PX_END_TIMEOUT, HTTP_H2_CANCEL,
			    "error: grpc-timeout");
		return true;
	}
	if (t->resp != HTTP_RESP_HEAD)
		return false;
	if (t->resp_bytes == 0)
		http_error(t, 504, "no response within response-timeout");
	else
		/* The server stopped inside its response: its failure
		 * (verdict=error), not an idle end. */
		http_txn_abort(t, PX_END_SERVER_FAIL, "error: response-timeout");
	return true;
}

void
http_server_rd_cb(struct px_conn *c, void *arg)
{
	struct http_txn *t = arg;
	struct http_state *h = t->conn;
	ssize_t n;

	(void)c;
	px_session_active(h->s);
	n = px_conn_recv(t->srv.io, http_txn_room(t, PX_TO_CLIENT));
	if (n > 0) {
		t->srv.got_bytes = true;
		h->progress++;
		/* Move what arrived before looking at the EOF behind it. */
		http_txn_drive(t);
		return;
	}
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
	    errno == EINTR))
		return;
	px_conn_read_enable(t->srv.io, false);
	/* Bytes still unread by the client side are moved first. */
	if (t->resp == HTTP_RESP_BODY && t->resp_body == HTTP_BODY_CLOSE &&
	    n == 0 && evbuffer_get_length(t->srv.io->in) != 0) {
		http_txn_drive(t);
		if (h->gone || t->srv.io == NULL ||
		    evbuffer_get_length(t->srv.io->in) != 0)
			return;	/* http_pump_response ends it when drained */
	}
	http_server_gone(t, n == 0 ? 0 : errno);
	if (!h->gone)
		http_txn_drive(t);
}

void
http_server_wr_cb(struct px_conn *c, void *arg)
{
	struct http_txn *t = arg;
	struct http_state *h = t->conn;

	if (t->connecting) {
		int err = px_session_upstream_result(h->s, c);

		t->connecting = false;
		h->progress++;
		if (err != 0) {
			px_session_log(h->s, LOG_NOTICE, "http-upstream connect "
			    "failed: %s", strerror(err));
			px_conn_want_writable(t->srv.io, false);
			http_error(t, 502, "cannot connect to the server");
			http_txn_drive(t);
			return;
		}
		t->srv.connected = true;
		if (t->is_connect) {
			http_reply_established(t);
			http_txn_tunnel(t);
		}
	}
	if (px_conn_send(t->srv.io) == -1) {
		http_server_gone(t, errno);
		if (!h->gone)
			http_txn_drive(t);
		return;
	}
	h->progress++;
	http_txn_drive(t);
}
