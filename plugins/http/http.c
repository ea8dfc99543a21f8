/* http: an HTTP/1.x analyser. It owns both sides' I/O (the client socket
 * and one server connection at a time), parses every
 * head strictly, enforces the <http> policy, streams bodies without
 * copying them (evbuffer chains move from one side to the other), and
 * keeps server connections in the worker's pool between requests, so
 * many client connections share few server connections.
 *
 * One request is in flight per client connection: pipelined requests
 * wait, unread past `buffer`, in the client input and are answered in
 * order. CONNECT and accepted Upgrades end inspection: both sockets go to
 * the core's relay (splice). */
#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/dns.h>
#include <event2/util.h>

#include "analyser.h"
#include "conn.h"
#include "config.h"
#include "http.h"
#include "parse.h"

enum http_counter {
	HTTP_C_REQUESTS = 0,
	HTTP_C_DENIED,
	HTTP_C_BAD_REQUEST,
	HTTP_C_BAD_RESPONSE,
	HTTP_C_RETRIED,
	HTTP_C_TUNNELS,
	HTTP_C_TIMEOUTS,
};

static const char *const http_counter_names[] = {
	"requests", "denied", "bad_request", "bad_response", "retried",
	"tunnels", "timeouts", NULL,
};

enum http_body {
	HTTP_BODY_NONE = 0,
	HTTP_BODY_LENGTH,
	HTTP_BODY_CHUNKED,
	HTTP_BODY_CLOSE,	/* response only: until the server closes */
};

enum http_req_state {
	HTTP_REQ_HEAD = 0,	/* waiting for a request head */
	HTTP_REQ_WAIT,		/* head parsed, no server yet (resolving) */
	HTTP_REQ_BODY,
	HTTP_REQ_DONE,
};

enum http_resp_state {
	HTTP_RESP_NONE = 0,	/* no request sent yet */
	HTTP_RESP_HEAD,		/* waiting for the (final) response head */
	HTTP_RESP_BODY,
	HTTP_RESP_DONE,
};

struct http_server {
	struct px_conn		*io;		/* the core's; NULL: none */
	struct sockaddr_storage	 dst;
	bool			 reused;
	bool			 connected;
	bool			 got_bytes;	/* any response byte on it */
	bool			 keep;		/* reusable after this response */
	bool			 kept;		/* from this client's last request */
};

struct http_state {
	struct px_session	*s;
	const struct http_policy *pol;
	struct px_conn		*c;		/* the client: the core's */
	bool			 gone;		/* session closed: touch nothing */
	bool			 connecting;	/* srv.io.fd: connect under way */
	uint64_t		 progress;	/* bumped by every step that moved */
	struct http_server	 srv;
	size_t			 buffer;
	size_t			 head_scan;	/* http_head_end() resume point */
	unsigned		 nreq;		/* requests on this connection */
	bool			 client_eof;
	bool			 closing;	/* flushing a last reply */
	bool			 tunnel;	/* flushing toward the handoff */
	bool			 client_keep;	/* keep the client after this */
	bool			 client_10;	/* HTTP/1.0 client */
	bool			 transparent;	/* dst is the client's own */

	/* The transaction in flight. */
	enum http_req_state	 req;
	enum http_resp_state	 resp;
	enum http_body		 req_body, resp_body;
	uint64_t		 req_left, resp_left;
	struct http_chunk	 req_chunk, resp_chunk;
	bool			 dechunk;	/* 1.0 client, chunked response */
	bool			 is_head, is_connect, upgrade_ok;
	bool			 retried;
	bool			 replayable;	/* idempotent and bodiless */
	struct evbuffer		*req_copy;	/* head as sent, for one retry */
	struct evbuffer		*head_out;	/* the head being sent */
	struct evdns_getaddrinfo_request *dns;	/* forward mode: resolving */
	int			 status;
	uint64_t		 req_bytes, resp_bytes;
	struct timeval		 t_start;
	char			 method[24];
	char			 host[128];
	char			 path[256];
	const char		*verdict;
	char			 end_reason[160];	/* once closing */
	enum px_end_by		 end_by;
};

static void http_pump_request(struct http_state *h);
static void http_dispatch(struct http_state *h, const struct sockaddr *dst);
static void http_resolve(struct http_state *h, uint16_t port);
static void http_drive(struct http_state *h);
static void http_abort(struct http_state *h, enum px_end_by by,
    const char *reason);
static void http_next_request(struct http_state *h);
static void http_client_rd_cb(struct px_conn *c, void *arg);
static void http_client_wr_cb(struct px_conn *c, void *arg);
static void http_server_rd_cb(struct px_conn *c, void *arg);
static void http_server_wr_cb(struct px_conn *c, void *arg);

/* ---- small helpers ----------------------------------------------------- */

static const char *
http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

static void
http_copy(char *dst, size_t size, const char *src, size_t len)
{
	size_t i;

	if (len >= size)
		len = size - 1;
	/* Only printable ASCII reaches the log: no injected fields. */
	for (i = 0; i < len; i++)
		dst[i] = (src[i] > 0x20 && src[i] < 0x7f && src[i] != '"') ?
		    src[i] : '?';
	dst[len] = '\0';
}

static void
http_timer_set(struct http_state *h, uint64_t ms)
{
	px_session_timer(h->s, ms);
}

static void
http_log_request(struct http_state *h)
{
	char client[PX_ADDRSTRLEN], server[PX_ADDRSTRLEN];
	struct timeval now, d;

	if (h->method[0] == '\0')
		return;
	gettimeofday(&now, NULL);
	timersub(&now, &h->t_start, &d);
	px_session_log(h->s, LOG_INFO, "http-request client=%s method=%s "
	    "host=%s path=%s status=%d to-server=%llu to-client=%llu "
	    "duration=%ld.%03ld verdict=%s server=%s upstream=%s",
	    px_sockaddr_str(px_session_client(h->s), client, sizeof(client)),
	    h->method, h->host[0] ? h->host : "-", h->path, h->status,
	    (unsigned long long)h->req_bytes, (unsigned long long)h->resp_bytes,
	    (long)d.tv_sec, (long)(d.tv_usec / 1000),
	    h->verdict ? h->verdict : "accept",
	    h->srv.dst.ss_family ? px_sockaddr_str((struct sockaddr *)
	    &h->srv.dst, server, sizeof(server)) : "-",
	    h->srv.dst.ss_family == 0 ? "-" : h->srv.kept ? "kept" :
	    h->srv.reused ? "pooled" : "new");
	h->method[0] = '\0';
}


/* ---- server connection ------------------------------------------------- */

static void
http_server_drop(struct http_state *h, bool reusable)
{
	struct http_server *sv = &h->srv;

	if (sv->io == NULL)
		return;
	/* Not reusable with bytes still queued either way. */
	if (h->connecting || evbuffer_get_length(sv->io->out) != 0 ||
	    evbuffer_get_length(sv->io->in) != 0 || sv->io->eof)
		reusable = false;
	sv->io = NULL;
	h->connecting = false;
	px_session_upstream_close(h->s, (struct sockaddr *)&sv->dst,
	    reusable && sv->connected && h->pol->keepalive_server,
	    h->pol->server_pool, h->pol->server_idle_ms);
	sv->connected = false;
}

/* ---- replies from the proxy itself ------------------------------------- */

/* Stops reading the client and ends the session (with a FIN) once what
 * is queued for it is written; http_client_write_cb sees it drain. */
