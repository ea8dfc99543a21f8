/* The <http> section of a service file (docs/CONFIG.md), and the
 * decisions its request and url rules make. Loaded once; read-only and
 * shared by every worker afterwards. */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/tree.h>

#include "cfgread.h"
#include "parse.h"
#include "auth.h"
#include "http.h"

/* Statuses proxyd itself answers with; a template dir may override each. */
static const int http_own_statuses[] = {
	400, 403, 405, 408, 413, 414, 429, 431, 500, 501, 502, 503, 504, 505,
};

/* The default <request> list: the common methods on any port, and
 * CONNECT to 443 (which only forward mode takes at all); TRACE and the
 * rest get the list's default (405). It decides whatever the policy's own
 * rules leave undecided, unless they end with a catch-all method="*". */
static char *http_builtin_methods[] = { "GET", "HEAD", "POST", "PUT",
    "DELETE", "OPTIONS", "PATCH" };
static char *http_builtin_connect[] = { "CONNECT" };
static uint16_t http_builtin_connect_ports[] = { 443 };
static const struct http_request_rule http_builtin_request[] = {
	{ .methods = { .w = http_builtin_methods, .n =
	    sizeof(http_builtin_methods) / sizeof(http_builtin_methods[0]) },
	  .action = PX_ACT_ACCEPT },
	{ .methods = { .w = http_builtin_connect, .n = 1 },
	  .ports = http_builtin_connect_ports, .nports = 1,
	  .action = PX_ACT_ACCEPT },
};

static void
http_words_free(struct http_words *w)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		free(w->w[i]);
	free(w->w);
	memset(w, 0, sizeof(*w));
}

/* Splits a space-separated attribute value. */
static int
http_words_parse(const char *v, struct http_words *w)
{
	const char *p = v;

	memset(w, 0, sizeof(*w));
	while (*p != '\0') {
		size_t len;
		char **nw;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		len = strcspn(p, " \t\n");
		if (len == 0)
			break;
		if (len == 1 && *p == '*')
			w->any = true;
		if ((nw = px_grow(w->w, w->n, sizeof(*nw))) == NULL ||
		    (nw[w->n] = strndup(p, len)) == NULL) {
			if (nw != NULL)
				w->w = nw;
			return -1;
		}
		w->w = nw;
		w->n++;
		p += len;
	}
	return 0;
}

bool
http_words_has(const struct http_words *w, const char *s, size_t len)
{
	size_t i;

	if (w->any)
		return true;
	for (i = 0; i < w->n; i++)
		if (strlen(w->w[i]) == len && strncasecmp(w->w[i], s, len) == 0)
			return true;
	return false;
}

/* A header rule's action= (required): the core's reader for the fixed
 * choice, the wording of px_attr_action's when it is missing. */
static int
http_attr_header_action(struct px_cfgerr *e, const xmlNode *n,
    enum http_header_action *out)
{
	static const char *const names[] = { "accept", "drop", "change",
	    "insert", NULL };
	int i = -1;

	if (px_attr_choice(e, n, "action", names, &i) == -1)
		return -1;
	if (i == -1) {
		px_cfg_error(e, n, "<%s> needs action= (accept, drop, change or "
		    "insert)", (const char *)n->name);
		return -1;
	}
	*out = (enum http_header_action)i;
	return 0;
}

static int
http_attr_status(struct px_cfgerr *e, const xmlNode *n, int def, int *out)
{
	uint64_t u = (uint64_t)def;

	if (px_attr_uint(e, n, "status", 400, 599, &u) == -1)
		return -1;
	*out = (int)u;
	return 0;
}

