/* The heads sent on (see http_head.h): pure functions of a parsed head,
 * the policy and a few facts of the transaction. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>

#include "http_head.h"
#include "parse.h"

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

static int
http_find(const struct http_head *m, const char *name)
{
	unsigned i;

	for (i = 0; i < m->nhdr; i++)
		if (http_token_eq(m->hdr[i].name, m->hdr[i].nlen, name))
			return (int)i;
	return -1;
}

/* Hop-by-hop: never forwarded as they are (RFC 9110 7.6.1). conn is the
 * index of the Connection field, -1 if none. */
/* A Connection field from index conn on lists name. */
static bool
http_connection_names(const struct http_head *m, int conn, const char *name)
{
	unsigned i;

	for (i = (unsigned)conn; i < m->nhdr; i++) {
		const struct http_hdr *c = &m->hdr[i];

		if (c->nlen == 10 && http_token_eq(c->name, c->nlen, "connection") &&
		    http_list_has(c->val, c->vlen, name))
			return true;
	}
	return false;
}

static bool
http_hop_by_hop(const struct http_head *m, int conn, const struct http_hdr *f)
{
	char name[64], *big;
	bool found;

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
	if (conn == -1)
		return false;
	/* ...and whatever Connection names, however long the name: one
	 * too long for the stack copy is looked up from the heap (and with
	 * no memory for that, dropped rather than passed on). */
	if (f->nlen < sizeof(name)) {
		memcpy(name, f->name, f->nlen);
		name[f->nlen] = '\0';
		found = http_connection_names(m, conn, name);
	} else if ((big = strndup(f->name, f->nlen)) == NULL)
		return true;
	else {
		found = http_connection_names(m, conn, big);
		free(big);
	}
	return found;
}

/* How http_write_fields copies a head's (or a trailer section's) fields. */
struct http_wopt {
	const struct http_header_rule *rules;
	size_t			 nrules;
	enum http_header_action	 dflt;
	bool			 keep_upgrade;	/* an accepted Upgrade passes */
	bool			 skip_xff;	/* X-Forwarded-For: the caller's */
	bool			 skip_te;	/* dechunked: no Transfer-Encoding */
	bool			 underscore;	/* names with '_' pass */
	bool			 inserts;	/* the rules' inserts follow */
	bool			 trailers;	/* m is a trailer section */
	const char		*host;		/* replaces Host; NULL: none */
	size_t			 hlen;
};

/* Transfer-Encoding, once for all of m's: its codings in order, in lower
 * case, ", " between (the parser checked them: tokens, chunked last). */
static void
http_write_te(struct evbuffer *out, const struct http_head *m)
{
	bool first = true;
	unsigned i;

	evbuffer_add(out, "Transfer-Encoding: ", 19);
	for (i = 0; i < m->nhdr; i++) {
		const struct http_hdr *f = &m->hdr[i];
		size_t k = 0, s;

		if (!http_token_eq(f->name, f->nlen, "transfer-encoding"))
			continue;
		while (k < f->vlen) {
			while (k < f->vlen && (f->val[k] == ' ' ||
			    f->val[k] == '\t' || f->val[k] == ','))
				k++;
			s = k;
			while (k < f->vlen && http_is_tchar((unsigned char)f->val[k]))
				k++;
			if (k > s) {
				char c;
				size_t j;

				if (!first)
					evbuffer_add(out, ", ", 2);
				first = false;
				for (j = s; j < k; j++) {
					c = f->val[j];
					if (c >= 'A' && c <= 'Z')
						c = (char)(c + 32);
					evbuffer_add(out, &c, 1);
				}
			}
			while (k < f->vlen && f->val[k] != ',')
				k++;
		}
	}
	evbuffer_add(out, "\r\n", 2);
}

/* Fields a trailer section never carries on (RFC 9110 6.5.1): framing,
 * routing, payload processing, authentication. */
