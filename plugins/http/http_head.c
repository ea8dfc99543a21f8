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

/* Copies the fields of m to out through the policy's rules. */
static void
http_write_fields(struct evbuffer *out, const struct http_head *m,
    const struct http_header_rule *rules, size_t nrules,
    enum http_header_action dflt, bool keep_upgrade, bool skip_xff,
    bool skip_te)
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
		if ((r != NULL ? r->action : dflt) == HTTP_DROP)
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

	evbuffer_add(out, m->method, m->mlen);
	evbuffer_add(out, " ", 1);
	evbuffer_add(out, r->target, r->tlen);
	evbuffer_add(out, " HTTP/1.1\r\n", 11);
	http_write_fields(out, m, p->reqh, p->nreqh, p->reqh_dflt, r->upgrade,
	    p->xff != HTTP_XFF_NO, false);
	if (m->host == -1) {
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

	/* The parser took exactly three digits: no printf for them. */
	line[9] = (char)('0' + m->status / 100);
	line[10] = (char)('0' + m->status / 10 % 10);
	line[11] = (char)('0' + m->status % 10);
	evbuffer_add(out, line, 13);
	evbuffer_add(out, m->reason, m->rlen);
	evbuffer_add(out, "\r\n", 2);
	http_write_fields(out, m, p->resph, p->nresph, p->resph_dflt,
	    m->status == 101, false, r->dechunk && m->status >= 200);
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

bool
http_head_origin_form(const char *target, size_t tlen, const char **auth,
    size_t *alen, const char **path, size_t *plen)
{
	const char *slash;

	if (tlen < 8 || strncasecmp(target, "http://", 7) != 0)
		return false;
	*auth = target + 7;
	slash = memchr(*auth, '/', tlen - 7);
	*alen = slash != NULL ? (size_t)(slash - *auth) : tlen - 7;
	*path = slash != NULL ? slash : "/";
	*plen = slash != NULL ? tlen - (size_t)(slash - target) : 1;
	return true;
}
