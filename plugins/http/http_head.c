/* The heads sent on (see http_head.h): pure functions of a parsed head,
 * the policy and a few facts of the transaction. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>

#include "http_head.h"
#include "parse.h"

/* The head being written gathers here and goes to the evbuffer in one
 * evbuffer_add: a head longer than the buffer in a few. Appending piece
 * by piece to the evbuffer cost more than building the fields. */
struct http_wbuf {
	struct evbuffer	*ev;
	size_t		 n;
	char		 b[4096];
	/* Not NULL: each field goes to fn instead, whole (the *_fields
	 * writers, for an HTTP/2 server), and nothing to ev. */
	http_field_fn	 fn;
	void		*arg;
};

/* A writer to out, or (fn not NULL) to fn field by field. */
static void
http_wb_init(struct http_wbuf *w, struct evbuffer *out, http_field_fn fn,
    void *arg)
{
	w->ev = out;
	w->n = 0;
	w->fn = fn;
	w->arg = arg;
}

static void
http_wb_flush(struct http_wbuf *w)
{
	if (w->n != 0)
		evbuffer_add(w->ev, w->b, w->n);
	w->n = 0;
}

static void
http_wb_add(struct http_wbuf *w, const void *p, size_t len)
{
	if (len > sizeof(w->b) - w->n) {
		http_wb_flush(w);
		if (len > sizeof(w->b)) {
			evbuffer_add(w->ev, p, len);
			return;
		}
	}
	memcpy(w->b + w->n, p, len);
	w->n += len;
}

#define HTTP_WB_LIT(w, s) http_wb_add((w), (s), sizeof(s) - 1)

static void
http_wb_str(struct http_wbuf *w, const char *s)
{
	http_wb_add(w, s, strlen(s));
}

/* "name: value\r\n", with one bound check for the line. */
static void
http_wb_field(struct http_wbuf *w, const char *name, size_t nlen,
    const char *val, size_t vlen)
{
	char *d;

	if (w->fn != NULL) {
		w->fn(w->arg, name, nlen, val, vlen);
		return;
	}
	if (nlen + vlen + 4 > sizeof(w->b) - w->n) {
		http_wb_add(w, name, nlen);
		HTTP_WB_LIT(w, ": ");
		http_wb_add(w, val, vlen);
		HTTP_WB_LIT(w, "\r\n");
		return;
	}
	d = w->b + w->n;
	memcpy(d, name, nlen);
	d += nlen;
	*d++ = ':';
	*d++ = ' ';
	memcpy(d, val, vlen);
	d += vlen;
	*d++ = '\r';
	*d++ = '\n';
	w->n = (size_t)(d - w->b);
}

/* v in decimal, without leading zeros, at the end of tmp[20]: where it
 * starts. */
static size_t
http_u64_str(char tmp[20], uint64_t v)
{
	size_t n = 20;

	do {
		tmp[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	return n;
}

/* What the writers ask of a head's fields, found in one pass: which
 * known field each is, where Connection is, the tokens Connection lists. */
#define HTTP_CONN_TOKENS 16

struct http_fields {
	unsigned char	 id[HTTP_MAX_HEADERS];	/* enum http_field */
	int		 conn;		/* first Connection; -1: none */
	int		 xff;		/* first X-Forwarded-For; -1: none */
	unsigned	 ntok;
	bool		 many;		/* over HTTP_CONN_TOKENS: scan them */
	struct {
		const char	*p;
		size_t		 len;
	}		 tok[HTTP_CONN_TOKENS];
};

/* The elements of one Connection field as http_list_has reads them:
 * split at ',', SP and HTAB trimmed, empty ones skipped. */
static void
http_conn_tokens(struct http_fields *fs, const char *v, size_t len)
{
	size_t i = 0, s, e;

	while (http_list_next(v, len, &i, &s, &e)) {
		if (fs->ntok == HTTP_CONN_TOKENS) {
			fs->many = true;
			return;
		}
		fs->tok[fs->ntok].p = v + s;
		fs->tok[fs->ntok++].len = e - s;
	}
}

static void
http_fields_scan(struct http_fields *fs, const struct http_head *m)
{
	unsigned i;

	fs->conn = fs->xff = -1;
	fs->ntok = 0;
	fs->many = false;
	for (i = 0; i < m->nhdr; i++) {
		const struct http_hdr *f = &m->hdr[i];
		enum http_field id = (enum http_field)f->id;

		fs->id[i] = (unsigned char)id;
		if (id == HTTP_F_CONNECTION) {
			if (fs->conn == -1)
				fs->conn = (int)i;
			if (!fs->many)
				http_conn_tokens(fs, f->val, f->vlen);
		} else if (id == HTTP_F_X_FORWARDED_FOR && fs->xff == -1)
			fs->xff = (int)i;
	}
}

/* A case-insensitive compare of two names of n bytes. */
static bool
http_name_eq(const char *a, const char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];

		if (x != y && ((x | 0x20) != (y | 0x20) ||
		    (unsigned char)((x | 0x20) - 'a') > 'z' - 'a'))
			return false;
	}
	return true;
}

