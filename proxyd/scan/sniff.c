/* <content> rules (user= and group= judged against the transfer's
 * identity) and the libmagic judge (sniff.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <libxml/tree.h>
#include <magic.h>

#include "cfgread.h"
#include "sniff.h"

#define PX_CONTENT_RULES_MAX	256
#define PX_CONTENT_TYPES_MAX	64

/* RFC 6838 4.2 restricted-name characters. */
static bool
px_mime_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || strchr("!#$&-^_.+", c) != NULL;
}

/* "major/minor", or "major/" and a star, into t. 0, or -1 with *why. */
static int
px_content_type_parse(const char *s, size_t len, struct px_content_type *t,
    const char **why)
{
	const char *slash = memchr(s, '/', len);
	size_t i;

	if (slash == NULL || slash == s || slash == s + len - 1) {
		*why = "expected TYPE/SUBTYPE or TYPE/*";
		return -1;
	}
	if (len >= sizeof(t->name)) {
		*why = "too long";
		return -1;
	}
	t->prefix = slash + 2 == s + len && slash[1] == '*';
	for (i = 0; i < len; i++)
		if (s + i != slash && !(t->prefix && s + i == slash + 1) &&
		    !px_mime_char(s[i])) {
			*why = "a character a MIME type does not have";
			return -1;
		}
	/* The prefix form keeps "major/" and matches by it. */
	len = t->prefix ? len - 1 : len;
	memcpy(t->name, s, len);
	t->name[len] = '\0';
	return 0;
}

/* user= or group= of a <content> or <scan>: words, "*" for anyone
 * proven. */
static void
px_who_words(struct px_who_set *w, const xmlNode *n, const char *attr,
    char ***out, size_t *nout, struct px_cfgerr *e)
{
	char *v = px_attr(n, attr), **grown;
	const char *p;
	size_t len;

	if (v == NULL)
		return;
	for (p = v; *(p += strspn(p, " \t\r\n")) != '\0'; p += len) {
		len = strcspn(p, " \t\r\n");
		if (len == 1 && *p == '*') {
			w->any = true;
			continue;
		}
		if ((grown = realloc(*out, (*nout + 1) *
		    sizeof(*grown))) == NULL ||
		    (grown[*nout] = strndup(p, len)) == NULL) {
			if (grown != NULL)
				*out = grown;
			px_cfg_error(e, n, "out of memory");
			break;
		}
		*out = grown;
		(*nout)++;
	}
	if (*nout == 0 && !w->any)
		px_cfg_error(e, n, "<%s %s=\"\">: empty list",
		    (const char *)n->name, attr);
	xmlFree(v);
}

bool
px_who_set_match(const struct px_who_set *w, const struct px_content_who *who)
{
	size_t i;

	if (w->nusers == 0 && w->ngroups == 0 && !w->any)
		return true;
	if (who == NULL)
		return false;
	if (w->any)
		return true;
	for (i = 0; i < w->nusers; i++)
		if (strcmp(w->users[i], who->user) == 0)
			return true;
	for (i = 0; i < w->ngroups; i++)
		if (who->in_group != NULL && who->in_group(who->arg,
		    w->groups[i]))
			return true;
	return false;
}

/* Whether service says who its users are: <auth>, or a client
 * certificate that names them (<tls identity=>). */
static bool
px_content_service_who(const xmlNode *service)
{
	const xmlNode *c;
	xmlChar *id;
	bool yes = false;

	for (c = service->children; c != NULL && !yes; c = c->next) {
		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (xmlStrcmp(c->name, (const xmlChar *)"auth") == 0)
			yes = true;
		else if (xmlStrcmp(c->name, (const xmlChar *)"tls") == 0 &&
		    (id = xmlGetProp(c, (const xmlChar *)"identity")) != NULL) {
			yes = xmlStrcmp(id, (const xmlChar *)"none") != 0;
			xmlFree(id);
		}
	}
	return yes;
}

int
px_who_set_load(struct px_who_set *w, const xmlNode *n,
    const xmlNode *service, struct px_cfgerr *e)
{
	unsigned before = e->count;

	px_who_words(w, n, "user", &w->users, &w->nusers, e);
	px_who_words(w, n, "group", &w->groups, &w->ngroups, e);
	if ((xmlHasProp(n, (const xmlChar *)"user") ||
	    xmlHasProp(n, (const xmlChar *)"group")) &&
	    !px_content_service_who(service))
		px_cfg_error(e, n, "<%s> user=/group=: the service has no "
		    "<auth> nor <tls identity=> to say who its users are",
		    (const char *)n->name);
	return e->count == before ? 0 : -1;
}