static void
http_close_when_flushed(struct http_state *h, enum px_end_by by,
    const char *reason)
{
	h->closing = true;
	h->end_by = by;
	snprintf(h->end_reason, sizeof(h->end_reason), "%s", reason);
	px_conn_read_enable(h->c, false);
	http_server_drop(h, false);
	http_timer_set(h, PX_FINISH_GRACE_MS);
	h->progress++;
}

/* Answers status with an error page, logs, and ends the client
 * connection once the page is written. */
static void
http_error(struct http_state *h, int status, const char *why)
{
	const struct http_policy *p = h->pol;
	struct evbuffer *out = h->c->out;
	struct evbuffer *body = evbuffer_new();
	const char *reason = http_reason(status);
	char end[160];
	size_t blen;
	/* 4xx: the policy or the parser refused; 408: the client was slow;
	 * 502-504: the server failed; other 5xx: the proxy did. */
	enum px_end_by by = status == 408 ? PX_END_TIMEOUT : status < 500 ?
	    PX_END_POLICY : status >= 502 && status <= 504 ?
	    PX_END_SERVER_FAIL : PX_END_PROXY;

	h->status = status;
	if (h->verdict == NULL)
		h->verdict = status >= 500 ? "error" : "deny";
	if (h->resp_bytes != 0) {
		/* Part of a response went out already: a reset, so that the
		 * client never takes what it got for the whole. */
		px_session_log(h->s, LOG_NOTICE, "http-error status=%d "
		    "reason=\"%s\" (after part of the response)", status, why);
		http_abort(h, by, "error: http: response cut off");
		return;
	}
	px_session_log(h->s, LOG_NOTICE, "http-error status=%d reason=\"%s\"",
	    status, why);
	if (body != NULL && !p->silent) {
		const char *tpl = status < HTTP_ERROR_PAGES ? p->pages[status] :
		    NULL;

		if (tpl == NULL)
			evbuffer_add_printf(body, "<!DOCTYPE html>\n<html><head>"
			    "<title>%d %s</title></head>\n<body><h1>%d %s</h1>\n"
			    "<p>%s</p>\n<hr><p>proxyd, session %llu</p></body>"
			    "</html>\n", status, reason, status, reason, why,
			    (unsigned long long)px_session_id(h->s));
		else {
			/* @STATUS@ @REASON@ @DETAIL@ @SESSION@ */
			const char *c = tpl;

			while (*c != '\0') {
				const char *at = strchr(c, '@');

				if (at == NULL) {
					evbuffer_add(body, c, strlen(c));
					break;
				}
				evbuffer_add(body, c, (size_t)(at - c));
				if (strncmp(at, "@STATUS@", 8) == 0) {
					evbuffer_add_printf(body, "%d", status);
					c = at + 8;
				} else if (strncmp(at, "@REASON@", 8) == 0) {
					evbuffer_add_printf(body, "%s", reason);
					c = at + 8;
				} else if (strncmp(at, "@DETAIL@", 8) == 0) {
					evbuffer_add_printf(body, "%s", why);
					c = at + 8;
				} else if (strncmp(at, "@SESSION@", 9) == 0) {
					evbuffer_add_printf(body, "%llu",
					    (unsigned long long)px_session_id(h->s));
					c = at + 9;
				} else {
					evbuffer_add(body, "@", 1);
					c = at + 1;
				}
			}
		}
	}
	blen = body != NULL ? evbuffer_get_length(body) : 0;
	/* Only when nothing of a response went out yet. */
	if (h->resp_bytes == 0) {
		evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: "
		    "text/html\r\nContent-Length: %zu\r\nConnection: close\r\n"
		    "Cache-Control: no-store\r\n\r\n", status, reason, blen);
		if (body != NULL && !h->is_head)
			evbuffer_add_buffer(out, body);
		h->resp_bytes = evbuffer_get_length(out);
		px_session_account(h->s, PX_TO_CLIENT, h->resp_bytes);
	}
	if (body != NULL)
		evbuffer_free(body);
	http_log_request(h);
	snprintf(end, sizeof(end), "%s: http %d: %s", status >= 500 ? "error" :
	    status == 408 ? "request-timeout" : "denied", status, why);
	http_close_when_flushed(h, by, end);
}

/* Ends the session now: reset both sides (a truncated message must not
 * look whole). */
static void
http_abort(struct http_state *h, enum px_end_by by, const char *reason)
{
	http_log_request(h);
	http_server_drop(h, false);
	px_session_end(h->s, by, reason);
}

/* ---- writing heads ----------------------------------------------------- */

static const struct http_header_rule *
http_header_rule(const struct http_header_rule *r, size_t n, const char *name,
    size_t len)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (r[i].action != HTTP_INSERT &&
		    http_token_eq(name, len, r[i].name))
			return &r[i];
	return NULL;
}

/* Hop-by-hop: never forwarded as they are (RFC 9110 7.6.1). conn is the
 * index of the Connection field, -1 if none. */
static bool
http_hop_by_hop(const struct http_head *m, int conn, const struct http_hdr *f)
{
	char name[64];
	unsigned i;

	/* By length first: this runs for every field of every message. */
	switch (f->nlen) {
	case 2:
		if (http_token_eq(f->name, 2, "te"))
			return true;
		break;
	case 7:
		if (http_token_eq(f->name, 7, "trailer") ||
		    http_token_eq(f->name, 7, "upgrade"))
			return true;
		break;
	case 10:
		if (http_token_eq(f->name, 10, "connection") ||
		    http_token_eq(f->name, 10, "keep-alive"))
			return true;
		break;
	case 16:
		if (http_token_eq(f->name, 16, "proxy-connection"))
			return true;
		break;
	}
	if (conn == -1 || f->nlen >= sizeof(name))
		return false;
	/* ...and whatever Connection names. */
	memcpy(name, f->name, f->nlen);
	name[f->nlen] = '\0';
	for (i = (unsigned)conn; i < m->nhdr; i++) {
		const struct http_hdr *c = &m->hdr[i];

		if (c->nlen == 10 && http_token_eq(c->name, c->nlen, "connection") &&
		    http_list_has(c->val, c->vlen, name))
			return true;
	}
	return false;
}

static int http_find(const struct http_head *m, const char *name);

/* Copies the fields of m to out through the policy's rules. */
static void
http_write_fields(struct evbuffer *out, const struct http_head *m,
    const struct http_header_rule *rules, size_t nrules, bool keep_upgrade,
    bool skip_xff, bool skip_te)
{
	int conn = http_find(m, "connection");
	unsigned i;
	size_t k;

	for (i = 0; i < m->nhdr; i++) {
		const struct http_hdr *f = &m->hdr[i];
		const struct http_header_rule *r;

		if (keep_upgrade && http_token_eq(f->name, f->nlen, "upgrade"))
			;	/* passes: the protocol was accepted */
		else if (http_hop_by_hop(m, conn, f))
			continue;
		if (skip_xff && http_token_eq(f->name, f->nlen,
		    "x-forwarded-for"))
			continue;
		if (skip_te && http_token_eq(f->name, f->nlen,
		    "transfer-encoding"))
			continue;
		r = http_header_rule(rules, nrules, f->name, f->nlen);
		if (r != NULL && r->action == HTTP_DROP)
			continue;
		evbuffer_add(out, f->name, f->nlen);
		evbuffer_add(out, ": ", 2);
		if (r != NULL && r->action == HTTP_CHANGE)
			evbuffer_add(out, r->value, strlen(r->value));
		else
			evbuffer_add(out, f->val, f->vlen);
		evbuffer_add(out, "\r\n", 2);
	}
	for (k = 0; k < nrules; k++)
		if (rules[k].action == HTTP_INSERT)
			evbuffer_add_printf(out, "%s: %s\r\n", rules[k].name,
			    rules[k].value);
}