/* Whether the comma list (v, len) holds the name (name, nlen): the
 * split of http_conn_tokens. */
static bool
http_list_names(const char *v, size_t len, const char *name, size_t nlen)
{
	size_t i = 0, s, e;

	while (http_list_next(v, len, &i, &s, &e)) {
		if (e - s == nlen && nlen != 0 && http_name_eq(v + s, name, nlen))
			return true;
	}
	return false;
}

/* Whether a Connection field of m names f. */
static bool
http_connection_names(const struct http_head *m,
    const struct http_fields *fs, const struct http_hdr *f)
{
	unsigned i;

	if (fs->many) {
		/* Past what was kept: every Connection field, read again. */
		for (i = (unsigned)fs->conn; i < m->nhdr; i++)
			if (fs->id[i] == HTTP_F_CONNECTION &&
			    http_list_names(m->hdr[i].val, m->hdr[i].vlen,
			    f->name, f->nlen))
				return true;
		return false;
	}
	for (i = 0; i < fs->ntok; i++)
		if (fs->tok[i].len == f->nlen &&
		    http_name_eq(fs->tok[i].p, f->name, f->nlen))
			return true;
	return false;
}

/* Hop-by-hop: never forwarded as they are (RFC 9110 7.6.1): the fixed
 * set and whatever Connection names. */
static bool
http_hop_by_hop(const struct http_head *m, const struct http_fields *fs,
    unsigned i)
{
	switch (fs->id[i]) {
	case HTTP_F_TE:
	case HTTP_F_TRAILER:
	case HTTP_F_UPGRADE:
	case HTTP_F_CONNECTION:
	case HTTP_F_KEEP_ALIVE:
	case HTTP_F_PROXY_CONNECTION:
		return true;
	}
	return fs->conn != -1 && http_connection_names(m, fs, &m->hdr[i]);
}

/* Fields a trailer section never carries on (RFC 9110 6.5.1): framing,
 * routing, payload processing, authentication. */
static bool
http_trailer_forbidden(enum http_field id)
{
	switch (id) {
	case HTTP_F_CONTENT_LENGTH:
	case HTTP_F_TRANSFER_ENCODING:
	case HTTP_F_HOST:
	case HTTP_F_TRAILER:
	case HTTP_F_TE:
	case HTTP_F_CONTENT_ENCODING:
	case HTTP_F_CONTENT_TYPE:
	case HTTP_F_CONTENT_RANGE:
	case HTTP_F_AUTHORIZATION:
	case HTTP_F_COOKIE:
	case HTTP_F_SET_COOKIE:
	case HTTP_F_EXPECT:
	case HTTP_F_RANGE:
	case HTTP_F_PROXY_CONNECTION:
	case HTTP_F_PROXY_OTHER:
		return true;
	default:
		return false;
	}
}

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

/* How http_write_fields copies a head's (or a trailer section's) fields. */
struct http_wopt {
	const struct http_header_rule *rules;
	size_t			 nrules;
	enum http_header_action	 dflt;
	bool			 keep_upgrade;	/* an accepted Upgrade passes */
	bool			 skip_xff;	/* X-Forwarded-For: the caller's */
	bool			 skip_te;	/* dechunked: no Transfer-Encoding */
	bool			 skip_range;	/* no (Request-)Range, If-Range */
	const char		*drop;		/* a field not sent; NULL */
	unsigned char		 drop_id;	/* its http_field_id() */
	bool			 underscore;	/* names with '_' pass */
	bool			 inserts;	/* the rules' inserts follow */
	bool			 trailers;	/* m is a trailer section */
	const char		*host;		/* replaces Host; NULL: none */
	size_t			 hlen;
};

/* Transfer-Encoding, once for all of m's: its codings in order, in lower
 * case, ", " between (the parser checked them: tokens, chunked last). */