void
px_who_set_free(struct px_who_set *w)
{
	size_t k;

	for (k = 0; k < w->nusers; k++)
		free(w->users[k]);
	for (k = 0; k < w->ngroups; k++)
		free(w->groups[k]);
	free(w->users);
	free(w->groups);
	memset(w, 0, sizeof(*w));
}

static void
px_content_rule_load(struct px_content_rule *r, const xmlNode *n,
    const char *file, struct px_cfgerr *e)
{
	char *types = px_attr(n, "type"), *act = px_attr(n, "action");
	const char *p, *why;
	size_t len, tokens = 0;

	snprintf(r->ref, sizeof(r->ref), "%s:%ld", file != NULL ? file : "?",
	    px_xml_line(n));
	if (act == NULL || (strcmp(act, "deny") != 0 &&
	    strcmp(act, "accept") != 0))
		px_cfg_error(e, n, "<content action=\"%s\">: expected accept or "
		    "deny", act != NULL ? act : "");
	else
		r->deny = strcmp(act, "deny") == 0;
	if (types != NULL && (r->types = calloc(PX_CONTENT_TYPES_MAX,
	    sizeof(*r->types))) != NULL)
		for (p = types; *(p += strspn(p, " \t\r\n")) != '\0'; p += len) {
			len = strcspn(p, " \t\r\n");
			tokens++;
			if (r->ntypes == PX_CONTENT_TYPES_MAX) {
				px_cfg_error(e, n, "<content>: at most %d types",
				    PX_CONTENT_TYPES_MAX);
				break;
			}
			if (px_content_type_parse(p, len,
			    &r->types[r->ntypes], &why) == -1)
				px_cfg_error(e, n, "<content type=\"%.*s\">: %s",
				    (int)len, p, why);
			else
				r->ntypes++;
		}
	if (tokens == 0)
		px_cfg_error(e, n, "<content> needs type=\"TYPE/SUBTYPE ...\"");
	xmlFree(types);
	xmlFree(act);
}

int
px_content_policy_load(struct px_content_policy *p, const xmlNode *service,
    const char *file, struct px_cfgerr *e)
{
	unsigned before = e->count;
	const xmlNode *c;
	size_t k = 0;

	memset(p, 0, sizeof(*p));
	for (c = service->children; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE &&
		    xmlStrcmp(c->name, (const xmlChar *)"content") == 0)
			k++;
	if (k == 0)
		return 0;
	if (k > PX_CONTENT_RULES_MAX) {
		px_cfg_error(e, service, "%zu <content> rules: at most %d", k,
		    PX_CONTENT_RULES_MAX);
		return -1;
	}
	if ((p->v = calloc(k, sizeof(*p->v))) == NULL) {
		px_cfg_error(e, service, "out of memory");
		return -1;
	}
	for (c = service->children; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE &&
		    xmlStrcmp(c->name, (const xmlChar *)"content") == 0) {
			px_content_rule_load(&p->v[p->n], c, file, e);
			px_who_set_load(&p->v[p->n++].who, c, service, e);
		}
	return e->count == before ? 0 : -1;
}

void
px_content_policy_free(struct px_content_policy *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		free(p->v[i].types);
		px_who_set_free(&p->v[i].who);
	}
	free(p->v);
	p->v = NULL;
	p->n = 0;
}

static bool
px_content_type_match(const struct px_content_type *t, const char *mime)
{
	if (t->prefix)
		return strncasecmp(mime, t->name, strlen(t->name)) == 0;
	return strcasecmp(mime, t->name) == 0;
}

const struct px_content_rule *
px_content_match(const struct px_content_policy *p, const char *mime)
{
	return px_content_match_for(p, mime, NULL);
}

const struct px_content_rule *
px_content_match_for(const struct px_content_policy *p, const char *mime,
    const struct px_content_who *who)
{
	size_t i, j;

	for (i = 0; i < p->n; i++)
		for (j = 0; px_who_set_match(&p->v[i].who, who) &&
		    j < p->v[i].ntypes; j++)
			if (px_content_type_match(&p->v[i].types[j], mime))
				return &p->v[i];
	return NULL;
}

/* ---- the judge --------------------------------------------------------- */

/* This thread's cookie: libmagic keeps per-cookie state while it works,
 * so each worker has its own, loaded at its first judged transfer
 * (the compiled database, /usr/share/misc/magic.mgc, read once). */