static bool
http_trailer_forbidden(const struct http_hdr *f)
{
	static const char *const names[] = { "content-length",
	    "transfer-encoding", "host", "trailer", "te", "content-encoding",
	    "content-type", "content-range", "authorization", "cookie",
	    "set-cookie", "expect", "range", NULL };
	size_t i;

	for (i = 0; names[i] != NULL; i++)
		if (http_token_eq(f->name, f->nlen, names[i]))
			return true;
	return f->nlen > 6 && http_token_eq(f->name, 6, "proxy-");
}

/* Copies the fields of m to out through the policy's rules. Framing is
 * written in one canonical form: Content-Length in decimal without
 * leading zeros, Transfer-Encoding as one field. */
static void
http_write_fields(struct evbuffer *out, const struct http_head *m,
    const struct http_wopt *o)
{
	int conn = http_find(m, "connection");
	bool te_done = false, host_done = false;
	unsigned i;
	size_t k;

	for (i = 0; i < m->nhdr; i++) {
		const struct http_hdr *f = &m->hdr[i];
		const struct http_header_rule *r;

		if (o->keep_upgrade && http_token_eq(f->name, f->nlen, "upgrade"))
			;	/* passes: the protocol was accepted */
		else if (http_hop_by_hop(m, conn, f))
			continue;
		if (o->trailers && http_trailer_forbidden(f))
			continue;
		if (!o->underscore && memchr(f->name, '_', f->nlen) != NULL)
			continue;
		if (o->skip_xff && http_token_eq(f->name, f->nlen,
		    "x-forwarded-for"))
			continue;
		if (http_token_eq(f->name, f->nlen, "transfer-encoding")) {
			if (o->skip_te || te_done)
				continue;
			http_write_te(out, m);
			te_done = true;
			continue;
		}
		if (o->host != NULL && http_token_eq(f->name, f->nlen, "host")) {
			/* The authority of an absolute-form target. */
			if (!host_done) {
				evbuffer_add(out, "Host: ", 6);
				evbuffer_add(out, o->host, o->hlen);
				evbuffer_add(out, "\r\n", 2);
			}
			host_done = true;
			continue;
		}
		r = http_header_rule(o->rules, o->nrules, f->name, f->nlen);
		if ((r != NULL ? r->action : o->dflt) == HTTP_DROP)
			continue;
		evbuffer_add(out, f->name, f->nlen);
		evbuffer_add(out, ": ", 2);
		if (r != NULL && r->action == HTTP_CHANGE)
			evbuffer_add(out, r->value, strlen(r->value));
		else if (http_token_eq(f->name, f->nlen, "content-length"))
			evbuffer_add_printf(out, "%lld",
			    (long long)m->content_length);
		else
			evbuffer_add(out, f->val, f->vlen);
		evbuffer_add(out, "\r\n", 2);
	}
	if (o->host != NULL && !host_done)
		evbuffer_add_printf(out, "Host: %.*s\r\n", (int)o->hlen, o->host);
	if (!o->inserts)
		return;
	for (k = 0; k < o->nrules; k++)
		if (o->rules[k].action == HTTP_INSERT)
			evbuffer_add_printf(out, "%s: %s\r\n", o->rules[k].name,
			    o->rules[k].value);
}

static void
http_client_ip(const struct sockaddr *sa, char *buf, size_t size)
{
	if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		    buf, (socklen_t)size);
	else
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
		    buf, (socklen_t)size);
}