static void
http_write_te(struct http_wbuf *w, const struct http_head *m,
    const struct http_fields *fs)
{
	bool first = true;
	unsigned i;

	HTTP_WB_LIT(w, "Transfer-Encoding: ");
	for (i = 0; i < m->nhdr; i++) {
		const struct http_hdr *f = &m->hdr[i];
		size_t k = 0, s, e, j;

		if (fs->id[i] != HTTP_F_TRANSFER_ENCODING)
			continue;
		while (http_coding_next(f->val, f->vlen, &k, &s, &e)) {
			if (!first)
				HTTP_WB_LIT(w, ", ");
			first = false;
			for (j = s; j < e; j++) {
				char c = f->val[j];

				if (c >= 'A' && c <= 'Z')
					c = (char)(c + 32);
				http_wb_add(w, &c, 1);
			}
		}
	}
	HTTP_WB_LIT(w, "\r\n");
}

/* Copies the fields of m to w through the policy's rules. Framing is
 * written in one canonical form: Content-Length in decimal without
 * leading zeros, Transfer-Encoding as one field. */
static void
http_write_fields(struct http_wbuf *w, const struct http_head *m,
    const struct http_fields *fs, const struct http_wopt *o)
{
	bool te_done = false, host_done = false;
	unsigned i;
	size_t k;

	for (i = 0; i < m->nhdr; i++) {
		const struct http_hdr *f = &m->hdr[i];
		enum http_field id = (enum http_field)fs->id[i];
		const struct http_header_rule *r = NULL;

		if (o->keep_upgrade && id == HTTP_F_UPGRADE)
			;	/* passes: the protocol was accepted */
		else if (http_hop_by_hop(m, fs, i))
			continue;
		if (o->trailers && http_trailer_forbidden(id))
			continue;
		/* m->underscore: the parser saw a '_' in some name of m. */
		if (!o->underscore && m->underscore &&
		    memchr(f->name, '_', f->nlen) != NULL)
			continue;
		if (o->skip_xff && id == HTTP_F_X_FORWARDED_FOR)
			continue;
		if (o->drop != NULL && http_field_is(f, o->drop_id, o->drop))
			continue;
		/* Request-Range: the older name, which Apache honours. */
		if (o->skip_range && (id == HTTP_F_RANGE ||
		    id == HTTP_F_IF_RANGE || (id == HTTP_F_OTHER &&
		    http_token_eq(f->name, f->nlen, "request-range"))))
			continue;
		if (id == HTTP_F_TRANSFER_ENCODING) {
			/* An HTTP/2 message has none (RFC 9113 8.2.2). */
			if (o->skip_te || te_done || w->fn != NULL)
				continue;
			http_write_te(w, m, fs);
			te_done = true;
			continue;
		}
		if (o->host != NULL && id == HTTP_F_HOST) {
			/* The authority of an absolute-form target. */
			if (!host_done)
				http_wb_field(w, "Host", 4, o->host, o->hlen);
			host_done = true;
			continue;
		}
		if (o->nrules != 0)
			r = http_header_rule(o->rules, o->nrules, f->name,
			    f->nlen);
		if ((r != NULL ? r->action : o->dflt) == HTTP_DROP)
			continue;
		if (r != NULL && r->action == HTTP_CHANGE)
			http_wb_field(w, f->name, f->nlen, r->value,
			    strlen(r->value));
		else if (id == HTTP_F_CONTENT_LENGTH) {
			char tmp[20];
			size_t n = http_u64_str(tmp, (uint64_t)m->content_length);

			http_wb_field(w, f->name, f->nlen, tmp + n,
			    sizeof(tmp) - n);
		} else
			http_wb_field(w, f->name, f->nlen, f->val, f->vlen);
	}
	if (o->host != NULL && !host_done)
		http_wb_field(w, "Host", 4, o->host, o->hlen);
	if (!o->inserts)
		return;
	for (k = 0; k < o->nrules; k++)
		if (o->rules[k].action == HTTP_INSERT)
			http_wb_field(w, o->rules[k].name,
			    strlen(o->rules[k].name), o->rules[k].value,
			    strlen(o->rules[k].value));
}

/* The client's address, without port, into buf (inet_ntop's form; IPv4
 * without its sprintf): its length. */