static int
http_find(const struct http_head *m, const char *name)
{
	unsigned i;

	for (i = 0; i < m->nhdr; i++)
		if (http_token_eq(m->hdr[i].name, m->hdr[i].nlen, name))
			return (int)i;
	return -1;
}

static void
http_client_ip(struct http_state *h, char *buf, size_t size)
{
	const struct sockaddr *sa = px_session_client(h->s);

	if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		    buf, (socklen_t)size);
	else
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
		    buf, (socklen_t)size);
}

/* The request head as it goes to the server. */
static void
http_write_request(struct http_state *h, const struct http_head *m,
    const char *target, size_t tlen, const struct sockaddr *dst,
    struct evbuffer *out)
{
	const struct http_policy *p = h->pol;
	char ip[INET6_ADDRSTRLEN];
	int xff = http_find(m, "x-forwarded-for");

	evbuffer_add(out, m->method, m->mlen);
	evbuffer_add(out, " ", 1);
	evbuffer_add(out, target, tlen);
	evbuffer_add(out, " HTTP/1.1\r\n", 11);
	http_write_fields(out, m, p->reqh, p->nreqh, h->upgrade_ok,
	    p->xff != HTTP_XFF_NO, false);
	if (m->host == -1) {
		/* We speak HTTP/1.1 to the server, which requires Host; an
		 * HTTP/1.0 client may not have sent one. */
		char a[PX_ADDRSTRLEN];

		evbuffer_add_printf(out, "Host: %s\r\n", h->host[0] ? h->host :
		    px_sockaddr_str(dst, a, sizeof(a)));
	}
	if (p->xff != HTTP_XFF_NO) {
		http_client_ip(h, ip, sizeof(ip));
		if (p->xff == HTTP_XFF_APPEND && xff != -1)
			evbuffer_add_printf(out, "X-Forwarded-For: %.*s, %s\r\n",
			    (int)m->hdr[xff].vlen, m->hdr[xff].val, ip);
		else
			evbuffer_add_printf(out, "X-Forwarded-For: %s\r\n", ip);
	}
	if (p->via)
		evbuffer_add(out, m->minor ? "Via: 1.1 proxyd\r\n" :
		    "Via: 1.0 proxyd\r\n", 17);
	if (h->upgrade_ok)
		evbuffer_add(out, "Connection: upgrade\r\n", 21);
	else if (!p->keepalive_server)
		evbuffer_add(out, "Connection: close\r\n", 19);
	evbuffer_add(out, "\r\n", 2);
}

/* ---- policy ------------------------------------------------------------ */

/* Returns 0 (accept) or the status to deny with; -1 to abort. */
static int
http_check_request(struct http_state *h, const struct http_head *m,
    uint16_t port, const char **why)
{
	const struct http_policy *p = h->pol;
	size_t i;

	if (p->nreq == 0) {
		static char *dflt_methods[] = { "GET", "HEAD", "POST", "PUT",
		    "DELETE", "OPTIONS", "PATCH" };
		static const struct http_words dflt = { .w = dflt_methods,
		    .n = 7 };

		if (!http_words_has(&dflt, m->method, m->mlen)) {
			*why = "method not allowed by default policy";
			return 405;
		}
	} else {
		for (i = 0; i < p->nreq; i++) {
			const struct http_request_rule *r = &p->req[i];
			size_t k;
			bool port_ok = r->nports == 0;

			if (!http_words_has(&r->methods, m->method, m->mlen))
				continue;
			for (k = 0; k < r->nports; k++)
				if (r->ports[k] == port)
					port_ok = true;
			if (!port_ok)
				continue;
			if (r->action == HTTP_ACCEPT)
				break;
			*why = "method denied by policy";
			return r->action == HTTP_ABORT ? -1 : r->status;
		}
		if (i == p->nreq) {
			*why = "no request rule matches";
			return 405;
		}
	}
	for (i = 0; i < p->nurl; i++) {
		const struct http_url_rule *r = &p->url[i];

		if (r->host != NULL && fnmatch(r->host, h->host, FNM_CASEFOLD) != 0)
			continue;
		if (r->path != NULL && fnmatch(r->path, h->path, 0) != 0)
			continue;
		if (r->action == HTTP_ACCEPT)
			return 0;
		*why = "URL denied by policy";
		return r->action == HTTP_ABORT ? -1 : r->status;
	}
	return 0;
}

/* "host[:port]" from a Host header or authority; IP literals resolve to an
 * address, names leave *ss family 0. */
static int
http_authority(const char *a, size_t len, uint16_t defport, char *host,
    size_t hsize, struct sockaddr_storage *ss, uint16_t *port)
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

		if (plen == 0 || plen > 5)
			return -1;
		memcpy(tmp, colon + 1, plen);
		tmp[plen] = '\0';
		if (px_parse_uint(tmp, 1, 65535, &u, &why) == -1)
			return -1;
		*port = (uint16_t)u;
	}
	if (hlen == 0 || hlen >= hsize)
		return -1;
	http_copy(host, hsize, a, hlen);
	if (a[0] == '[') {
		memcpy(tmp, a + 1, hlen - 2);
		tmp[hlen - 2] = '\0';
	} else {
		memcpy(tmp, a, hlen);
		tmp[hlen] = '\0';
	}
	if (px_parse_ip(tmp, *port, ss, &sl, &why) == -1)
		memset(ss, 0, sizeof(*ss));
	return 0;
}

/* ---- request ----------------------------------------------------------- */