void
http_head_request(struct evbuffer *out, const struct http_head *m,
    const struct http_policy *p, const struct http_req_ctx *r)
{
	char ip[INET6_ADDRSTRLEN];
	int xff = http_find(m, "x-forwarded-for");
	struct http_wopt o = {
		.rules = p->reqh, .nrules = p->nreqh, .dflt = p->reqh_dflt,
		.keep_upgrade = r->upgrade, .skip_xff = p->xff != HTTP_XFF_NO,
		.underscore = p->underscore_pass, .inserts = true,
		.host = r->authority, .hlen = r->alen,
	};

	evbuffer_add(out, m->method, m->mlen);
	evbuffer_add(out, " ", 1);
	if (r->tlen > 0 && r->target[0] == '?')
		evbuffer_add(out, "/", 1);	/* "http://a?q": "/?q" */
	evbuffer_add(out, r->target, r->tlen);
	evbuffer_add(out, " HTTP/1.1\r\n", 11);
	http_write_fields(out, m, &o);
	if (m->host == -1 && r->authority == NULL) {
		/* We speak HTTP/1.1 to the server, which requires Host; an
		 * HTTP/1.0 client may not have sent one. */
		char a[PX_ADDRSTRLEN];

		evbuffer_add_printf(out, "Host: %s\r\n", r->host[0] ? r->host :
		    px_sockaddr_str(r->dst, a, sizeof(a)));
	}
	if (p->xff != HTTP_XFF_NO) {
		http_client_ip(r->client, ip, sizeof(ip));
		if (p->xff == HTTP_XFF_APPEND && xff != -1)
			evbuffer_add_printf(out, "X-Forwarded-For: %.*s, %s\r\n",
			    (int)m->hdr[xff].vlen, m->hdr[xff].val, ip);
		else
			evbuffer_add_printf(out, "X-Forwarded-For: %s\r\n", ip);
	}
	if (p->via)
		evbuffer_add(out, m->minor ? "Via: 1.1 proxyd\r\n" :
		    "Via: 1.0 proxyd\r\n", 17);
	if (r->upgrade)
		evbuffer_add(out, "Connection: upgrade\r\n", 21);
	else if (!p->keepalive_server)
		evbuffer_add(out, "Connection: close\r\n", 19);
	evbuffer_add(out, "\r\n", 2);
}

void
http_head_response(struct evbuffer *out, const struct http_head *m,
    const struct http_policy *p, const struct http_resp_ctx *r)
{
	char line[16] = "HTTP/1.1 000 ";
	struct http_wopt o = {
		.rules = p->resph, .nrules = p->nresph, .dflt = p->resph_dflt,
		.keep_upgrade = m->status == 101,
		.skip_te = r->dechunk && m->status >= 200,
		.underscore = p->underscore_pass, .inserts = true,
	};

	/* The parser took exactly three digits: no printf for them. */
	line[9] = (char)('0' + m->status / 100);
	line[10] = (char)('0' + m->status / 10 % 10);
	line[11] = (char)('0' + m->status % 10);
	evbuffer_add(out, line, 13);
	evbuffer_add(out, m->reason, m->rlen);
	evbuffer_add(out, "\r\n", 2);
	http_write_fields(out, m, &o);
	if (p->via)
		evbuffer_add(out, m->minor ? "Via: 1.1 proxyd\r\n" :
		    "Via: 1.0 proxyd\r\n", 17);
	if (m->status == 101)
		evbuffer_add(out, "Connection: upgrade\r\n", 21);
	else if (m->status >= 200) {
		if (!r->client_keep)
			evbuffer_add(out, "Connection: close\r\n", 19);
		else if (r->client_10)
			evbuffer_add(out, "Connection: keep-alive\r\n", 24);
	}
	evbuffer_add(out, "\r\n", 2);
}

void
http_head_trailers(struct evbuffer *out, const struct http_head *t,
    const struct http_policy *p, bool request)
{
	struct http_wopt o = {
		.rules = request ? p->reqh : p->resph,
		.nrules = request ? p->nreqh : p->nresph,
		.dflt = request ? p->reqh_dflt : p->resph_dflt,
		.underscore = p->underscore_pass, .trailers = true,
	};

	evbuffer_add(out, "0\r\n", 3);
	if (p->trailers_pass)
		http_write_fields(out, t, &o);
	evbuffer_add(out, "\r\n", 2);
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
