/* Scanners and <scan> as loaded from the configuration (whose transfers
 * it scans), and the verdict counters (scan.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <libxml/tree.h>

#include "cfgread.h"
#include "parse.h"
#include "scan.h"
#include "spool.h"

#define PX_SCANNERS_MAX		64

int
px_icap_url_parse(const char *url, struct px_scanner *out, const char **why)
{
	const char *hp, *slash;
	char host[sizeof(out->authority)];
	size_t hlen;

	if (strncmp(url, "icap://", 7) != 0) {
		*why = "expected icap://ADDRESS[:PORT]/SERVICE";
		return -1;
	}
	hp = url + 7;
	if ((slash = strchr(hp, '/')) == NULL || slash[1] == '\0') {
		*why = "no service after the address (icap://ADDRESS:PORT/SERVICE)";
		return -1;
	}
	hlen = (size_t)(slash - hp);
	if (hlen == 0 || hlen >= sizeof(host) - 6 ||
	    strlen(slash) >= sizeof(out->path)) {
		*why = "address or service too long";
		return -1;
	}
	memcpy(host, hp, hlen);
	host[hlen] = '\0';
	/* No port: ICAP's own (RFC 3507 4.2). */
	if (strrchr(host, ':') == NULL || (host[0] == '[' &&
	    host[hlen - 1] == ']'))
		strcat(host, ":1344");
	if (px_parse_hostport(host, &out->addr, &out->addrlen, why) == -1)
		return -1;
	snprintf(out->authority, sizeof(out->authority), "%s", host);
	snprintf(out->path, sizeof(out->path), "%s", slash);
	for (hp = slash; *hp != '\0'; hp++)
		if (*hp <= 0x20 || *hp >= 0x7f) {
			*why = "the service path has a blank or a non-ASCII byte";
			return -1;
		}
	return 0;
}

/* A metrics label and a log value: no quoting needed. */
static bool
px_scanner_name_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

static void
px_scanner_load(struct px_scanner *s, const xmlNode *n, struct px_cfgerr *e)
{
	const char *why;
	char *v;
	uint64_t u;

	s->name = px_attr(n, "name");
	s->url = px_attr(n, "url");
	s->timeout_ms = 30 * 1000;
	s->max_connections = 16;
	if (s->name == NULL || !px_scanner_name_ok(s->name))
		px_cfg_error(e, n, "name=\"%s\": use 1..64 of A-Z a-z 0-9 . _ -",
		    s->name != NULL ? s->name : "");
	if (s->url != NULL && px_icap_url_parse(s->url, s, &why) == -1)
		px_cfg_error(e, n, "url=\"%s\": %s", s->url, why);
	px_attr_duration(e, n, "timeout", false, 1, 3600 * 1000,
	    &s->timeout_ms);
	u = s->max_connections;
	if (px_attr_uint(e, n, "max-connections", 1, 1024, &u) == 0)
		s->max_connections = (unsigned)u;
	if ((v = px_attr(n, "preview")) != NULL) {
		if (strcmp(v, "no") == 0)
			s->no_preview = true;
		else if (strcmp(v, "yes") != 0)
			px_cfg_error(e, n, "preview=\"%s\": expected yes or no",
			    v);
		xmlFree(v);
	}
	if ((v = px_attr(n, "on-error")) != NULL) {
		if (strcmp(v, "allow") == 0)
			s->on_error_allow = true;
		else if (strcmp(v, "block") != 0)
			px_cfg_error(e, n, "on-error=\"%s\": expected block or "
			    "allow", v);
		xmlFree(v);
	}
}

int
px_scanners_load(struct px_scanners *sc, const xmlNode *n,
    struct px_cfgerr *e)
{
	unsigned before = e->count;
	const xmlNode *c;
	const char *why;
	size_t k = 0, i;

	if (n == NULL)
		return 0;
	if ((sc->spool_dir = px_attr(n, "spool")) != NULL &&
	    !px_spool_dir_ok(sc->spool_dir, &why))
		px_cfg_error(e, n, "spool=\"%s\": %s", sc->spool_dir, why);
	for (c = n->children; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE)
			k++;
	if (k > PX_SCANNERS_MAX) {
		px_cfg_error(e, n, "%zu scanners: at most %d", k,
		    PX_SCANNERS_MAX);
		return -1;
	}
	if (k == 0 || (sc->v = calloc(k, sizeof(*sc->v))) == NULL)
		return k == 0 ? 0 : -1;
	for (c = n->children; c != NULL; c = c->next) {
		if (c->type != XML_ELEMENT_NODE)
			continue;
		px_scanner_load(&sc->v[sc->n], c, e);
		for (i = 0; i < sc->n && sc->v[sc->n].name != NULL; i++)
			if (sc->v[i].name != NULL &&
			    strcmp(sc->v[i].name, sc->v[sc->n].name) == 0)
				px_cfg_error(e, c, "scanner \"%s\" is defined "
				    "twice", sc->v[i].name);
		sc->n++;
	}
	return e->count == before ? 0 : -1;
}

void
px_scanners_free(struct px_scanners *sc)
{
	size_t i;

	for (i = 0; i < sc->n; i++) {
		xmlFree(sc->v[i].name);
		xmlFree(sc->v[i].url);
	}
	free(sc->v);
	xmlFree(sc->spool_dir);
	sc->spool_dir = NULL;
	sc->v = NULL;
	sc->n = 0;
}

const struct px_scanner *
px_scanner_find(const struct px_scanners *sc, const char *name)
{
	size_t i;

	for (i = 0; i < sc->n; i++)
		if (sc->v[i].name != NULL && strcmp(sc->v[i].name, name) == 0)
			return &sc->v[i];
	return NULL;
}