static int
http_server_open(struct http_state *h, const struct sockaddr *dst)
{
	struct http_server *sv = &h->srv;
	const char *stage = "connect";
	bool reused;

	/* A tunnel takes its connection for good: never a pooled one. */
	sv->io = px_session_upstream_open(h->s, dst, !h->is_connect, &reused,
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
	/* A new one is connecting: writable means done (or failed). */
	sv->connected = reused;
	h->connecting = !reused;
	if (!reused)
		px_conn_want_writable(sv->io, true);
	return 0;
}

static void
http_start_tunnel(struct http_state *h);

/* A complete request head is at the front of the client input. */
static void
http_handle_request(struct http_state *h, const char *buf, size_t head_len)
{
	static _Thread_local struct http_head m;
	const struct http_policy *p = h->pol;
	struct evbuffer *cin = h->c->in;
	struct sockaddr_storage dst, hostaddr;
	const char *why = NULL, *target;
	size_t tlen;
	uint16_t port = 0, hostport = 0;
	int rc;
	bool forward = px_session_dst(h->s)->sa_family == 0;

	gettimeofday(&h->t_start, NULL);
	h->verdict = NULL;
	h->status = 0;
	h->req_bytes = h->resp_bytes = 0;
	h->host[0] = '\0';
	h->retried = false;
	rc = http_parse_head(buf, head_len, true, &p->lim, &m, &why);
	http_copy(h->method, sizeof(h->method), rc == 0 ? m.method : "-",
	    rc == 0 ? m.mlen : 1);
	http_copy(h->path, sizeof(h->path), rc == 0 ? m.target : "-",
	    rc == 0 ? m.tlen : 1);
	px_session_count(h->s, HTTP_C_REQUESTS, 1);
	h->nreq++;
	if (rc != 0) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(h, rc, why);
		return;
	}
	h->client_10 = m.minor == 0;
	h->is_head = http_token_eq(m.method, m.mlen, "HEAD");
	h->is_connect = http_token_eq(m.method, m.mlen, "CONNECT");
	target = m.target;
	tlen = m.tlen;
	if (m.host != -1 && http_authority(m.hdr[m.host].val,
	    m.hdr[m.host].vlen, 80, h->host, sizeof(h->host), &hostaddr,
	    &hostport) == -1) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(h, 400, "malformed Host");
		return;
	}
	if (h->is_connect) {
		if (!forward) {
			http_error(h, 405, "CONNECT is only for forward mode");
			return;
		}
		if (http_authority(m.target, m.tlen, 0, h->host,
		    sizeof(h->host), &dst, &port) == -1 || port == 0) {
			http_error(h, 400, "malformed CONNECT target");
			return;
		}
	} else if (forward) {
		/* absolute-form: http://authority/path */
		const char *a, *slash;

		if (m.tlen < 8 || strncasecmp(m.target, "http://", 7) != 0) {
			http_error(h, 400, "forward mode needs an absolute URI");
			return;
		}
		a = m.target + 7;
		slash = memchr(a, '/', m.tlen - 7);
		if (http_authority(a, slash ? (size_t)(slash - a) : m.tlen - 7,
		    80, h->host, sizeof(h->host), &dst, &port) == -1) {
			http_error(h, 400, "malformed URI authority");
			return;
		}
		target = slash ? slash : "/";
		tlen = slash ? m.tlen - (size_t)(slash - m.target) : 1;
		http_copy(h->path, sizeof(h->path), target, tlen);
	} else {
		if (m.tlen == 0 || (m.target[0] != '/' &&
		    !(m.tlen == 1 && m.target[0] == '*'))) {
			http_error(h, 400, "request target is not in origin form");
			return;
		}
		memcpy(&dst, px_session_dst(h->s), sizeof(dst));
		port = px_sockaddr_port((struct sockaddr *)&dst);
		/* Transparent: the Host the client names must be where it
		 * was going (an IP literal is checked, a name by its port). */
		if (p->check_host && m.host != -1 && h->transparent &&
		    (hostport != port || (hostaddr.ss_family != 0 &&
		    !px_sockaddr_same_host((struct sockaddr *)&hostaddr,
		    (struct sockaddr *)&dst)))) {
			px_session_count(h->s, HTTP_C_DENIED, 1);
			http_error(h, 400, "Host does not match the destination");
			return;
		}
	}
	if ((rc = http_check_request(h, &m, port, &why)) != 0) {
		px_session_count(h->s, HTTP_C_DENIED, 1);
		if (rc == -1) {
			h->verdict = "abort";
			http_abort(h, PX_END_POLICY,
			    "denied: http request aborted by policy");
			return;
		}
		http_error(h, rc, why);
		return;
	}
	/* Framing of the request body. */
	h->req_body = HTTP_BODY_NONE;
	if (m.chunked) {
		h->req_body = HTTP_BODY_CHUNKED;
		memset(&h->req_chunk, 0, sizeof(h->req_chunk));
	} else if (m.content_length > 0) {
		h->req_body = HTTP_BODY_LENGTH;
		h->req_left = (uint64_t)m.content_length;
		if (p->max_body != 0 && h->req_left > p->max_body) {
			http_error(h, 413, "request body over max-body");
			return;
		}
	}
	h->upgrade_ok = m.upgrade != -1 && m.conn_upgrade && !h->is_connect &&
	    http_words_has(&p->upgrade, m.hdr[m.upgrade].val,
	    strcspn(m.hdr[m.upgrade].val, "/ ,\t") < m.hdr[m.upgrade].vlen ?
	    strcspn(m.hdr[m.upgrade].val, "/ ,\t") : m.hdr[m.upgrade].vlen);
	h->client_keep = p->keepalive_client && !m.conn_close &&
	    (m.minor == 1 || m.conn_keep_alive) &&
	    (p->max_requests == 0 || h->nreq < p->max_requests);
	h->replayable = h->req_body == HTTP_BODY_NONE && !h->is_connect &&
	    (h->is_head || http_token_eq(m.method, m.mlen, "GET") ||
	    http_token_eq(m.method, m.mlen, "OPTIONS") ||
	    http_token_eq(m.method, m.mlen, "DELETE") ||
	    http_token_eq(m.method, m.mlen, "PUT") ||
	    http_token_eq(m.method, m.mlen, "TRACE"));

	/* The head as it will go out, whatever connection carries it. */
	evbuffer_drain(h->head_out, evbuffer_get_length(h->head_out));
	if (!h->is_connect)
		http_write_request(h, &m, target, tlen, (struct sockaddr *)&dst,
		    h->head_out);
	evbuffer_drain(cin, head_len);
	h->req = HTTP_REQ_WAIT;
	h->resp = HTTP_RESP_HEAD;
	http_timer_set(h, p->response_timeout_ms);
	if (dst.ss_family == 0) {
		http_resolve(h, port);
		return;
	}
	http_dispatch(h, (struct sockaddr *)&dst);
}

/* The request head is in head_out and dst is known: pick a server
 * connection (this client's, a pooled one or a new one) and send. */
static void
http_dispatch(struct http_state *h, const struct sockaddr *dst)
{
	struct evbuffer *sout;
	size_t n;

	if (h->srv.io != NULL && (h->is_connect || memcmp(&h->srv.dst, dst,
	    px_sockaddr_len(dst)) != 0))
		http_server_drop(h, true);
	if (h->srv.io != NULL) {
		h->srv.reused = true;
		h->srv.kept = true;
	} else if (http_server_open(h, dst) == -1) {
		h->req = HTTP_REQ_DONE;
		http_error(h, 502, "cannot connect to the server");
		return;
	}
	h->progress++;
	if (h->is_connect) {
		/* The 200 goes out once the server accepted: see
		 * http_server_wr_cb. Nothing of the client's goes before. */
		h->req = HTTP_REQ_DONE;
		return;
	}
	if (h->req_copy != NULL)
		evbuffer_free(h->req_copy);
	h->req_copy = NULL;
	sout = h->srv.io->out;
	n = evbuffer_get_length(h->head_out);
	/* A replayable request on a reused connection keeps its head for one
	 * retry; the output only references it. */
	if (h->replayable && h->srv.reused &&
	    (h->req_copy = evbuffer_new()) != NULL) {
		evbuffer_add_buffer(h->req_copy, h->head_out);
		evbuffer_add_buffer_reference(sout, h->req_copy);
	} else
		evbuffer_add_buffer(sout, h->head_out);
	h->req_bytes += n;
	px_session_account(h->s, PX_TO_SERVER, n);
	h->req = h->req_body == HTTP_BODY_NONE ? HTTP_REQ_DONE : HTTP_REQ_BODY;
	if (h->req == HTTP_REQ_BODY)
		http_pump_request(h);
}