static int
http_attr_words(struct px_cfgerr *e, const xmlNode *n, const char *name,
    bool required, struct http_words *w)
{
	char *v = px_attr(n, name);
	int rc = 0;

	memset(w, 0, sizeof(*w));
	if (v == NULL) {
		if (required)
			px_cfg_error(e, n, "<%s> needs %s=\"...\"",
			    (const char *)n->name, name);
		return required ? -1 : 0;
	}
	if (http_words_parse(v, w) == -1) {
		px_cfg_error(e, n, "out of memory");
		rc = -1;
	} else if (w->n == 0) {
		px_cfg_error(e, n, "%s=\"\": empty list", name);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

/* user= and group= of a rule: only where the service has <auth> or a
 * <tls side="client" identity=>. */
static int
http_load_who(struct px_cfgerr *e, const xmlNode *n, struct http_words *users,
    struct http_words *groups)
{
	const xmlNode *svc = n->parent != NULL ? n->parent->parent : NULL, *c;
	bool auth = false;

	if (http_attr_words(e, n, "user", false, users) == -1 ||
	    http_attr_words(e, n, "group", false, groups) == -1)
		return -1;
	if (users->n == 0 && groups->n == 0)
		return 0;
	for (c = svc != NULL ? svc->children : NULL; c != NULL; c = c->next) {
		xmlChar *id;

		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (xmlStrcmp(c->name, (const xmlChar *)"auth") == 0)
			auth = true;
		/* A client certificate that names its user. */
		if (xmlStrcmp(c->name, (const xmlChar *)"tls") == 0 &&
		    (id = xmlGetProp(c, (const xmlChar *)"identity")) != NULL) {
			if (xmlStrcmp(id, (const xmlChar *)"none") != 0)
				auth = true;
			xmlFree(id);
		}
	}
	if (!auth) {
		px_cfg_error(e, n, "user=/group=: the service has no <auth> "
		    "nor <tls identity=> to say who its users are");
		return -1;
	}
	return 0;
}

/* A rule's user= and group= against who the request's connection is. */
static _Thread_local const struct px_auth_id *http_who;
static _Thread_local bool http_who_set;

static bool
http_who_ok(const struct http_words *users, const struct http_words *groups)
{
	const struct px_auth_id *id = http_who;
	size_t i;

	if (users->n == 0 && groups->n == 0)
		return true;
	/* Only a request judged for a connection (http_policy_check_as);
	 * the Allow list (no request) counts such rules out. */
	if (!http_who_set || id == NULL)
		return false;
	if (users->any || groups->any)
		return true;
	for (i = 0; i < users->n; i++)
		if (strcmp(users->w[i], id->user) == 0)
			return true;
	for (i = 0; i < groups->n; i++)
		if (px_auth_id_in_group(id, groups->w[i]))
			return true;
	return false;
}

static int
http_load_request(struct px_cfgerr *e, const xmlNode *n, struct http_policy *p)
{
	struct http_request_rule *r, *nr;
	struct http_words ports;
	size_t i;

	if ((nr = px_grow(p->req, p->nreq, sizeof(*nr))) == NULL)
		return -1;
	p->req = nr;
	r = &p->req[p->nreq];
	memset(r, 0, sizeof(*r));
	if (http_attr_words(e, n, "method", true, &r->methods) == -1)
		return -1;
	p->nreq++;
	r->line = px_xml_line(n);
	if (px_attr_label(e, n, &r->label) == -1 ||
	    px_attr_action(e, n, PX_ACTIONS_ADA, true, &r->action) == -1 ||
	    http_attr_status(e, n, 405, &r->status) == -1 ||
	    http_attr_words(e, n, "ports", false, &ports) == -1)
		return -1;
	if (ports.n != 0 && !ports.any) {
		if ((r->ports = calloc(ports.n, sizeof(*r->ports))) == NULL) {
			http_words_free(&ports);
			return -1;
		}
		for (i = 0; i < ports.n; i++) {
			uint64_t u;
			const char *why;

			if (px_parse_uint(ports.w[i], 1, 65535, &u, &why) == -1) {
				px_cfg_error(e, n, "ports: \"%s\": %s", ports.w[i],
				    why);
				http_words_free(&ports);
				return -1;
			}
			r->ports[r->nports++] = (uint16_t)u;
		}
	}
	http_words_free(&ports);
	if (http_load_who(e, n, &r->users, &r->groups) == -1)
		return -1;
	if (r->methods.any && r->nports == 0 && r->users.n == 0 &&
	    r->groups.n == 0)
		p->req_catch_all = true;
	return 0;
}

/* Whether the (canonical) path glob pat has a segment s: "/s/" inside
 * it, or "/s" at its end. */
static bool
http_pattern_has_segment(const char *pat, const char *s)
{
	size_t len = strlen(s);
	const char *p;

	for (p = strchr(pat, '/'); p != NULL; p = strchr(p + 1, '/'))
		if (strncmp(p + 1, s, len) == 0 &&
		    (p[1 + len] == '/' || p[1 + len] == '\0'))
			return true;
	return false;
}

/* path=: a glob no canonical path can match is a mistake (the rule would
 * never apply): refused, with why. */
static int
http_load_url_path(struct px_cfgerr *e, const xmlNode *n,
    const struct http_policy *p, char *pat)
{
	static const char *const never[] = { "%2F", "%5C", "%00", "\\\\" };
	size_t i;

	/* Written as http_target_canon() writes paths: "%7e" is '~',
	 * "%c3" is "%C3". */
	pat[http_pct_canon_str(pat, strlen(pat), pat)] = '\0';
	for (i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if (strstr(pat, never[i]) != NULL) {
			px_cfg_error(e, n, "path=\"%s\": never matches: a path "
			    "with %s is refused (400)", pat, i == 3 ? "'\\'" :
			    never[i]);
			return -1;
		}
	if (http_pattern_has_segment(pat, ".") ||
	    http_pattern_has_segment(pat, "..")) {
		px_cfg_error(e, n, "path=\"%s\": never matches: paths are "
		    "judged with their dot-segments removed", pat);
		return -1;
	}
	if (strstr(pat, "/.;") != NULL || strstr(pat, "/..;") != NULL) {
		px_cfg_error(e, n, "path=\"%s\": never matches: a path with "
		    "a dot-segment with parameters is refused (400)", pat);
		return -1;
	}
	if (p->merge_slashes && strstr(pat, "//") != NULL) {
		px_cfg_error(e, n, "path=\"%s\": never matches: with "
		    "merge-slashes=\"yes\" paths are judged with \"//\" as "
		    "\"/\"", pat);
		return -1;
	}
	return 0;
}

static int
http_load_url(struct px_cfgerr *e, const xmlNode *n, struct http_policy *p)
{
	struct http_url_rule *r, *nr;

	if ((nr = px_grow(p->url, p->nurl, sizeof(*nr))) == NULL)
		return -1;
	p->url = nr;
	r = &p->url[p->nurl++];
	memset(r, 0, sizeof(*r));
	r->host = px_attr(n, "host");
	r->path = px_attr(n, "path");
	r->query = px_attr(n, "query");
	if (r->host == NULL && r->path == NULL && r->query == NULL) {
		px_cfg_error(e, n, "<url> needs host=\"...\", path=\"...\" or "
		    "query=\"...\"");
		return -1;
	}
	if (r->path != NULL && http_load_url_path(e, n, p, r->path) == -1)
		return -1;
	if (r->query != NULL) {
		size_t len = strlen(r->query);
		const char *why;
		char *d;

		/* Decoded as queries are (http_query_decode), then a glob;
		 * into a copy, so that an error names the pattern written. */
		if ((d = malloc(len + 1)) == NULL)
			return -1;
		if (http_query_decode(r->query, len, d, &len, &why) != 0) {
			px_cfg_error(e, n, "query=\"%s\": %s", r->query, why);
			free(d);
			return -1;
		}
		memcpy(r->query, d, len + 1);
		free(d);
		p->url_query = true;
	}
	r->line = px_xml_line(n);
	if (px_attr_label(e, n, &r->label) == -1 ||
	    px_attr_action(e, n, PX_ACTIONS_ADA, true, &r->action) == -1 ||
	    http_attr_status(e, n, 403, &r->status) == -1 ||
	    http_load_who(e, n, &r->users, &r->groups) == -1)
		return -1;
	return 0;
}

static int
http_load_header(struct px_cfgerr *e, const xmlNode *n,
    struct http_header_rule **rules, size_t *nrules)
{
	struct http_header_rule *r, *nr;
	const char *c;

	if ((nr = px_grow(*rules, *nrules, sizeof(*nr))) == NULL)
		return -1;
	*rules = nr;
	r = &nr[(*nrules)++];
	memset(r, 0, sizeof(*r));
	if ((r->name = px_attr(n, "name")) == NULL || r->name[0] == '\0') {
		px_cfg_error(e, n, "<%s> needs name=\"...\"", (const char *)n->name);
		return -1;
	}
	for (c = r->name; *c != '\0'; c++)
		if (!http_is_tchar((unsigned char)*c)) {
			px_cfg_error(e, n, "name=\"%s\": not a header name", r->name);
			return -1;
		}
	if (http_attr_header_action(e, n, &r->action) == -1)
		return -1;
	r->value = px_attr(n, "value");
	if ((r->action == HTTP_CHANGE || r->action == HTTP_INSERT) &&
	    r->value == NULL) {
		px_cfg_error(e, n, "action=\"%s\" needs value=\"...\"",
		    r->action == HTTP_CHANGE ? "change" : "insert");
		return -1;
	}
	if (r->value != NULL)
		for (c = r->value; *c != '\0'; c++)
			if ((unsigned char)*c < 0x20 && *c != '\t') {
				px_cfg_error(e, n, "value: control characters "
				    "are not allowed in a header");
				return -1;
			}
	return 0;
}

/* errors/@dir: <status>.html files, read once here. */
static int
http_load_errors(struct px_cfgerr *e, const xmlNode *n, struct http_policy *p)
{
	char *dir = px_attr(n, "dir");
	size_t i;
	int rc = 0;

	if (px_attr_bool(e, n, "silent", &p->silent) == -1) {
		xmlFree(dir);
		return -1;
	}
	if (dir == NULL)
		return 0;
	for (i = 0; i < sizeof(http_own_statuses) / sizeof(int); i++) {
		int st = http_own_statuses[i];
		char path[4096], *buf;
		FILE *f;
		size_t len;

		snprintf(path, sizeof(path), "%s/%d.html", dir, st);
		if ((f = fopen(path, "r")) == NULL) {
			if (errno == ENOENT)
				continue;	/* the built-in page then */
			px_cfg_error(e, n, "%s: %s", path, strerror(errno));
			rc = -1;
			break;
		}
		if ((buf = malloc(65537)) == NULL) {
			fclose(f);
			rc = -1;
			break;
		}
		len = fread(buf, 1, 65537, f);
		fclose(f);
		if (len > 65536) {
			px_cfg_error(e, n, "%s: larger than 64k", path);
			free(buf);
			rc = -1;
			break;
		}
		buf[len] = '\0';
		p->pages[st] = buf;
	}
	xmlFree(dir);
	return rc;
}

static int
http_load_limits(struct px_cfgerr *e, const xmlNode *n, struct http_policy *p)
{
	uint64_t u;
	int rc = 0;

	u = p->lim.max_line;
	rc |= px_attr_size(e, n, "max-line", 64, 1024 * 1024, &u);
	p->lim.max_line = (size_t)u;
	u = p->lim.max_header_lines;
	rc |= px_attr_uint(e, n, "max-header-lines", 1, HTTP_MAX_HEADERS - 1, &u);
	p->lim.max_header_lines = (size_t)u;
	u = p->lim.max_header_bytes;
	rc |= px_attr_size(e, n, "max-header-bytes", 256, 1024 * 1024, &u);
	p->lim.max_header_bytes = (size_t)u;
	u = p->lim.max_url;
	rc |= px_attr_size(e, n, "max-url", 16, 1024 * 1024, &u);
	p->lim.max_url = (size_t)u;
	rc |= px_attr_size(e, n, "max-body", 0, UINT64_C(1) << 62, &p->max_body);
	rc |= px_attr_duration(e, n, "request-timeout", false, 100,
	    24 * 3600 * 1000, &p->request_timeout_ms);
	rc |= px_attr_duration(e, n, "response-timeout", false, 100,
	    24 * 3600 * 1000, &p->response_timeout_ms);
	return rc != 0 ? -1 : 0;
}

/* <h2>: the SETTINGS proxyd sends and enforces (RFC 9113 6.5.2). */
static int
http_load_h2(struct px_cfgerr *e, const xmlNode *n, struct http_policy *p)
{
	uint64_t u;
	int rc = 0;

	u = p->h2_max_streams;
	rc |= px_attr_uint(e, n, "max-concurrent-streams", 1, 10000, &u);
	p->h2_max_streams = (uint32_t)u;
	u = p->h2_window;
	/* 2^31-1: the largest window RFC 9113 6.9.1 allows. */
	rc |= px_attr_size(e, n, "initial-window", 1024, 0x7fffffff, &u);
	p->h2_window = (uint32_t)u;
	u = p->h2_max_header_list;
	rc |= px_attr_size(e, n, "max-header-list", 256, 1024 * 1024, &u);
	p->h2_max_header_list = (uint32_t)u;
	return rc != 0 ? -1 : 0;
}

const char *
http_policy_client_alpn(const void *pol)
{
	const struct http_policy *p = pol;

	return p != NULL && p->h2 ? "h2,http/1.1,http/1.0" :
	    "http/1.1,http/1.0";
}

static int
http_load_top(struct px_cfgerr *e, const xmlNode *sec, struct http_policy *p)
{
	/* By enum http_xff. */
	static const char *const xff_names[] = { "no", "append", "replace",
	    NULL };
	static const char *const drop_pass[] = { "drop", "pass", NULL };
	/* By enum http_server_h2. */
	static const char *const sh2_names[] = { "no", "yes", "auto", NULL };
	uint64_t u;
	size_t i;
	int xff = (int)p->xff;
	int us = p->underscore_pass, tr = p->trailers_pass;
	int rc = 0;

	rc |= px_attr_bool(e, sec, "keepalive-client", &p->keepalive_client);
	rc |= px_attr_bool(e, sec, "keepalive-server", &p->keepalive_server);
	u = p->server_pool;
	rc |= px_attr_uint(e, sec, "server-pool", 0, 100000, &u);
	p->server_pool = (unsigned)u;
	rc |= px_attr_duration(e, sec, "server-idle", true, 100,
	    3600 * 1000, &p->server_idle_ms);
	u = p->max_requests;
	rc |= px_attr_uint(e, sec, "max-requests-per-connection", 0, 1u << 30, &u);
	p->max_requests = (unsigned)u;
	rc |= px_attr_bool(e, sec, "via", &p->via);
	rc |= px_attr_bool(e, sec, "check-host", &p->check_host);
	rc |= px_attr_bool(e, sec, "merge-slashes", &p->merge_slashes);
	rc |= px_attr_bool(e, sec, "h2", &p->h2);
	rc |= px_attr_bool(e, sec, "h2c", &p->h2c);
	if (px_attr_choice(e, sec, "server-h2", sh2_names, &p->server_h2) == -1)
		rc = -1;
	if (px_attr_choice(e, sec, "underscore-headers", drop_pass, &us) == -1)
		rc = -1;
	p->underscore_pass = us == 1;
	if (px_attr_choice(e, sec, "trailers", drop_pass, &tr) == -1)
		rc = -1;
	p->trailers_pass = tr == 1;
	if (http_attr_words(e, sec, "transfer-codings", false, &p->codings) == -1)
		rc = -1;
	for (i = 0; i < p->codings.n; i++) {
		const char *c;

		if (strcasecmp(p->codings.w[i], "chunked") == 0 ||
		    strcmp(p->codings.w[i], "*") == 0) {
			px_cfg_error(e, sec, "transfer-codings: \"%s\": name the "
			    "codings other than chunked", p->codings.w[i]);
			rc = -1;
		}
		for (c = p->codings.w[i]; *c != '\0'; c++)
			if (!http_is_tchar((unsigned char)*c)) {
				px_cfg_error(e, sec, "transfer-codings: \"%s\": not "
				    "a coding name", p->codings.w[i]);
				rc = -1;
				break;
			}
	}
	if (px_attr_choice(e, sec, "x-forwarded-for", xff_names, &xff) == -1)
		rc = -1;
	p->xff = (enum http_xff)xff;
	return rc != 0 ? -1 : 0;
}

int
http_policy_load(const xmlNode *sec, void **pol, struct px_cfgerr *e)
{
	struct http_policy *p;
	const xmlNode *n;
	bool seen_limits = false, seen_errors = false, seen_h2 = false;
	int rc = 0;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		px_cfg_error(e, sec, "out of memory");
		return -1;
	}
	p->keepalive_client = p->keepalive_server = true;
	p->server_pool = 64;
	p->server_idle_ms = 30 * 1000;
	p->via = true;
	p->xff = HTTP_XFF_APPEND;
	p->check_host = true;
	p->merge_slashes = true;
	p->lim.max_line = 8192;
	p->lim.max_header_lines = 100;
	p->lim.max_header_bytes = 32768;
	p->lim.max_url = 8192;
	p->request_timeout_ms = 10 * 1000;
	p->response_timeout_ms = 5 * 60 * 1000;
	p->h2_max_streams = 100;
	p->h2_window = 1024 * 1024;
	p->h2_max_header_list = 32768;
	/* What a request no rule of a list matches gets (docs/CONFIG.md).
	 * <request>: http_builtin_request decides what the rules leave
	 * (unless one is a catch-all), then 405. */
	p->req_dflt = PX_ACT_DENY;
	p->req_dflt_status = 405;
	/* <url>: accepted (the list names what to refuse). */
	p->url_dflt = PX_ACT_ACCEPT;
	p->url_dflt_status = 403;
	/* <request-header>, <response-header>: a field no rule names is sent
	 * on as it is. */
	p->reqh_dflt = HTTP_ACCEPT;
	p->resph_dflt = HTTP_ACCEPT;
	/* <upgrade>: a protocol no accepted <upgrade> lists is refused: the
	 * Upgrade field is dropped (hop-by-hop) and the request goes on as
	 * plain HTTP. */
	p->upgrade_dflt = PX_ACT_DENY;
	*pol = p;
	if (sec == NULL)
		return 0;
	if (http_load_top(e, sec, p) == -1)
		rc = -1;
	for (n = sec->children; n != NULL; n = n->next) {
		const char *name = (const char *)n->name;

		if (n->type != XML_ELEMENT_NODE)
			continue;
		if (strcmp(name, "limits") == 0) {
			if (seen_limits)
				px_cfg_error(e, n, "<limits> given twice");
			seen_limits = true;
			if (http_load_limits(e, n, p) == -1)
				rc = -1;
		} else if (strcmp(name, "h2") == 0) {
			if (seen_h2) {
				px_cfg_error(e, n, "<h2> given twice");
				rc = -1;
			}
			seen_h2 = true;
			if (http_load_h2(e, n, p) == -1)
				rc = -1;
		} else if (strcmp(name, "request") == 0) {
			if (http_load_request(e, n, p) == -1)
				rc = -1;
		} else if (strcmp(name, "url") == 0) {
			if (http_load_url(e, n, p) == -1)
				rc = -1;
		} else if (strcmp(name, "request-header") == 0) {
			if (http_load_header(e, n, &p->reqh, &p->nreqh) == -1)
				rc = -1;
		} else if (strcmp(name, "response-header") == 0) {
			if (http_load_header(e, n, &p->resph, &p->nresph) == -1)
				rc = -1;
		} else if (strcmp(name, "upgrade") == 0) {
			enum px_action a = PX_ACT_ACCEPT;

			/* The last <upgrade> replaces the list: free the
			 * one before it. */
			http_words_free(&p->upgrade);
			if (px_attr_action(e, n, PX_ACTIONS_AD, true, &a) == -1 ||
			    http_attr_words(e, n, "protocols", true,
			    &p->upgrade) == -1)
				rc = -1;
			else if (a != PX_ACT_ACCEPT)
				http_words_free(&p->upgrade);
		} else if (strcmp(name, "errors") == 0) {
			if (seen_errors)
				px_cfg_error(e, n, "<errors> given twice");
			seen_errors = true;
			if (http_load_errors(e, n, p) == -1)
				rc = -1;
		}
	}
	if (p->lim.max_line > p->lim.max_header_bytes) {
		px_cfg_error(e, sec, "limits: max-line is larger than max-header-bytes");
		rc = -1;
	}
	return rc;
}

void
http_policy_free(void *pol)
{
	struct http_policy *p = pol;
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->nreq; i++) {
		http_words_free(&p->req[i].methods);
		free(p->req[i].ports);
		free(p->req[i].label);
		http_words_free(&p->req[i].users);
		http_words_free(&p->req[i].groups);
	}
	free(p->req);
	for (i = 0; i < p->nurl; i++) {
		xmlFree(p->url[i].host);
		xmlFree(p->url[i].path);
		xmlFree(p->url[i].query);
		free(p->url[i].label);
		http_words_free(&p->url[i].users);
		http_words_free(&p->url[i].groups);
	}
	free(p->url);
	for (i = 0; i < p->nreqh; i++) {
		xmlFree(p->reqh[i].name);
		xmlFree(p->reqh[i].value);
	}
	free(p->reqh);
	for (i = 0; i < p->nresph; i++) {
		xmlFree(p->resph[i].name);
		xmlFree(p->resph[i].value);
	}
	free(p->resph);
	http_words_free(&p->upgrade);
	http_words_free(&p->codings);
	for (i = 0; i < HTTP_ERROR_PAGES; i++)
		free(p->pages[i]);
	free(p);
}

/* A rule's (or a default's) action as http_policy_check answers it. */
static int
http_refusal(enum px_action a, int status)
{
	return a == PX_ACT_ACCEPT ? 0 : a == PX_ACT_ABORT ? -1 : status;
}

/* The first rule of req[n] for this method and port, or NULL. */
static const struct http_request_rule *
http_request_match(const struct http_request_rule *req, size_t n,
    const char *method, size_t mlen, uint16_t port)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		bool port_ok = req[i].nports == 0;

		if (!http_words_has(&req[i].methods, method, mlen) ||
		    !http_who_ok(&req[i].users, &req[i].groups))
			continue;
		for (k = 0; k < req[i].nports; k++)
			if (req[i].ports[k] == port)
				port_ok = true;
		if (port_ok)
			return &req[i];
	}
	return NULL;
}

