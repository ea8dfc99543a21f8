/* The proxy's own replies: error pages (built in, or a template from
 * errors/@dir) and CONNECT's "200 Connection established". Whatever the
 * server said never reaches these: a reply is proxyd's alone. Each is
 * built as a parsed head and a body (struct http_own) and goes through
 * the transaction's writer (http_client), whatever its protocol. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "conn.h"
#include "http_head.h"
#include "http_int.h"

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
	case 429: return "Too Many Requests";
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

void
http_own_start(struct http_own *o, int status, const char *reason)
{
	struct http_head *m = &o->m;

	o->vals = evbuffer_new();
	/* Not the 256 fields: only those added are read. */
	memset(m, 0, offsetof(struct http_head, hdr));
	m->status = status;
	m->reason = reason;
	m->rlen = strlen(reason);
	m->minor = 1;
	m->content_length = -1;
	m->host = m->upgrade = -1;
}

/* The next field's slot, named; NULL when there is none (out of memory,
 * or more than HTTP_OWN_FIELDS: a bug). Its value: vals from off. */
static struct http_hdr *
http_own_next(struct http_own *o, const char *name, size_t off)
{
	struct http_head *m = &o->m;
	struct http_hdr *f;

	if (o->vals == NULL || m->nhdr == HTTP_OWN_FIELDS)
		return NULL;
	f = &m->hdr[m->nhdr];
	f->name = name;
	f->nlen = strlen(name);
	f->id = (unsigned char)http_field_id(name, f->nlen);
	f->val = NULL;		/* in vals until sent */
	o->off[m->nhdr] = off;
	return f;
}

void
http_own_add(struct http_own *o, const char *name, const char *val,
    size_t vlen)
{
	struct http_hdr *f;

	if ((f = http_own_next(o, name, o->vals != NULL ?
	    evbuffer_get_length(o->vals) : 0)) == NULL ||
	    evbuffer_add(o->vals, val, vlen) == -1)
		return;
	f->vlen = vlen;
	o->m.nhdr++;
}

void
http_own_addf(struct http_own *o, const char *name, const char *fmt, ...)
{
	struct http_hdr *f;
	va_list ap;
	size_t off = o->vals != NULL ? evbuffer_get_length(o->vals) : 0;
	int n;

	if ((f = http_own_next(o, name, off)) == NULL)
		return;
	va_start(ap, fmt);
	n = evbuffer_add_vprintf(o->vals, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	f->vlen = evbuffer_get_length(o->vals) - off;
	o->m.nhdr++;
}

void
http_own_length(struct http_own *o, size_t n)
{
	o->m.content_length = (int64_t)n;
	http_own_addf(o, "Content-Length", "%zu", n);
}

void
http_own_send(struct http_txn *t, struct http_own *o, struct evbuffer *out,
    struct evbuffer *body, bool end)
{
	const struct http_client_ops *w = http_client(t);
	struct http_resp_ctx rs = { .own = true };
	enum http_body was = t->resp_body;
	const char *base;
	unsigned i;

	if (o->vals != NULL) {
		base = (const char *)evbuffer_pullup(o->vals, -1);
		for (i = 0; i < o->m.nhdr; i++)
			o->m.hdr[i].val = base != NULL ? base + o->off[i] : "";
	}
	o->m.head_len = 0;	/* never bytes of the client's */
	w->head(t, &o->m, &rs, out);
	/* The body has a length (the head says it): whatever the server's
	 * response was framed with, the writer sends it as it is. */
	t->resp_body = HTTP_BODY_LENGTH;
	if (body != NULL && evbuffer_get_length(body) != 0 && !t->is_head)
		w->data(t, body, evbuffer_get_length(body), out);
	if (end)
		w->end(t, NULL, out);
	t->resp_body = was;
	if (o->vals != NULL)
		evbuffer_free(o->vals);
	o->vals = NULL;
}

/* Text from the request (a host name, a path) can be in `why`: as text,
 * never as markup on the proxy's own page. */
static void
http_add_html(struct evbuffer *out, const char *s)
{
	const char *run = s;

	for (; *s != '\0'; s++) {
		const char *ent;

		switch (*s) {
		case '&': ent = "&amp;"; break;
		case '<': ent = "&lt;"; break;
		case '>': ent = "&gt;"; break;
		case '"': ent = "&quot;"; break;
		case '\'': ent = "&#39;"; break;
		default: continue;
		}
		evbuffer_add(out, run, (size_t)(s - run));
		evbuffer_add(out, ent, strlen(ent));
		run = s + 1;
	}
	evbuffer_add(out, run, (size_t)(s - run));
}

/* The page's body: the built-in one, or the policy's template for status
 * with @STATUS@ @REASON@ @DETAIL@ @SESSION@ filled in. */
static void
http_error_page(struct evbuffer *body, const struct http_policy *p,
    int status, const char *why, uint64_t session)
{
	const char *reason = http_reason(status);
	const char *tpl = status < HTTP_ERROR_PAGES ? p->pages[status] : NULL;
	const char *c;

	if (tpl == NULL) {
		evbuffer_add_printf(body, "<!DOCTYPE html>\n<html><head>"
		    "<title>%d %s</title></head>\n<body><h1>%d %s</h1>\n"
		    "<p>", status, reason, status, reason);
		http_add_html(body, why);
		evbuffer_add_printf(body, "</p>\n<hr><p>proxyd, session %llu"
		    "</p></body></html>\n", (unsigned long long)session);
		return;
	}
	c = tpl;
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
			http_add_html(body, why);
			c = at + 8;
		} else if (strncmp(at, "@SESSION@", 9) == 0) {
			evbuffer_add_printf(body, "%llu",
			    (unsigned long long)session);
			c = at + 9;
		} else {
			evbuffer_add(body, "@", 1);
			c = at + 1;
		}
	}
}