static void
http_resolved(int result, struct evutil_addrinfo *ai, void *arg)
{
	struct http_state *h = arg;

	if (result == EVUTIL_EAI_CANCEL)
		return;		/* the session is closing: h is going */
	h->dns = NULL;
	if (result != 0 || ai == NULL) {
		char why[192];

		snprintf(why, sizeof(why), "cannot resolve %s: %s", h->host,
		    evutil_gai_strerror(result));
		if (ai != NULL)
			evutil_freeaddrinfo(ai);
		h->req = HTTP_REQ_DONE;
		http_error(h, 502, why);
	} else {
		struct sockaddr_storage dst;

		memset(&dst, 0, sizeof(dst));
		memcpy(&dst, ai->ai_addr, ai->ai_addrlen <= sizeof(dst) ?
		    ai->ai_addrlen : sizeof(dst));
		evutil_freeaddrinfo(ai);
		http_dispatch(h, (struct sockaddr *)&dst);
	}
	if (!h->gone)
		http_drive(h);
}

/* Per worker thread: each worker has one event_base, so one resolver
 * (nameservers from /etc/resolv.conf, names from /etc/hosts). */
static _Thread_local struct evdns_base *http_dns;

static void
http_resolve(struct http_state *h, uint16_t port)
{
	struct evutil_addrinfo hints;
	char service[8];
	char name[sizeof(h->host)];

	if (http_dns == NULL)
		http_dns = evdns_base_new(px_session_base(h->s),
		    EVDNS_BASE_INITIALIZE_NAMESERVERS |
		    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (http_dns == NULL) {
		h->req = HTTP_REQ_DONE;
		http_error(h, 502, "no resolver for forward mode");
		return;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
	snprintf(service, sizeof(service), "%u", port);
	snprintf(name, sizeof(name), "%s", h->host);
	h->dns = evdns_getaddrinfo(http_dns, name, service, &hints,
	    http_resolved, h);
	/* NULL: answered already (from /etc/hosts), callback done. */
}

static void
http_worker_exit(void)
{
	if (http_dns != NULL)
		evdns_base_free(http_dns, 1);
	http_dns = NULL;
}

/* Moves request body bytes from the client to the server, up to the
 * server output's limit. */
static void
http_pump_request(struct http_state *h)
{
	struct evbuffer *cin = h->c->in;
	struct evbuffer *sout;

	if (h->req != HTTP_REQ_BODY || h->srv.io == NULL)
		return;
	sout = h->srv.io->out;
	while (h->req == HTTP_REQ_BODY) {
		size_t avail = evbuffer_get_length(cin), room, n;
		size_t queued = evbuffer_get_length(sout);

		if (avail == 0 || queued >= h->buffer)
			break;
		room = h->buffer - queued;
		if (h->req_body == HTTP_BODY_LENGTH) {
			n = avail < room ? avail : room;
			if (n > h->req_left)
				n = (size_t)h->req_left;
			h->req_left -= n;
			if (h->req_left == 0)
				h->req = HTTP_REQ_DONE;
		} else {
			/* Framing bytes are parsed, data is only counted. */
			struct evbuffer_iovec v;
			const char *why;
			ssize_t k;

			if (evbuffer_peek(cin, -1, NULL, &v, 1) < 1)
				break;
			n = v.iov_len < room ? v.iov_len : room;
			k = http_chunk_feed(&h->req_chunk, v.iov_base, n,
			    &h->pol->lim, &why);
			/* The server got part of the body: its connection is
			 * dropped with the error (http_close_when_flushed), so
			 * it never takes the part for a whole request. */
			if (k < 0) {
				px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
				h->req = HTTP_REQ_DONE;
				http_error(h, 400, why);
				return;
			}
			n = (size_t)k;
			if (h->pol->max_body != 0 &&
			    h->req_chunk.body > h->pol->max_body) {
				px_session_count(h->s, HTTP_C_DENIED, 1);
				h->req = HTTP_REQ_DONE;
				http_error(h, 413, "request body over max-body");
				return;
			}
			if (h->req_chunk.state == HTTP_CHUNK_DONE)
				h->req = HTTP_REQ_DONE;
		}
		evbuffer_remove_buffer(cin, sout, n);
		h->progress++;
		h->req_bytes += n;
		px_session_account(h->s, PX_TO_SERVER, n);
	}
	px_session_active(h->s);
}

/* ---- response ---------------------------------------------------------- */

static void
http_write_response(struct http_state *h, const struct http_head *m,
    struct evbuffer *out)
{
	const struct http_policy *p = h->pol;

	{
		char line[16] = "HTTP/1.1 000 ";

		line[9] = (char)('0' + m->status / 100);
		line[10] = (char)('0' + m->status / 10 % 10);
		line[11] = (char)('0' + m->status % 10);
		evbuffer_add(out, line, 13);
	}
	evbuffer_add(out, m->reason, m->rlen);
	evbuffer_add(out, "\r\n", 2);
	http_write_fields(out, m, p->resph, p->nresph, m->status == 101,
	    false, h->dechunk && m->status >= 200);
	if (p->via)
		evbuffer_add(out, m->minor ? "Via: 1.1 proxyd\r\n" :
		    "Via: 1.0 proxyd\r\n", 17);
	if (m->status == 101)
		evbuffer_add(out, "Connection: upgrade\r\n", 21);
	else if (m->status >= 200) {
		if (!h->client_keep)
			evbuffer_add(out, "Connection: close\r\n", 19);
		else if (h->client_10)
			evbuffer_add(out, "Connection: keep-alive\r\n", 24);
	}
	evbuffer_add(out, "\r\n", 2);
}

/* A response head is complete at the front of the server input. Returns
 * false when the transaction ended. */
static bool
http_handle_response(struct http_state *h, const char *buf, size_t head_len)
{
	static _Thread_local struct http_head m;
	struct evbuffer *sin = h->srv.io->in;
	struct evbuffer *cout = h->c->out;
	const char *why;
	size_t before;
	int rc;

	rc = http_parse_head(buf, head_len, false, &h->pol->lim, &m, &why);
	if (rc != 0) {
		px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
		px_session_log(h->s, LOG_NOTICE, "http-bad-response reason=\"%s\"",
		    why);
		http_error(h, 502, why);
		return false;
	}
	if (m.status == 101 && !h->upgrade_ok) {
		px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
		http_error(h, 502, "101 without an accepted Upgrade");
		return false;
	}
	before = evbuffer_get_length(cout);
	/* Framing: RFC 9112 6.3, in order. */
	h->resp_body = HTTP_BODY_CLOSE;
	if (h->is_head || m.status < 200 || m.status == 204 || m.status == 304)
		h->resp_body = HTTP_BODY_NONE;
	else if (m.chunked)
		h->resp_body = HTTP_BODY_CHUNKED;
	else if (m.content_length >= 0) {
		h->resp_body = m.content_length ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
		h->resp_left = (uint64_t)m.content_length;
	}
	h->srv.keep = !m.conn_close && m.minor == 1 &&
	    h->resp_body != HTTP_BODY_CLOSE;
	if (m.status >= 200 || m.status == 101) {
		h->status = m.status;
		if (h->resp_body == HTTP_BODY_CLOSE)
			h->client_keep = false;
		h->dechunk = h->client_10 && h->resp_body == HTTP_BODY_CHUNKED;
		if (h->dechunk) {
			/* An HTTP/1.0 client cannot read chunks: send the
			 * data, end it by closing. */
			h->client_keep = false;
			memset(&h->resp_chunk, 0, sizeof(h->resp_chunk));
		}
	}
	http_write_response(h, &m, cout);
	evbuffer_drain(sin, head_len);
	h->resp_bytes += evbuffer_get_length(cout) - before;
	px_session_account(h->s, PX_TO_CLIENT, evbuffer_get_length(cout) - before);
	if (m.status == 101) {
		http_start_tunnel(h);
		return false;
	}
	if (m.status < 200) {
		/* Interim (100, 103): the final response follows. */
		h->resp = HTTP_RESP_HEAD;
		return true;
	}
	if (h->resp_body == HTTP_BODY_CHUNKED)
		memset(&h->resp_chunk, 0, sizeof(h->resp_chunk));
	h->resp = h->resp_body == HTTP_BODY_NONE ? HTTP_RESP_DONE :
	    HTTP_RESP_BODY;
	http_timer_set(h, 0);
	return true;
}

/* Moves response body bytes to the client, up to its output's limit. */
static void
http_pump_response(struct http_state *h)
{
	struct evbuffer *sin = h->srv.io->in;
	struct evbuffer *cout = h->c->out;

	while (h->resp == HTTP_RESP_BODY) {
		size_t avail = evbuffer_get_length(sin), room, n;
		size_t queued = evbuffer_get_length(cout);
		bool data = true;

		if (avail == 0 || queued >= h->buffer)
			break;
		room = h->buffer - queued;
		n = avail < room ? avail : room;
		if (h->resp_body == HTTP_BODY_LENGTH) {
			if (n > h->resp_left)
				n = (size_t)h->resp_left;
			h->resp_left -= n;
			if (h->resp_left == 0)
				h->resp = HTTP_RESP_DONE;
		} else if (h->resp_body == HTTP_BODY_CHUNKED) {
			struct evbuffer_iovec v;
			enum http_chunk_state st = h->resp_chunk.state;
			const char *why;
			ssize_t k;

			if (evbuffer_peek(sin, -1, NULL, &v, 1) < 1)
				break;
			if (n > v.iov_len)
				n = v.iov_len;
			/* With dechunking, feed framing and data separately:
			 * framing a byte at a time (a few per chunk), so the
			 * data after a size line is never taken for framing. */
			if (h->dechunk && st == HTTP_CHUNK_DATA &&
			    n > h->resp_chunk.left)
				n = (size_t)h->resp_chunk.left;
			else if (h->dechunk && st != HTTP_CHUNK_DATA)
				n = 1;
			k = http_chunk_feed(&h->resp_chunk, v.iov_base, n,
			    &h->pol->lim, &why);
			if (k < 0) {
				px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
				px_session_log(h->s, LOG_NOTICE,
				    "http-bad-response reason=\"%s\"", why);
				h->verdict = "error";
				http_abort(h, PX_END_SERVER_FAIL,
				    "error: malformed chunked response");
				return;
			}
			n = (size_t)k;
			if (h->dechunk && st != HTTP_CHUNK_DATA)
				data = false;
			if (h->dechunk && st == HTTP_CHUNK_DATA)
				data = true;
			if (h->resp_chunk.state == HTTP_CHUNK_DONE)
				h->resp = HTTP_RESP_DONE;
		}
		if (!data) {
			evbuffer_drain(sin, n);
			h->progress++;
			continue;
		}
		evbuffer_remove_buffer(sin, cout, n);
		h->progress++;
		h->resp_bytes += n;
		px_session_account(h->s, PX_TO_CLIENT, n);
	}
	px_session_active(h->s);
}

/* The response is complete (and so is the request). */
static void
http_transaction_done(struct http_state *h)
{
	bool keep_server = h->srv.keep && h->req == HTTP_REQ_DONE;

	/* Answered before its body was all sent (an early 413, say): where
	 * the next request would start is unknown, so none is read. */
	if (h->req != HTTP_REQ_DONE)
		h->client_keep = false;
	http_log_request(h);
	if (keep_server && h->client_keep && !h->client_eof) {
		/* Stays with this client while it keeps asking the same
		 * server: no pool round trip, no event churn. It goes to the
		 * pool when the client leaves. */
		h->srv.got_bytes = false;
	} else
		http_server_drop(h, keep_server);
	if (h->req_copy != NULL)
		evbuffer_free(h->req_copy);
	h->req_copy = NULL;
	h->resp = HTTP_RESP_NONE;
	h->req = HTTP_REQ_HEAD;
	if (!h->client_keep || (h->client_eof &&
	    evbuffer_get_length(h->c->in) == 0)) {
		/* Everything is sent once the output drains. */
		http_close_when_flushed(h, h->client_eof ? PX_END_CLIENT :
		    PX_END_SERVER, h->client_eof ? "client-closed" :
		    "server-closed");
		return;
	}
	http_timer_set(h, h->pol->request_timeout_ms);
	http_next_request(h);
}

/* ---- tunnels (CONNECT, Upgrade) --------------------------------------- */

/* Both outputs are in the kernel and both inputs moved across: the rest
 * is a plain stream for the core's relay (splice). */
static void
http_tunnel_handoff(struct http_state *h)
{
	http_timer_set(h, 0);
	http_log_request(h);
	px_session_count(h->s, HTTP_C_TUNNELS, 1);
	/* The core takes both sockets over. */
	h->srv.io = NULL;
	h->c = NULL;
	if (px_session_tunnel(h->s) == -1)
		px_session_end(h->s, PX_END_PROXY,
		    "error: cannot start the tunnel relay");
}

static void
http_start_tunnel(struct http_state *h)
{
	size_t n;

	h->tunnel = true;
	h->progress++;
	px_conn_read_enable(h->c, false);
	px_conn_read_enable(h->srv.io, false);
	n = evbuffer_get_length(h->c->in);
	evbuffer_add_buffer(h->srv.io->out, h->c->in);
	px_session_account(h->s, PX_TO_SERVER, n);
	n = evbuffer_get_length(h->srv.io->in);
	evbuffer_add_buffer(h->c->out, h->srv.io->in);
	px_session_account(h->s, PX_TO_CLIENT, n);
}

/* ---- driving ----------------------------------------------------------- */

/* Parses and handles the next request head, if one is there. */
static void
http_next_request(struct http_state *h)
{
	struct evbuffer *cin = h->c->in;
	size_t len = evbuffer_get_length(cin), want;
	const char *buf;
	ssize_t end;

	if (h->closing || h->tunnel || h->req != HTTP_REQ_HEAD ||
	    h->resp != HTTP_RESP_NONE || len == 0)
		return;
	want = len < h->pol->lim.max_header_bytes + 4 ? len :
	    h->pol->lim.max_header_bytes + 4;
	buf = (const char *)evbuffer_pullup(cin, (ssize_t)want);
	if (buf == NULL) {
		http_abort(h, PX_END_PROXY, "error: out of memory");
		return;
	}
	end = http_head_end(buf, want, h->pol->lim.max_header_bytes,
	    &h->head_scan);
	if (end == 0) {
		if (h->client_eof) {
			/* Nothing more is coming to complete it. */
			px_session_log(h->s, LOG_NOTICE, "http-error reason="
			    "\"client closed inside a request head\"");
			px_session_end(h->s, PX_END_CLIENT, "client-closed");
		}
		return;
	}
	h->head_scan = 0;
	h->progress++;
	if (end < 0) {
		http_copy(h->method, sizeof(h->method), "-", 1);
		http_copy(h->path, sizeof(h->path), "-", 1);
		gettimeofday(&h->t_start, NULL);
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(h, 431, "request head over max-header-bytes");
		return;
	}
	http_handle_request(h, buf, (size_t)end);
}

/* Response bytes from the server: heads, then body. */
static void
http_server_input(struct http_state *h)
{
	struct evbuffer *sin = h->srv.io->in;

	while (h->resp == HTTP_RESP_HEAD && !h->closing && !h->gone) {
		size_t len = evbuffer_get_length(sin), want, scan = 0;
		const char *buf;
		ssize_t end;

		if (len == 0)
			return;
		want = len < h->pol->lim.max_header_bytes + 4 ? len :
		    h->pol->lim.max_header_bytes + 4;
		if ((buf = (const char *)evbuffer_pullup(sin, (ssize_t)want)) ==
		    NULL) {
			http_abort(h, PX_END_PROXY, "error: out of memory");
			return;
		}
		end = http_head_end(buf, want, h->pol->lim.max_header_bytes,
		    &scan);
		if (end == 0)
			return;
		h->progress++;
		if (end < 0) {
			px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
			http_error(h, 502, "response head over max-header-bytes");
			return;
		}
		if (!http_handle_response(h, buf, (size_t)end))
			return;
	}
	if (h->gone || h->closing || h->tunnel)
		return;
	if (h->resp == HTTP_RESP_NONE && evbuffer_get_length(sin) != 0) {
		/* Bytes nobody asked for: the connection is not reusable. */
		h->srv.keep = false;
		evbuffer_drain(sin, evbuffer_get_length(sin));
		return;
	}
	if (h->resp == HTTP_RESP_BODY)
		http_pump_response(h);
	/* A close-delimited body whose end was held up by a full client. */
	if (h->resp == HTTP_RESP_BODY && h->resp_body == HTTP_BODY_CLOSE &&
	    h->srv.io->eof && evbuffer_get_length(sin) == 0) {
		h->resp = HTTP_RESP_DONE;
		h->srv.keep = false;
	}
	if (!h->gone && h->resp == HTTP_RESP_DONE)
		http_transaction_done(h);
}

/* Retries a replayable request once on a new connection when a pooled
 * or kept one turned out dead before answering anything. */
static bool
http_retry(struct http_state *h)
{
	struct sockaddr_storage dst;

	if (!h->srv.reused || h->srv.got_bytes || h->retried ||
	    h->req_copy == NULL || h->resp != HTTP_RESP_HEAD)
		return false;
	memcpy(&dst, &h->srv.dst, sizeof(dst));
	http_server_drop(h, false);
	if (http_server_open(h, (struct sockaddr *)&dst) == -1)
		return false;
	if (h->srv.reused) {
		/* The pool may hold more dead ones: only a fresh connection
		 * counts as the retry. */
		http_server_drop(h, false);
		return false;
	}
	h->retried = true;
	px_session_count(h->s, HTTP_C_RETRIED, 1);
	evbuffer_add_buffer_reference(h->srv.io->out, h->req_copy);
	h->progress++;
	return true;
}

/* The server connection ended (EOF) or failed (err != 0). */
static void
http_server_gone(struct http_state *h, int err)
{
	bool eof = err == 0;

	h->progress++;
	if (h->tunnel) {
		px_session_endf(h->s, PX_END_SERVER_FAIL, "server-error: %s",
		    err ? strerror(err) : "closed during tunnel setup");
		return;
	}
	if (http_retry(h))
		return;
	if (h->resp == HTTP_RESP_BODY && h->resp_body == HTTP_BODY_CLOSE &&
	    eof) {
		/* Close-delimited: the end of the body. */
		http_pump_response(h);
		if (h->gone)
			return;
		if (evbuffer_get_length(h->srv.io->in) == 0) {
			h->resp = HTTP_RESP_DONE;
			h->srv.keep = false;
			http_transaction_done(h);
		}
		/* Else the client output is full: the rest moves as it
		 * drains, and EOF is seen again then. */
		return;
	}
	if (h->resp == HTTP_RESP_NONE) {
		/* Idle between requests: nothing lost. */
		http_server_drop(h, false);
		return;
	}
	px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
	if (h->resp == HTTP_RESP_HEAD && h->resp_bytes == 0) {
		http_error(h, 502, eof ? "server closed before responding" :
		    "server connection failed");
		return;
	}
	h->verdict = "error";
	http_abort(h, PX_END_SERVER_FAIL, eof ?
	    "server-closed: inside a response" :
	    "server-error: inside a response");
}

/* The client closed its side. */
static void
http_client_eof(struct http_state *h)
{
	h->client_eof = true;
	h->progress++;
	px_conn_read_enable(h->c, false);
	if (h->closing || h->tunnel)
		return;
	if (h->req == HTTP_REQ_HEAD && h->resp == HTTP_RESP_NONE) {
		if (evbuffer_get_length(h->c->in) != 0)
			px_session_log(h->s, LOG_NOTICE, "http-error "
			    "reason=\"client closed inside a request head\"");
		px_session_end(h->s, PX_END_CLIENT, "client-closed");
		return;
	}
	if (h->req == HTTP_REQ_BODY || (h->req == HTTP_REQ_WAIT &&
	    h->req_body != HTTP_BODY_NONE)) {
		h->verdict = "error";
		http_abort(h, PX_END_CLIENT_FAIL,
		    "client-closed: inside a request body");
		return;
	}
	/* The request is complete: its response still goes out, and so do
	 * those of requests pipelined before the FIN (http_next_request
	 * ends the session when no complete one is left). */
}

static void
http_client_failed(struct http_state *h, int err)
{
	h->verdict = h->verdict ? h->verdict : "error";
	http_log_request(h);
	http_server_drop(h, false);
	px_session_endf(h->s, PX_END_CLIENT_FAIL, "client-error: %s",
	    strerror(err));
}

/* Runs every step that can make progress, writes what is queued, and sets
 * which sockets to read. Called at the end of every event. */
static void
http_drive(struct http_state *h)
{
	int rounds;

	for (rounds = 0; rounds < 16 && !h->gone; rounds++) {
		uint64_t before = h->progress;

		if (!h->closing && !h->tunnel) {
			if (h->req == HTTP_REQ_HEAD)
				http_next_request(h);
			else if (h->req == HTTP_REQ_BODY)
				http_pump_request(h);
			if (h->gone)
				return;
			if (h->srv.io != NULL && h->srv.connected) {
				http_server_input(h);
				if (h->gone)
					return;
			}
		}
		if (evbuffer_get_length(h->c->out) != 0 && !px_conn_write_blocked(h->c) &&
		    px_conn_send(h->c) == -1) {
			http_client_failed(h, errno);
			return;
		}
		if (h->srv.io != NULL && h->srv.connected &&
		    evbuffer_get_length(h->srv.io->out) != 0 && !px_conn_write_blocked(h->srv.io) &&
		    px_conn_send(h->srv.io) == -1) {
			http_server_gone(h, errno);
			continue;
		}
		if (h->closing) {
			if (evbuffer_get_length(h->c->out) == 0)
				px_session_finish(h->s, h->end_by,
				    h->end_reason);
			return;
		}
		if (h->tunnel) {
			if (evbuffer_get_length(h->c->out) == 0 &&
			    evbuffer_get_length(h->srv.io->out) == 0)
				http_tunnel_handoff(h);
			return;
		}
		if (h->progress == before)
			break;
	}
	if (h->gone)
		return;
	/* Read a side only while its unprocessed input is under `buffer`. */
	px_conn_read_enable(h->c, !h->client_eof &&
	    evbuffer_get_length(h->c->in) < h->buffer);
	if (h->srv.io != NULL && h->srv.connected)
		px_conn_read_enable(h->srv.io, !h->srv.io->eof &&
		    evbuffer_get_length(h->srv.io->in) < h->buffer);
}

/* ---- events ------------------------------------------------------------ */

static void
http_client_rd_cb(struct px_conn *c, void *arg)
{
	struct http_state *h = arg;
	size_t len = evbuffer_get_length(h->c->in);
	ssize_t n;

	(void)c;
	px_session_active(h->s);
	n = px_conn_recv(h->c, len < h->buffer ? h->buffer - len : 0);
	if (n > 0)
		h->progress++;
	else if (n == 0)
		http_client_eof(h);
	else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		http_client_failed(h, errno);
		return;
	}
	if (!h->gone)
		http_drive(h);
}

static void
http_client_wr_cb(struct px_conn *c, void *arg)
{
	struct http_state *h = arg;

	(void)c;
	px_session_active(h->s);
	if (px_conn_send(h->c) == -1) {
		http_client_failed(h, errno);
		return;
	}
	h->progress++;
	http_drive(h);
}

static void
http_server_rd_cb(struct px_conn *c, void *arg)
{
	struct http_state *h = arg;
	size_t len = evbuffer_get_length(h->srv.io->in);
	ssize_t n;

	(void)c;
	px_session_active(h->s);
	n = px_conn_recv(h->srv.io, len < h->buffer ? h->buffer - len : 0);
	if (n > 0) {
		h->srv.got_bytes = true;
		h->progress++;
		/* Move what arrived before looking at the EOF behind it. */
		http_drive(h);
		return;
	}
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
	    errno == EINTR))
		return;
	px_conn_read_enable(h->srv.io, false);
	/* Bytes still unread by the client side are moved first. */
	if (h->resp == HTTP_RESP_BODY && h->resp_body == HTTP_BODY_CLOSE &&
	    n == 0 && evbuffer_get_length(h->srv.io->in) != 0) {
		http_drive(h);
		if (h->gone || h->srv.io == NULL ||
		    evbuffer_get_length(h->srv.io->in) != 0)
			return;	/* http_pump_response ends it when drained */
	}
	http_server_gone(h, n == 0 ? 0 : errno);
	if (!h->gone)
		http_drive(h);
}