/* What the request rules (the policy's, then the built-in list) say of
 * method on port: 0, or as http_policy_check answers. */
static int
http_request_decide(const struct http_policy *p, const char *method,
    size_t mlen, uint16_t port, const char **why, struct http_hit *rule)
{
	const struct http_request_rule *hit;
	bool builtin = false;
	int rc;

	rule->line = 0;
	rule->label = NULL;

	hit = http_request_match(p->req, p->nreq, method, mlen, port);
	if (hit == NULL && !p->req_catch_all) {
		builtin = true;
		hit = http_request_match(http_builtin_request,
		    sizeof(http_builtin_request) /
		    sizeof(http_builtin_request[0]), method, mlen, port);
	}
	if (hit == NULL) {
		if ((rc = http_refusal(p->req_dflt, p->req_dflt_status)) != 0) {
			*why = builtin ? "method not allowed by default policy" :
			    "no request rule matches";
			return rc;
		}
	} else if (hit->action != PX_ACT_ACCEPT) {
		/* (The built-in list accepts only.) */
		rule->line = hit->line;
		rule->label = hit->label;
		*why = "method denied by policy";
		return http_refusal(hit->action, hit->status);
	}
	return 0;
}

/* Adds method to the Allow list in buf (len bytes so far) unless it is
 * there already or does not fit. */