static size_t
http_client_ip(const struct sockaddr *sa, char buf[INET6_ADDRSTRLEN])
{
	const unsigned char *a;
	size_t len = 0, k;
	char tmp[20];
	unsigned i;

	if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		    buf, INET6_ADDRSTRLEN);
		return strlen(buf);
	}
	a = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
	for (i = 0; i < 4; i++) {
		if (i > 0)
			buf[len++] = '.';
		k = http_u64_str(tmp, a[i]);
		memcpy(buf + len, tmp + k, sizeof(tmp) - k);
		len += sizeof(tmp) - k;
	}
	return len;
}

/* X-Forwarded-For: the client's address, after the client's own value
 * (x-forwarded-for="append") or alone. */
static void
http_write_xff(struct http_wbuf *w, const struct http_head *m,
    const struct http_fields *fs, const struct http_policy *p,
    const struct sockaddr *client)
{
	const struct http_hdr *prev = p->xff == HTTP_XFF_APPEND &&
	    fs->xff != -1 ? &m->hdr[fs->xff] : NULL;
	char ip[INET6_ADDRSTRLEN], *v;
	size_t iplen = http_client_ip(client, ip), n;

	if (w->fn == NULL) {
		HTTP_WB_LIT(w, "X-Forwarded-For: ");
		if (prev != NULL) {
			http_wb_add(w, prev->val, prev->vlen);
			HTTP_WB_LIT(w, ", ");
		}
		http_wb_add(w, ip, iplen);
		HTTP_WB_LIT(w, "\r\n");
		return;
	}
	if (prev == NULL) {
		w->fn(w->arg, "X-Forwarded-For", 15, ip, iplen);
		return;
	}
	n = prev->vlen + 2 + iplen;
	if ((v = malloc(n)) == NULL) {
		w->fn(w->arg, NULL, 0, NULL, 0);	/* out of memory */
		return;
	}
	memcpy(v, prev->val, prev->vlen);
	memcpy(v + prev->vlen, ", ", 2);
	memcpy(v + prev->vlen + 2, ip, iplen);
	w->fn(w->arg, "X-Forwarded-For", 15, v, n);
	free(v);
}

/* The request's fields as http_head_request writes them (to w's text or
 * its fn); the Connection it adds only as text. */
static void
http_request_fields(struct http_wbuf *w, const struct http_head *m,
    const struct http_policy *p, const struct http_req_ctx *r)
{
	struct http_fields fs;
	struct http_wopt o = {
		.rules = p->reqh, .nrules = p->nreqh, .dflt = p->reqh_dflt,
		.keep_upgrade = r->upgrade, .skip_xff = p->xff != HTTP_XFF_NO,
		.underscore = p->underscore_pass, .inserts = true,
		.host = r->authority, .hlen = r->alen,
		.skip_range = r->whole, .drop = r->drop,
		.drop_id = r->drop == NULL ? HTTP_F_OTHER :
		    (unsigned char)http_field_id(r->drop, strlen(r->drop)),
	};

	http_fields_scan(&fs, m);
	http_write_fields(w, m, &fs, &o);
	if (m->host == -1 && r->authority == NULL) {
		/* We speak HTTP/1.1 to the server, which requires Host; an
		 * HTTP/1.0 client may not have sent one (over HTTP/2, it is
		 * the :authority). */
		char a[PX_ADDRSTRLEN];
		const char *v = r->host[0] ? r->host :
		    px_sockaddr_str(r->dst, a, sizeof(a));

		http_wb_field(w, "Host", 4, v, strlen(v));
	}
	if (p->xff != HTTP_XFF_NO)
		http_write_xff(w, m, &fs, p, r->client);
	if (p->via)
		http_wb_field(w, "Via", 3, m->minor ? "1.1 proxyd" :
		    "1.0 proxyd", 10);
	if (w->fn != NULL)
		return;		/* HTTP/2 has no Connection (RFC 9113 8.2.2) */
	if (r->upgrade)
		HTTP_WB_LIT(w, "Connection: upgrade\r\n");
	else if (!p->keepalive_server)
		HTTP_WB_LIT(w, "Connection: close\r\n");
}

void
http_head_request(struct evbuffer *out, const struct http_head *m,
    const struct http_policy *p, const struct http_req_ctx *r)
{
	struct http_wbuf w;

	http_wb_init(&w, out, NULL, NULL);
	http_wb_add(&w, m->method, m->mlen);
	HTTP_WB_LIT(&w, " ");
	if (r->tlen > 0 && r->target[0] == '?')
		HTTP_WB_LIT(&w, "/");	/* "http://a?q": "/?q" */
	http_wb_add(&w, r->target, r->tlen);
	if (r->query != NULL) {
		HTTP_WB_LIT(&w, "?");
		http_wb_add(&w, r->query, r->qlen);
	}
	HTTP_WB_LIT(&w, " HTTP/1.1\r\n");
	http_request_fields(&w, m, p, r);
	HTTP_WB_LIT(&w, "\r\n");
	http_wb_flush(&w);
}