static void
http_server_wr_cb(struct px_conn *c, void *arg)
{
	struct http_state *h = arg;

	if (h->connecting) {
		int err = px_upstream_error(c->fd);

		h->connecting = false;
		h->progress++;
		if (err != 0) {
			px_session_log(h->s, LOG_NOTICE, "http-upstream connect "
			    "failed: %s", strerror(err));
			px_conn_want_writable(h->srv.io, false);
			http_error(h, 502, "cannot connect to the server");
			http_drive(h);
			return;
		}
		h->srv.connected = true;
		if (h->is_connect) {
			evbuffer_add(h->c->out, "HTTP/1.1 200 Connection "
			    "established\r\n\r\n", 39);
			h->status = 200;
			h->resp_bytes += 39;
			px_session_account(h->s, PX_TO_CLIENT, 39);
			http_start_tunnel(h);
		}
	}
	if (px_conn_send(h->srv.io) == -1) {
		http_server_gone(h, errno);
		if (!h->gone)
			http_drive(h);
		return;
	}
	h->progress++;
	http_drive(h);
}

static void
http_timer_cb(struct px_session *s, void *st)
{
	struct http_state *h = st;

	(void)s;
	if (h->closing) {
		px_session_end(h->s, PX_END_TIMEOUT,
		    "error: client does not read the reply");
		return;
	}
	px_session_count(h->s, HTTP_C_TIMEOUTS, 1);
	if (h->resp == HTTP_RESP_HEAD) {
		if (h->resp_bytes == 0)
			http_error(h, 504, "no response within response-timeout");
		else
			http_abort(h, PX_END_TIMEOUT, "error: response-timeout");
	} else if (h->req == HTTP_REQ_HEAD && h->resp == HTTP_RESP_NONE) {
		if (evbuffer_get_length(h->c->in) == 0) {
			/* An idle keep-alive connection: just close it. */
			px_session_finish(h->s, PX_END_TIMEOUT,
			    "client-idle: request-timeout");
			return;
		}
		gettimeofday(&h->t_start, NULL);
		http_copy(h->method, sizeof(h->method), "-", 1);
		http_copy(h->path, sizeof(h->path), "-", 1);
		http_error(h, 408, "no complete request head within request-timeout");
	}
	if (!h->gone)
		http_drive(h);
}