static size_t
http_allow_add(char *buf, size_t size, size_t len, const char *method)
{
	size_t m = strlen(method), i = 0;
	int n;

	while (i < len) {
		size_t e = i;

		while (e < len && buf[e] != ',')
			e++;
		if (e - i == m && strncasecmp(buf + i, method, m) == 0)
			return len;
		i = e + 2;	/* ", " */
	}
	n = snprintf(buf + len, size - len, "%s%s", len ? ", " : "", method);
	if (n < 0 || (size_t)n >= size - len) {
		buf[len] = '\0';
		return len;
	}
	return len + (size_t)n;
}

/* Adds to buf (an Allow list of len bytes) each method of w that the
 * rules accept on port and buf does not have yet. */
static size_t
http_allow_words(const struct http_policy *p, const struct http_words *w,
    uint16_t port, bool connect, char *buf, size_t size, size_t len)
{
	struct http_hit hit;
	const char *why;
	size_t k;

	for (k = 0; k < w->n; k++) {
		const char *m = w->w[k];

		if (strcmp(m, "*") == 0 ||
		    (!connect && strcasecmp(m, "CONNECT") == 0) ||
		    http_request_decide(p, m, strlen(m), port, &why,
		    &hit) != 0)
			continue;
		len = http_allow_add(buf, size, len, m);
	}
	return len;
}