void
http_head_request_fields(const struct http_head *m,
    const struct http_policy *p, const struct http_req_ctx *r,
    http_field_fn fn, void *arg)
{
	struct http_wbuf w;

	http_wb_init(&w, NULL, fn, arg);
	http_request_fields(&w, m, p, r);
}

/* "HTTP/1.1 SSS reason\r\n": the status has exactly three digits (the
 * parser's, or proxyd's own): no printf for them. */
static void
http_wb_status(struct http_wbuf *w, const struct http_head *m)
{
	char line[16] = "HTTP/1.1 000 ";

	line[9] = (char)('0' + m->status / 100);
	line[10] = (char)('0' + m->status / 10 % 10);
	line[11] = (char)('0' + m->status % 10);
	http_wb_add(w, line, 13);
	http_wb_add(w, m->reason, m->rlen);
	HTTP_WB_LIT(w, "\r\n");
}

/* Copies len bytes at *src into *dst and points *src there. */
static void
http_dup_str(char **dst, const char **src, size_t len)
{
	if (*src == NULL)
		return;
	memcpy(*dst, *src, len);
	*src = *dst;
	*dst += len;
}

struct http_head *
http_head_dup(const struct http_head *m)
{
	size_t fixed = offsetof(struct http_head, hdr) +
	    m->nhdr * sizeof(struct http_hdr);
	size_t bytes = m->mlen + m->tlen + m->rlen;
	struct http_head *c;
	char *d;
	unsigned i;

	for (i = 0; i < m->nhdr; i++)
		bytes += m->hdr[i].nlen + m->hdr[i].vlen;
	if ((c = malloc(fixed + bytes)) == NULL)
		return NULL;
	memcpy(c, m, fixed);
	d = (char *)c + fixed;
	http_dup_str(&d, &c->method, c->mlen);
	http_dup_str(&d, &c->target, c->tlen);
	http_dup_str(&d, &c->reason, c->rlen);
	for (i = 0; i < c->nhdr; i++) {
		http_dup_str(&d, &c->hdr[i].name, c->hdr[i].nlen);
		http_dup_str(&d, &c->hdr[i].val, c->hdr[i].vlen);
	}
	return c;
}

void
http_head_own(struct evbuffer *out, const struct http_head *m)
{
	struct http_wbuf w;
	unsigned i;

	http_wb_init(&w, out, NULL, NULL);
	http_wb_status(&w, m);
	for (i = 0; i < m->nhdr; i++)
		http_wb_field(&w, m->hdr[i].name, m->hdr[i].nlen,
		    m->hdr[i].val, m->hdr[i].vlen);
	HTTP_WB_LIT(&w, "\r\n");
	http_wb_flush(&w);
}

/* The whole field lines of s ("Name: value\r\n"...) one by one to w's
 * fn. */
static void
http_extra_fields(struct http_wbuf *w, const char *s)
{
	const char *colon, *eol, *v;

	while ((eol = strstr(s, "\r\n")) != NULL) {
		if ((colon = memchr(s, ':', (size_t)(eol - s))) != NULL) {
			for (v = colon + 1; v < eol && (*v == ' ' ||
			    *v == '\t'); v++)
				;
			w->fn(w->arg, s, (size_t)(colon - s), v,
			    (size_t)(eol - v));
		}
		s = eol + 2;
	}
}

/* The response's fields as http_head_response writes them (to w's text
 * or its fn); the Connection it adds only as text. proxyd's own reply
 * (r->own): m's fields as they are (given to fn without those of one
 * HTTP/1.1 connection: Connection, Keep-Alive, Transfer-Encoding). */