/* ---- analyser ---------------------------------------------------------- */

static int
http_on_open(struct px_session *s, void *st)
{
	struct http_state *h = st;

	h->s = s;
	h->pol = px_session_policy(s);
	h->srv.io = NULL;
	h->c = px_session_conn(s, PX_CHAN_CLIENT);
	h->buffer = px_session_buffer(s);
	h->transparent = px_session_is_transparent(s);
	h->head_out = evbuffer_new();
	if (h->head_out == NULL || h->c == NULL)
		return -1;
	px_conn_read_enable(h->c, true);
	http_timer_set(h, h->pol->request_timeout_ms);
	return 0;
}

static void
http_on_close(struct px_session *s, void *st)
{
	struct http_state *h = st;

	(void)s;
	h->gone = true;
	if (h->dns != NULL)
		evdns_getaddrinfo_cancel(h->dns);
	h->dns = NULL;
	if (h->head_out != NULL)
		evbuffer_free(h->head_out);
	h->head_out = NULL;
	/* An idle server connection outlives its client in the pool. */
	http_server_drop(h, h->resp == HTTP_RESP_NONE && h->srv.keep &&
	    !h->tunnel);
	h->c = NULL;	/* the core's */
	if (h->req_copy != NULL)
		evbuffer_free(h->req_copy);
	h->req_copy = NULL;
}

static void
http_readable(struct px_session *s, void *st, enum px_chan_end side)
{
	struct http_state *h = st;

	if (side == PX_CHAN_CLIENT)
		http_client_rd_cb(h->c, h);
	else
		http_server_rd_cb(h->srv.io, h);
}

static void
http_writable(struct px_session *s, void *st, enum px_chan_end side)
{
	struct http_state *h = st;

	if (side == PX_CHAN_CLIENT)
		http_client_wr_cb(h->c, h);
	else
		http_server_wr_cb(h->srv.io, h);
}

static const struct px_driver http_driver = {
	.on_readable = http_readable,
	.on_writable = http_writable,
	.on_timer = http_timer_cb,
};

const struct px_analyser http_analyser = {
	.name = "http",
	.state_size = sizeof(struct http_state),
	.policy_load = http_policy_load,
	.policy_free = http_policy_free,
	.on_open = http_on_open,
	.on_data = NULL,
	.on_close = http_on_close,
	.counters = http_counter_names,
	.driver = &http_driver,
	.forward_mode = true,
	.on_worker_exit = http_worker_exit,
};