void
http_policy_allow(const struct http_policy *p, uint16_t port, bool connect,
    char *buf, size_t size)
{
	size_t i, len = 0;

	buf[0] = '\0';
	/* The candidates: every method a rule names, then the built-in
	 * ones. */
	for (i = 0; i < p->nreq; i++)
		len = http_allow_words(p, &p->req[i].methods, port, connect,
		    buf, size, len);
	for (i = 0; i < sizeof(http_builtin_request) /
	    sizeof(http_builtin_request[0]); i++)
		len = http_allow_words(p, &http_builtin_request[i].methods,
		    port, connect, buf, size, len);
}

/* The url rules on one reading of the path: 0, the status, -1. */
static int
http_url_decide(const struct http_policy *p, const char *host,
    const char *path, const char *query, const char **why,
    struct http_hit *hit)
{
	const struct http_url_rule *u;
	size_t i;
	int rc;

	for (i = 0; i < p->nurl; i++) {
		u = &p->url[i];
		if (u->host != NULL && fnmatch(u->host, host, FNM_CASEFOLD) != 0)
			continue;
		if (u->path != NULL && fnmatch(u->path, path, 0) != 0)
			continue;
		if (u->query != NULL && fnmatch(u->query, query != NULL ?
		    query : "", 0) != 0)
			continue;
		if (!http_who_ok(&u->users, &u->groups))
			continue;
		hit->line = u->line;
		hit->label = u->label;
		if (u->action != PX_ACT_ACCEPT)
			*why = "URL denied by policy";
		return http_refusal(u->action, u->status);
	}
	if ((rc = http_refusal(p->url_dflt, p->url_dflt_status)) != 0)
		*why = "no url rule matches";
	return rc;
}