static _Thread_local magic_t px_magic;
static _Thread_local bool px_magic_tried;

static magic_t
px_magic_get(const char **why)
{
	if (px_magic != NULL || px_magic_tried) {
		*why = "libmagic did not load";
		return px_magic;
	}
	px_magic_tried = true;
	/* Types only, no decompression (the default), no following of
	 * anything: the bytes given are all it reads. */
	if ((px_magic = magic_open(MAGIC_MIME_TYPE | MAGIC_ERROR)) == NULL) {
		*why = "magic_open failed";
		return NULL;
	}
	if (magic_load(px_magic, NULL) == -1) {
		*why = "magic_load failed (no magic database?)";
		magic_close(px_magic);
		px_magic = NULL;
	}
	return px_magic;
}

void
px_content_judge(const struct px_content_policy *p, const void *buf,
    size_t n, struct px_content_verdict *v)
{
	px_content_judge_for(p, NULL, buf, n, v);
}

void
px_content_judge_for(const struct px_content_policy *p,
    const struct px_content_who *who, const void *buf, size_t n,
    struct px_content_verdict *v)
{
	const char *why = "", *mime = NULL;
	magic_t m = px_magic_get(&why);

	memset(v, 0, sizeof(*v));
	if (m != NULL && (mime = magic_buffer(m, buf, n)) == NULL)
		why = magic_error(m) != NULL ? magic_error(m) : "magic_buffer "
		    "failed";
	if (mime == NULL) {
		/* A policy that cannot be applied refuses: fail closed. */
		v->deny = true;
		snprintf(v->type, sizeof(v->type), "unknown");
		snprintf(v->error, sizeof(v->error), "%s", why);
		return;
	}
	snprintf(v->type, sizeof(v->type), "%s", mime);
	if ((v->rule = px_content_match_for(p, v->type, who)) != NULL)
		v->deny = v->rule->deny;
}

bool
px_sniff_add(struct px_sniff *sn, struct evbuffer *src, size_t n,
    size_t want)
{
	size_t missing;
	ev_ssize_t got;

	if (want > sizeof(sn->buf))
		want = sizeof(sn->buf);
	missing = want > sn->n ? want - sn->n : 0;
	if (missing > n)
		missing = n;
	if (missing > 0 && (got = evbuffer_copyout(src, sn->buf + sn->n,
	    missing)) > 0)
		sn->n += (size_t)got;
	return sn->n >= want;
}

void
px_sniff_worker_exit(void)
{
	if (px_magic != NULL)
		magic_close(px_magic);
	px_magic = NULL;
	px_magic_tried = false;
}

/* ---- counters ---------------------------------------------------------- */

/* As scan.c's: a few rows per service, under a lock, once per transfer. */
struct px_content_row {
	char		 service[72];
	char		 action[8];
	unsigned long long n;
};

#define PX_CONTENT_ROWS	256

static pthread_mutex_t px_content_lock = PTHREAD_MUTEX_INITIALIZER;
static struct px_content_row px_content_rows[PX_CONTENT_ROWS];
static size_t px_content_nrows;

void
px_content_count(const char *service, const char *action)
{
	size_t i;

	pthread_mutex_lock(&px_content_lock);
	for (i = 0; i < px_content_nrows; i++)
		if (strcmp(px_content_rows[i].service, service) == 0 &&
		    strcmp(px_content_rows[i].action, action) == 0)
			break;
	if (i == px_content_nrows && i < PX_CONTENT_ROWS) {
		snprintf(px_content_rows[i].service,
		    sizeof(px_content_rows[i].service), "%s", service);
		snprintf(px_content_rows[i].action,
		    sizeof(px_content_rows[i].action), "%s", action);
		px_content_nrows++;
	}
	if (i < PX_CONTENT_ROWS)
		px_content_rows[i].n++;
	pthread_mutex_unlock(&px_content_lock);
}

void
px_content_metrics(struct evbuffer *b)
{
	size_t i;

	evbuffer_add_printf(b, "# HELP proxyd_content_total Transfers judged "
	    "by their sniffed content type (<content>), by action.\n"
	    "# TYPE proxyd_content_total counter\n");
	pthread_mutex_lock(&px_content_lock);
	for (i = 0; i < px_content_nrows; i++)
		evbuffer_add_printf(b, "proxyd_content_total{service=\"%s\","
		    "action=\"%s\"} %llu\n", px_content_rows[i].service,
		    px_content_rows[i].action, px_content_rows[i].n);
	pthread_mutex_unlock(&px_content_lock);
}