int
px_scan_policy_load(struct px_scan_policy *p, const xmlNode *n,
    const struct px_scanners *sc, struct px_cfgerr *e)
{
	unsigned before = e->count;
	char *v;

	memset(p, 0, sizeof(*p));
	if (n == NULL)
		return 0;
	p->direction = PX_SCAN_UPLOAD | PX_SCAN_DOWNLOAD;
	p->max_size = 100ULL << 20;
	p->spool_dir = sc->spool_dir != NULL ? sc->spool_dir :
	    PX_SPOOL_DIR_DEFAULT;
	if ((v = px_attr(n, "scanner")) != NULL) {
		if ((p->scanner = px_scanner_find(sc, v)) == NULL)
			px_cfg_error(e, n, "scanner=\"%s\": no such scanner in "
			    "the daemon file's <scanners>", v);
		xmlFree(v);
	}
	if ((v = px_attr(n, "direction")) != NULL) {
		if (strcmp(v, "upload") == 0)
			p->direction = PX_SCAN_UPLOAD;
		else if (strcmp(v, "download") == 0)
			p->direction = PX_SCAN_DOWNLOAD;
		else if (strcmp(v, "both") != 0)
			px_cfg_error(e, n, "direction=\"%s\": expected both, "
			    "upload or download", v);
		xmlFree(v);
	}
	if ((v = px_attr(n, "deliver")) != NULL) {
		if (strcmp(v, "tail") == 0)
			p->deliver_tail = true;
		else if (strcmp(v, "after-verdict") != 0)
			px_cfg_error(e, n, "deliver=\"%s\": expected "
			    "after-verdict or tail", v);
		xmlFree(v);
	}
	px_attr_size(e, n, "max-size", 1, 1ULL << 40, &p->max_size);
	if ((v = px_attr(n, "over-size")) != NULL) {
		if (strcmp(v, "allow") == 0)
			p->over_size_allow = true;
		else if (strcmp(v, "block") != 0)
			px_cfg_error(e, n, "over-size=\"%s\": expected block "
			    "or allow", v);
		xmlFree(v);
	}
	if ((v = px_attr(n, "partial")) != NULL) {
		if (strcmp(v, "allow") == 0)
			p->partial_allow = true;
		else if (strcmp(v, "refuse") != 0)
			px_cfg_error(e, n, "partial=\"%s\": expected refuse "
			    "or allow", v);
		xmlFree(v);
	}
	px_who_set_load(&p->who, n, n->parent, e);
	return e->count == before ? 0 : -1;
}

void
px_scan_policy_free(struct px_scan_policy *p)
{
	px_who_set_free(&p->who);
	px_content_policy_free(&p->content);
}

bool
px_scan_on(const struct px_scan_policy *p, unsigned bit,
    const struct px_content_who *who)
{
	return p->scanner != NULL && (p->direction & bit) != 0 &&
	    px_who_set_match(&p->who, who);
}

int
px_scan_audit_load(struct px_scan_policy *p, const xmlNode *n,
    struct px_cfgerr *e)
{
	p->audit = true;
	p->audit_min_size = 1;
	return px_attr_size(e, n, "min-size", 0, 1ULL << 50,
	    &p->audit_min_size);
}

/* ---- counters -------------------------------------------------------- */

/* One row per (service, scanner, verdict) seen: a few dozen at most, so a
 * list under a lock, touched once per scanned body. Names are copied:
 * the configuration they came from may be gone by the scrape. */
struct px_scan_row {
	char		 service[72];
	char		 scanner[72];
	char		 verdict[24];
	uint64_t	 n;
};

#define PX_SCAN_ROWS	512

static pthread_mutex_t px_scan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct px_scan_row px_scan_rows[PX_SCAN_ROWS];
static size_t px_scan_nrows;

void
px_scan_count(const char *service, const char *scanner, const char *verdict)
{
	size_t i;

	pthread_mutex_lock(&px_scan_lock);
	for (i = 0; i < px_scan_nrows; i++)
		if (strcmp(px_scan_rows[i].service, service) == 0 &&
		    strcmp(px_scan_rows[i].scanner, scanner) == 0 &&
		    strcmp(px_scan_rows[i].verdict, verdict) == 0)
			break;
	if (i == px_scan_nrows && i < PX_SCAN_ROWS) {
		snprintf(px_scan_rows[i].service, sizeof(px_scan_rows[i].service),
		    "%s", service);
		snprintf(px_scan_rows[i].scanner, sizeof(px_scan_rows[i].scanner),
		    "%s", scanner);
		snprintf(px_scan_rows[i].verdict, sizeof(px_scan_rows[i].verdict),
		    "%s", verdict);
		px_scan_nrows++;
	}
	if (i < PX_SCAN_ROWS)
		px_scan_rows[i].n++;
	pthread_mutex_unlock(&px_scan_lock);
}

void
px_scan_metrics(struct evbuffer *b)
{
	size_t i;

	evbuffer_add_printf(b, "# HELP proxyd_scan_total Bodies handed to a "
	    "scanner (or refused unscanned), by verdict.\n"
	    "# TYPE proxyd_scan_total counter\n");
	pthread_mutex_lock(&px_scan_lock);
	for (i = 0; i < px_scan_nrows; i++)
		evbuffer_add_printf(b, "proxyd_scan_total{service=\"%s\","
		    "scanner=\"%s\",verdict=\"%s\"} %llu\n",
		    px_scan_rows[i].service, px_scan_rows[i].scanner,
		    px_scan_rows[i].verdict,
		    (unsigned long long)px_scan_rows[i].n);
	pthread_mutex_unlock(&px_scan_lock);
}