/* Room for len bytes and a NUL: stack (size bytes) when they fit, else
 * from the heap (*heap, which the caller frees); NULL: no memory. */
static char *
http_scratch(char *stack, size_t size, size_t len, char **heap)
{
	if (len < size)
		return stack;
	return *heap = malloc(len + 1);
}

int
http_policy_check(const struct http_policy *p, const char *method,
    size_t mlen, uint16_t port, const char *host, const char *path,
    const char *query, const char **why, struct http_hit *hit)
{
	struct http_hit none;
	char qbuf[1024], pbuf[1024], *qheap = NULL, *pheap = NULL, *d;
	const char *r;
	size_t len;
	int rc;

	if (hit == NULL)
		hit = &none;
	if ((rc = http_request_decide(p, method, mlen, port, why, hit)) != 0)
		return rc;
	/* query= reads the query decoded as the application will
	 * (http_query_decode); one that cannot be is refused. */
	if (p->url_query && query != NULL) {
		len = strlen(query);
		if ((d = http_scratch(qbuf, sizeof(qbuf), len, &qheap)) == NULL) {
			*why = "out of memory";
			return 500;
		}
		if ((rc = http_query_decode(query, len, d, &len, why)) != 0)
			goto done;
		query = d;
	}
	/* A segment's ";params" are part of its name to nginx and taken
	 * off by Tomcat, Jetty and Spring ("/admin;x/y" is their
	 * "/admin/y"): with a ';' the path is judged both ways, without
	 * them first, and refused if either reading is. */
	if (strchr(path, ';') != NULL) {
		if ((d = http_scratch(pbuf, sizeof(pbuf), strlen(path),
		    &pheap)) == NULL) {
			*why = "out of memory";
			rc = 500;
			goto done;
		}
		for (r = path, len = 0; *r != '\0'; ) {
			if (*r == ';')
				r += strcspn(r, "/");
			else
				d[len++] = *r++;
		}
		d[len] = '\0';
		if ((rc = http_url_decide(p, host, d, query, why, hit)) != 0)
			goto done;
	}
	rc = http_url_decide(p, host, path, query, why, hit);
done:
	free(pheap);
	free(qheap);
	return rc;
}