/* rule= of a refusal no rule of the lists made: the limit that made it,
 * <servers> (forward mode: the core judged it), or the proxy's own. */
static const char *
http_refusal_rule(const struct http_txn *t, const char *why)
{
	const struct http_state *h = t->conn;
	static const char *const limits[][2] = {
		{ "URI too long", "limits/@max-url" },
		{ "request line too long", "limits/@max-line" },
		{ "header line too long", "limits/@max-line" },
		{ "too many header lines", "limits/@max-header-lines" },
		{ "request head over max-header-bytes",
		    "limits/@max-header-bytes" },
		{ "request body over max-body", "limits/@max-body" },
	};
	size_t i;

	for (i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		if (strcmp(why, limits[i][0]) == 0)
			return limits[i][1];
	if (strncmp(why, "server not allowed", 18) == 0 &&
	    px_session_rule(h->s)[0] != '\0')
		return px_session_rule(h->s);
	return "builtin";
}

void
http_error(struct http_txn *t, int status, const char *why)
{
	struct http_state *h = t->conn;
	const struct http_policy *p = h->pol;
	struct evbuffer *out = http_client_out(t);
	struct evbuffer *body;
	struct http_own o;
	const char *reason = http_reason(status);
	char end[160];
	size_t blen;
	/* 4xx: the policy or the parser refused; 408: the client failed to
	 * finish its request in time (an error of the client's, as the
	 * session line says too: verdict=error both); 502-504: the server
	 * failed; other 5xx: the proxy did. */
	enum px_end_by by = status == 408 ? PX_END_CLIENT_FAIL : status < 500 ?
	    PX_END_POLICY : status >= 502 && status <= 504 ?
	    PX_END_SERVER_FAIL : PX_END_PROXY;
	/* An HTTP/2 stream's line names it: its connection has others. */
	char tag[40] = "";

	if (t->h2w != NULL)
		snprintf(tag, sizeof(tag), " proto=h2 stream=%d",
		    (int)http_h2w_stream(t->h2w));

	t->status = status;
	if (t->verdict == NULL)
		t->verdict = status >= 500 || status == 408 ? "error" : "deny";
	if (by == PX_END_POLICY) {
		if (t->rule[0] == '\0')
			snprintf(t->rule, sizeof(t->rule), "%s",
			    http_refusal_rule(t, why));
		px_session_set_rule(h->s, t->rule);
	}
	if (t->resp_bytes != t->interim_bytes) {
		/* Part of a response went out already: a reset, so that the
		 * client never takes what it got for the whole. (After a
		 * 100 Continue, a final status may still come.) */
		px_session_log(h->s, LOG_NOTICE, "http-error status=%d "
		    "reason=\"%s\"%s%s (after part of the response)%s",
		    status, why, by == PX_END_POLICY ? " rule=" : "",
		    by == PX_END_POLICY ? t->rule : "", tag);
		http_txn_abort(t, by, "error: http: response cut off");
		return;
	}
	px_session_log(h->s, LOG_NOTICE, "http-error status=%d "
	    "reason=\"%s\"%s%s%s", status, why, by == PX_END_POLICY ?
	    " rule=" : "", by == PX_END_POLICY ? t->rule : "", tag);
	if (t->grpc) {
		http_grpc_reply(t, out, status, why, false);
		t->resp_bytes = evbuffer_get_length(out);
		px_session_account(h->s, PX_TO_CLIENT, t->resp_bytes);
		goto out_log;
	}
	/* Without memory for a page the status line still goes out. */
	body = evbuffer_new();
	if (body != NULL && !p->silent)
		http_error_page(body, p, status, why, px_session_id(h->s));
	blen = body != NULL ? evbuffer_get_length(body) : 0;
	http_own_start(&o, status, reason);
	http_own_add(&o, "Content-Type", "text/html", 9);
	http_own_length(&o, blen);
	http_own_add(&o, "Connection", "close", 5);
	http_own_add(&o, "Cache-Control", "no-store", 8);
	if (status == 405) {
		/* RFC 9110 15.5.6: a 405 says what is allowed instead. */
		char allow[256];

		http_policy_allow(p, t->port, px_session_dst(h->s)->sa_family ==
		    0, allow, sizeof(allow));
		http_own_add(&o, "Allow", allow, strlen(allow));
	}
	http_own_send(t, &o, out, body, true);
	t->resp_bytes = evbuffer_get_length(out);
	px_session_account(h->s, PX_TO_CLIENT, t->resp_bytes);
	if (body != NULL)
		evbuffer_free(body);
out_log:
	http_log_request(t);
	snprintf(end, sizeof(end), "%s: http %d: %s", status >= 500 ? "error" :
	    status == 408 ? "request-timeout" : "denied", status, why);
	/* An HTTP/1.1 client's connection ends once its page is written;
	 * an HTTP/2 stream ends with it, the connection going on. */
	t->eng->answered(t, by, end);
}

void
http_reply_limited(struct http_txn *t, uint32_t retry_s, bool keep)
{
	struct http_state *h = t->conn;
	const struct http_policy *p = h->pol;
	struct evbuffer *out = http_client_out(t), *body;
	struct http_own o;
	size_t blen, before = evbuffer_get_length(out);

	t->status = 429;
	t->verdict = "deny";
	if (t->grpc) {
		http_grpc_reply(t, out, 429, "too many requests from this "
		    "source", keep);
		t->resp_bytes = evbuffer_get_length(out) - before;
		px_session_account(h->s, PX_TO_CLIENT, t->resp_bytes);
		return;
	}
	body = evbuffer_new();
	if (body != NULL && !p->silent)
		http_error_page(body, p, 429, "too many requests from this "
		    "source", px_session_id(h->s));
	blen = body != NULL ? evbuffer_get_length(body) : 0;
	/* RFC 6585 4: Retry-After says when to come back. */
	http_own_start(&o, 429, http_reason(429));
	http_own_add(&o, "Content-Type", "text/html", 9);
	http_own_length(&o, blen);
	http_own_addf(&o, "Retry-After", "%u", (unsigned)retry_s);
	http_own_add(&o, "Connection", keep ? "keep-alive" : "close",
	    keep ? 10 : 5);
	http_own_add(&o, "Cache-Control", "no-store", 8);
	http_own_send(t, &o, out, body, true);
	if (body != NULL)
		evbuffer_free(body);
	t->resp_bytes = evbuffer_get_length(out) - before;
	px_session_account(h->s, PX_TO_CLIENT, t->resp_bytes);
}

/* A connection <source-limits> refuses at accept (limit_refusal): a 429
 * as for requests=, Retry-After the seconds until the source may connect
 * again, and Connection: close (the connection ends once written). The
 * body is left out when the whole does not fit in size. */
size_t
http_limit_refusal(const void *pol, const char *limit, const char *whose,
    const char *rule, uint32_t retry_s, uint64_t id, char *buf, size_t size)
{
	const struct http_policy *p = pol;
	struct evbuffer *body;
	char why[128];
	size_t blen = 0;
	int n;

	(void)rule;
	snprintf(why, sizeof(why), "too many %s %s", limit, whose);
	if ((body = evbuffer_new()) == NULL)
		return 0;
	if (p != NULL && !p->silent)
		http_error_page(body, p, 429, why, id);
	blen = evbuffer_get_length(body);
	for (;;) {
		n = snprintf(buf, size, "HTTP/1.1 429 Too Many Requests\r\n"
		    "Content-Type: text/html\r\nContent-Length: %zu\r\n"
		    "Retry-After: %u\r\nConnection: close\r\n"
		    "Cache-Control: no-store\r\n\r\n", blen,
		    (unsigned)retry_s);
		if (n < 0 || (size_t)n >= size) {
			evbuffer_free(body);
			return 0;
		}
		if ((size_t)n + blen <= size || blen == 0)
			break;
		blen = 0;	/* too big: the head alone */
	}
	if (blen > 0)
		evbuffer_copyout(body, buf + n, blen);
	evbuffer_free(body);
	return (size_t)n + blen;
}

void
http_reply_established(struct http_txn *t)
{
	struct http_state *h = t->conn;
	struct evbuffer *out = http_client_out(t);
	size_t before = evbuffer_get_length(out);
	struct http_own o;

	/* No end: the tunnel's bytes follow. */
	http_own_start(&o, 200, "Connection established");
	http_own_send(t, &o, out, NULL, false);
	t->status = 200;
	t->resp_bytes += evbuffer_get_length(out) - before;
	px_session_account(h->s, PX_TO_CLIENT, evbuffer_get_length(out) -
	    before);
}

/* A value for the log line. */
void
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