static void
http_response_fields(struct http_wbuf *w, const struct http_head *m,
    const struct http_policy *p, const struct http_resp_ctx *r)
{
	struct http_fields fs;
	struct http_wopt o = {
		.rules = p->resph, .nrules = p->nresph, .dflt = p->resph_dflt,
		.keep_upgrade = m->status == 101,
		.skip_te = r->dechunk && m->status >= 200,
		.underscore = p->underscore_pass, .inserts = true,
	};
	unsigned i;

	if (r->own) {
		for (i = 0; i < m->nhdr; i++) {
			const struct http_hdr *f = &m->hdr[i];

			switch (http_field_id(f->name, f->nlen)) {
			case HTTP_F_CONNECTION:
			case HTTP_F_KEEP_ALIVE:
			case HTTP_F_PROXY_CONNECTION:
			case HTTP_F_TRANSFER_ENCODING:
				if (w->fn != NULL)
					continue;
				break;
			default:
				break;
			}
			http_wb_field(w, f->name, f->nlen, f->val, f->vlen);
		}
		return;
	}
	http_fields_scan(&fs, m);
	http_write_fields(w, m, &fs, &o);
	if (r->extra != NULL && w->fn != NULL)
		http_extra_fields(w, r->extra);
	else if (r->extra != NULL)
		http_wb_str(w, r->extra);
	/* minor 2: the head came from an HTTP/2 server (RFC 9110 7.6.3:
	 * the protocol it was received in). */
	if (p->via)
		http_wb_field(w, "Via", 3, m->minor == 2 ? "2 proxyd" :
		    m->minor ? "1.1 proxyd" : "1.0 proxyd",
		    m->minor == 2 ? 8 : 10);
}

void
http_head_response(struct evbuffer *out, const struct http_head *m,
    const struct http_policy *p, const struct http_resp_ctx *r)
{
	struct http_wbuf w;

	if (r->own) {
		http_head_own(out, m);
		return;
	}
	http_wb_init(&w, out, NULL, NULL);
	http_wb_status(&w, m);
	http_response_fields(&w, m, p, r);
	if (m->status == 101)
		HTTP_WB_LIT(&w, "Connection: upgrade\r\n");
	else if (m->status >= 200) {
		if (!r->client_keep)
			HTTP_WB_LIT(&w, "Connection: close\r\n");
		else if (r->client_10)
			HTTP_WB_LIT(&w, "Connection: keep-alive\r\n");
	}
	HTTP_WB_LIT(&w, "\r\n");
	http_wb_flush(&w);
}

void
http_head_response_fields(const struct http_head *m,
    const struct http_policy *p, const struct http_resp_ctx *r,
    http_field_fn fn, void *arg)
{
	struct http_wbuf w;

	http_wb_init(&w, NULL, fn, arg);
	http_response_fields(&w, m, p, r);
}

/* How a trailer section's fields are copied: the request- or
 * response-header rules, without their inserts. */
static struct http_wopt
http_trailer_opt(const struct http_policy *p, bool request)
{
	struct http_wopt o = {
		.rules = request ? p->reqh : p->resph,
		.nrules = request ? p->nreqh : p->nresph,
		.dflt = request ? p->reqh_dflt : p->resph_dflt,
		.underscore = p->underscore_pass, .trailers = true,
	};

	return o;
}

void
http_head_trailers(struct evbuffer *out, const struct http_head *t,
    const struct http_policy *p, bool request)
{
	struct http_wbuf w;
	struct http_fields fs;
	struct http_wopt o = http_trailer_opt(p, request);

	http_wb_init(&w, out, NULL, NULL);
	HTTP_WB_LIT(&w, "0\r\n");
	if (p->trailers_pass) {
		http_fields_scan(&fs, t);
		http_write_fields(&w, t, &fs, &o);
	}
	HTTP_WB_LIT(&w, "\r\n");
	http_wb_flush(&w);
}

void
http_head_trailer_fields(const struct http_head *t,
    const struct http_policy *p, bool request, http_field_fn fn, void *arg)
{
	struct http_wbuf w;
	struct http_fields fs;
	struct http_wopt o = http_trailer_opt(p, request);

	if (!p->trailers_pass)
		return;
	http_wb_init(&w, NULL, fn, arg);
	http_fields_scan(&fs, t);
	http_write_fields(&w, t, &fs, &o);
}

bool
http_head_origin_form(const char *target, size_t tlen, const char **auth,
    size_t *alen, const char **path, size_t *plen)
{
	size_t i;

	if (tlen < 8 || strncasecmp(target, "http://", 7) != 0)
		return false;
	*auth = target + 7;
	/* The authority ends at the path or, without one, the query. */
	for (i = 7; i < tlen && target[i] != '/' && target[i] != '?'; i++)
		;
	*alen = i - 7;
	*path = i < tlen ? target + i : "/";
	*plen = i < tlen ? tlen - i : 1;
	return true;
}