int
http_policy_check_as(const struct http_policy *p, const struct px_auth_id *id,
    const char *method, size_t mlen, uint16_t port, const char *host,
    const char *path, const char *query, const char **why,
    struct http_hit *hit)
{
	int rc;

	http_who = id;
	http_who_set = true;
	rc = http_policy_check(p, method, mlen, port, host, path, query, why,
	    hit);
	http_who = NULL;
	http_who_set = false;
	return rc;
}

bool
http_policy_upgrade(const struct http_policy *p, const char *v, size_t len)
{
	size_t n;

	/* "websocket", "h2c", "foo/2": the name before any version or the
	 * next protocol; within the field (v is not NUL-terminated). */
	for (n = 0; n < len; n++)
		if (v[n] == '/' || v[n] == ' ' || v[n] == ',' || v[n] == '\t')
			break;
	if (http_words_has(&p->upgrade, v, n))
		return true;
	return p->upgrade_dflt == PX_ACT_ACCEPT;
}

bool
http_policy_codings(const struct http_policy *p, const struct http_head *m)
{
	unsigned i;

	if (!m->te_other)
		return true;
	for (i = 0; i < m->nhdr; i++) {
		const struct http_hdr *f = &m->hdr[i];
		size_t k = 0, s, e;

		if (!http_token_eq(f->name, f->nlen, "transfer-encoding"))
			continue;
		/* The parser checked the list: tokens, chunked last. */
		while (http_coding_next(f->val, f->vlen, &k, &s, &e))
			if (!http_token_eq(f->val + s, e - s, "chunked") &&
			    !http_words_has(&p->codings, f->val + s, e - s))
				return false;
	}
	return true;
}
