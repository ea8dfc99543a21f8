/* Loading conf/proxyd.xml and policy files: libxml2 parse (no network, no
 * DTD, no entity expansion), RelaxNG validation against the schemas compiled
 * into the binary, then range checks, copying every value into plain C
 * structs so nothing keeps the XML tree alive. Here: the XML reading, the
 * element helpers, the daemon file, the policies directory (one service
 * file each, loaded by config_service.c), the checks across services and
 * the listen groups, the reference count. */
#include "config.h"
#include "config_int.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/relaxng.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#include "analyser.h"
#include "directive.h"
#include "privs.h"
#include "rules.h"
#include "tls.h"

extern const char px_schema_proxyd_rng[];

#define PX_MAX_WORKERS		256
#define PX_MAX_SESSIONS		1000000
#define PX_MAX_SERVICES		4096
/* A policy (or the daemon file) past this is a mistake; libxml2 would
 * hold several times its size while parsing. */
#define PX_CONFIG_FILE_MAX	(16 << 20)

/* libxml2 reports parse and validation problems here. */
static void
px_xml_error(void *ctx, xmlErrorPtr xe)
{
	struct px_cfgerr *e = ctx;
	long line;

	if (xe == NULL || xe->level == XML_ERR_WARNING)
		return;
	/* The validator's line for a node comes from xmlGetLineNo, one
	 * late past 65535: ask the node (px_xml_line). */
	line = xe->node != NULL ? px_xml_line(xe->node) : xe->line;
	px_cfg_error_line(e, e->file, line, "%s", xe->message ?
	    xe->message : "XML error");
}

const char *
px_mode_name(enum px_mode m)
{
	switch (m) {
	case PX_MODE_FIXED: return "fixed";
	case PX_MODE_TRANSPARENT: return "transparent";
	case PX_MODE_REDIRECT: return "redirect";
	case PX_MODE_FORWARD: return "forward";
	}
	return "?";
}

/* ---- schema ---------------------------------------------------------- */

static xmlRelaxNGPtr
px_schema_compile(const char *text)
{
	xmlRelaxNGParserCtxtPtr pc;
	xmlRelaxNGPtr rng;

	if (text == NULL)
		return NULL;
	pc = xmlRelaxNGNewMemParserCtxt(text, (int)strlen(text));
	if (pc == NULL)
		return NULL;
	rng = xmlRelaxNGParse(pc);
	xmlRelaxNGFreeParserCtxt(pc);
	return rng;
}

/* libxml2 keeps no line for a DTD node; find it in the text. */
static long
px_doctype_line(const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[512];
	long line = 1;

	if (f == NULL)
		return 1;
	while (fgets(buf, sizeof(buf), f) != NULL) {
		if (strstr(buf, "<!DOCTYPE") != NULL)
			break;
		if (strchr(buf, '\n') != NULL)
			line++;
	}
	fclose(f);
	return line;
}

/* libxml2 2.9 gives some validation errors no node: an element that
 * lacks a required attribute but has an optional one ("Element listen
 * failed to validate attributes" at line 0). Such an error is kept
 * (its code and element name) and placed once the validation is over. */
#define PX_RNG_LOST_MAX	4

struct px_rng_errs {
	struct px_cfgerr	*e;
	unsigned		 nlost;
	struct {
		int	 code;
		char	*name;
		char	*msg;
	}			 lost[PX_RNG_LOST_MAX];
	bool			 found;		/* a trial's run saw the error */
	int			 want_code;
	const char		*want_name;
};

static void
px_rng_error(void *ctx, xmlErrorPtr xe)
{
	struct px_rng_errs *r = ctx;

	if (xe == NULL || xe->level == XML_ERR_WARNING)
		return;
	if (xe->node != NULL || xe->line != 0 || xe->str1 == NULL ||
	    r->nlost == PX_RNG_LOST_MAX) {
		px_xml_error(r->e, xe);
		return;
	}
	r->lost[r->nlost].code = xe->code;
	r->lost[r->nlost].name = strdup(xe->str1);
	r->lost[r->nlost].msg = strdup(xe->message ? xe->message :
	    "XML error");
	r->nlost++;
}

/* A trial's validation: only notes whether the lost error came again. */
static void
px_rng_trial_error(void *ctx, xmlErrorPtr xe)
{
	struct px_rng_errs *r = ctx;

	if (xe != NULL && xe->level != XML_ERR_WARNING &&
	    xe->code == r->want_code && xe->str1 != NULL &&
	    strcmp(xe->str1, r->want_name) == 0)
		r->found = true;
}

/* The element after n in document order, its children first. */
static xmlNodePtr
px_xml_next_elem(xmlNodePtr n)
{
	xmlNodePtr c;

	for (c = n->children; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE)
			return c;
	for (; n != NULL && n->type == XML_ELEMENT_NODE; n = n->parent)
		for (c = n->next; c != NULL; c = c->next)
			if (c->type == XML_ELEMENT_NODE)
				return c;
	return NULL;
}

/* The k-th element named name in document order (from 0), or NULL. */
static xmlNodePtr
px_xml_nth_named(xmlDocPtr doc, const char *name, size_t k)
{
	xmlNodePtr n;

	for (n = xmlDocGetRootElement(doc); n != NULL; n = px_xml_next_elem(n))
		if (xmlStrcmp(n->name, (const xmlChar *)name) == 0 && k-- == 0)
			return n;
	return NULL;
}

/* Whether a copy of doc cut right after the k-th element named as the
 * lost error says (its own content kept) fails the same way. */
static bool
px_rng_trial(struct px_rng_errs *r, xmlDocPtr doc, xmlRelaxNGPtr rng,
    size_t k)
{
	xmlDocPtr copy;
	xmlNodePtr n, next;
	xmlRelaxNGValidCtxtPtr vc;

	if ((copy = xmlCopyDoc(doc, 1)) == NULL)
		return false;
	for (n = px_xml_nth_named(copy, r->want_name, k);
	    n != NULL && n->type == XML_ELEMENT_NODE; n = n->parent)
		while ((next = n->next) != NULL) {
			xmlUnlinkNode(next);
			xmlFreeNode(next);
		}
	r->found = false;
	if ((vc = xmlRelaxNGNewValidCtxt(rng)) != NULL) {
		xmlRelaxNGSetValidStructuredErrors(vc, px_rng_trial_error, r);
		(void)xmlRelaxNGValidateDoc(vc, copy);
		xmlRelaxNGFreeValidCtxt(vc);
	}
	xmlFreeDoc(copy);
	return r->found;
}

/* The line of the element a lost error is about: the first element of
 * that name whose trial fails (once one does, every later one does, so
 * a bisection: a policy may have thousands of <url>). 0 if none. */
static long
px_rng_locate(struct px_rng_errs *r, xmlDocPtr doc, xmlRelaxNGPtr rng,
    int code, const char *name)
{
	xmlNodePtr n;
	size_t count = 0, lo = 0, hi, mid;

	r->want_code = code;
	r->want_name = name;
	for (n = xmlDocGetRootElement(doc); n != NULL; n = px_xml_next_elem(n))
		if (xmlStrcmp(n->name, (const xmlChar *)name) == 0)
			count++;
	if (count == 0 || !px_rng_trial(r, doc, rng, count - 1))
		return 0;
	for (hi = count - 1; lo < hi; ) {
		mid = lo + (hi - lo) / 2;
		if (px_rng_trial(r, doc, rng, mid))
			hi = mid;
		else
			lo = mid + 1;
	}
	return px_xml_line(px_xml_nth_named(doc, name, lo));
}

/* Parses one file and validates it. Returns NULL after reporting. */
/* Before libxml2 sees it: a file that is too big to be a policy, or
 * not text at all, gets a line that says so ("Document is empty" or
 * "Start tag expected" would not). 0, or -1 after reporting. */
static int
px_xml_precheck(const char *path, struct px_cfgerr *e)
{
	unsigned char buf[4096];
	struct stat st;
	size_t n, i;
	FILE *f;

	if ((f = fopen(path, "rb")) == NULL) {
		px_cfg_error_line(e, path, 0, "cannot read: %s", strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) == -1 || !S_ISREG(st.st_mode)) {
		px_cfg_error_line(e, path, 0, "not a regular file");
		fclose(f);
		return -1;
	}
	if (st.st_size > PX_CONFIG_FILE_MAX) {
		px_cfg_error_line(e, path, 0, "%lld bytes: over the %d MiB a "
		    "configuration file may have", (long long)st.st_size,
		    PX_CONFIG_FILE_MAX >> 20);
		fclose(f);
		return -1;
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	for (i = 0; i < n; i++)
		if (buf[i] == '\0') {
			px_cfg_error_line(e, path, 0, "not a text file (a NUL "
			    "byte at offset %zu): expected XML", i);
			return -1;
		}
	if (n == 0) {
		px_cfg_error_line(e, path, 0, "empty file: expected XML");
		return -1;
	}
	return 0;
}

static xmlDocPtr
px_xml_load(const char *path, const char *schema_text, struct px_cfgerr *e)
{
	xmlParserCtxtPtr pc;
	xmlRelaxNGPtr rng = NULL;
	xmlRelaxNGValidCtxtPtr vc = NULL;
	xmlDocPtr doc;
	struct px_rng_errs rerr = { .e = e };
	unsigned before = e->count, i;

	e->file = path;
	if (px_xml_precheck(path, e) == -1)
		return NULL;
	pc = xmlNewParserCtxt();
	if (pc == NULL) {
		px_cfg_error_line(e, path, 0, "out of memory");
		return NULL;
	}
	xmlSetStructuredErrorFunc(e, px_xml_error);
	/* No XML_PARSE_NOENT: entities are never substituted; NONET: no
	 * fetches. A DOCTYPE is refused below, so no entity can be declared. */
	doc = xmlCtxtReadFile(pc, path, NULL, XML_PARSE_NONET |
	    XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_BIG_LINES);
	xmlFreeParserCtxt(pc);
	if (doc == NULL) {
		if (e->count == before) {
			int err = errno;

			px_cfg_error_line(e, path, 0, "cannot read: %s",
			    err ? strerror(err) : "parse failed");
		}
		goto out;
	}
	if (doc->intSubset != NULL || doc->extSubset != NULL) {
		px_cfg_error_line(e, path, px_doctype_line(path),
		    "DOCTYPE declarations are not allowed");
		goto fail;
	}
	if ((rng = px_schema_compile(schema_text)) == NULL ||
	    (vc = xmlRelaxNGNewValidCtxt(rng)) == NULL) {
		px_cfg_error_line(e, path, 0, "internal error: schema does not compile");
		goto fail;
	}
	xmlRelaxNGSetValidStructuredErrors(vc, px_rng_error, &rerr);
	if (xmlRelaxNGValidateDoc(vc, doc) != 0) {
		for (i = 0; i < rerr.nlost; i++)
			px_cfg_error_line(e, path, rerr.lost[i].name == NULL ? 0 :
			    px_rng_locate(&rerr, doc, rng, rerr.lost[i].code,
			    rerr.lost[i].name), "%s", rerr.lost[i].msg != NULL ?
			    rerr.lost[i].msg : "XML error");
		if (e->count == before)
			px_cfg_error_line(e, path, 0, "does not match the schema");
		goto fail;
	}
	goto out;
fail:
	xmlFreeDoc(doc);
	doc = NULL;
out:
	for (i = 0; i < rerr.nlost; i++) {
		free(rerr.lost[i].name);
		free(rerr.lost[i].msg);
	}
	if (vc != NULL)
		xmlRelaxNGFreeValidCtxt(vc);
	if (rng != NULL)
		xmlRelaxNGFree(rng);
	xmlSetStructuredErrorFunc(NULL, NULL);
	return doc;
}

/* ---- attribute helpers: each returns 0, or -1 after reporting -------- */

xmlNodePtr
px_child(xmlNodePtr parent, const char *name)
{
	xmlNodePtr n;

	for (n = parent->children; n != NULL; n = n->next)
		if (n->type == XML_ELEMENT_NODE &&
		    xmlStrcmp(n->name, (const xmlChar *)name) == 0)
			return n;
	return NULL;
}

/* The schema allows each child any number of times (for its clearer
 * messages); a repeat is almost always a merge mistake, so refuse it. */
/* Two elements that may not both be there: the same name, and for <tls>
 * the same side (one per side). */
static bool
px_same_element(const xmlNode *a, const xmlNode *b)
{
	xmlChar *sa, *sb;
	bool same;

	if (xmlStrcmp(a->name, b->name) != 0 ||
	    xmlStrcmp(a->name, (const xmlChar *)"content") == 0 ||
	    xmlStrcmp(a->name, (const xmlChar *)"fingerprint") == 0)
		return false;
	if (xmlStrcmp(a->name, (const xmlChar *)"tls") != 0)
		return true;
	sa = xmlGetProp((xmlNode *)a, (const xmlChar *)"side");
	sb = xmlGetProp((xmlNode *)b, (const xmlChar *)"side");
	same = xmlStrcmp(sa, sb) == 0;
	xmlFree(sa);
	xmlFree(sb);
	return same;
}

void
px_check_repeats(xmlNodePtr parent, struct px_cfgerr *e)
{
	xmlNodePtr n, m;

	for (n = parent->children; n != NULL; n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		for (m = parent->children; m != n; m = m->next)
			if (m->type == XML_ELEMENT_NODE &&
			    px_same_element(m, n)) {
				px_cfg_error(e, n, "<%s> given twice (first at line %ld)",
				    (const char *)n->name, px_xml_line(m));
				break;
			}
	}
}

/* address + port attributes of one element. */
int
px_attr_endpoint(struct px_cfgerr *e, xmlNodePtr n,
    struct sockaddr_storage *ss, socklen_t *len)
{
	char *addr = px_attr(n, "address");
	uint64_t port = 0;
	const char *why;
	int rc = -1;

	if (addr == NULL) {
		px_cfg_error(e, n, "<%s> needs an address", (const char *)n->name);
		return -1;
	}
	if (px_attr_uint(e, n, "port", 1, 65535, &port) == -1)
		goto out;
	if (port == 0) {
		px_cfg_error(e, n, "<%s> needs a port", (const char *)n->name);
		goto out;
	}
	if (px_parse_ip(addr, (uint16_t)port, ss, len, &why) == -1) {
		px_cfg_error(e, n, "address=\"%s\": %s", addr, why);
		goto out;
	}
	rc = 0;
out:
	xmlFree(addr);
	return rc;
}

bool
px_valid_name(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	for (i = 0; i < n; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.'))
			return false;
	}
	return true;
}

/* ---- daemon file ------------------------------------------------------ */

static char *
px_path_relative_to(const char *file, const char *rel)
{
	char *copy, *dir, *out;

	if (rel[0] == '/')
		return strdup(rel);
	if ((copy = strdup(file)) == NULL)
		return NULL;
	dir = dirname(copy);
	if (asprintf(&out, "%s/%s", dir, rel) == -1)
		out = NULL;
	free(copy);
	return out;
}

static const char *const px_log_formats[] = { "kv", "json", NULL };
static const char *const px_log_levels[] = { "error", "warning", "info",
    "debug", NULL };
static const int px_log_level_values[] = { LOG_ERR, LOG_WARNING, LOG_INFO,
    LOG_DEBUG };

static const char *const px_store_errors[] = { "refuse", "local", NULL };
static const int px_store_error_values[] = { 1, 0 };

/* The daemon file's plain attributes (docs/CONFIG.md, "Daemon file"). */
const struct px_directive px_daemon_directives[] = {
	{ "limits", "max-sessions", PX_D_UINT, "10000", 1, PX_MAX_SESSIONS,
	    NULL, NULL, PX_FIELD(struct px_config, max_sessions) },
	{ "limits", "connect-timeout", PX_D_DURATION, "10s", 1, 3600 * 1000,
	    NULL, NULL, PX_FIELD(struct px_config, connect_timeout_ms) },
	{ "limits", "idle-timeout", PX_D_DURATION_OFF, "5m", 1,
	    30ULL * 86400 * 1000, NULL, NULL,
	    PX_FIELD(struct px_config, idle_timeout_ms) },
	{ "limits", "buffer", PX_D_SIZE, "256k", 4096, 64ULL << 20,
	    NULL, NULL, PX_FIELD(struct px_config, buffer) },
	{ "limits", "session-bandwidth", PX_D_SIZE, "0", 0, 1ULL << 30,
	    NULL, NULL, PX_FIELD(struct px_config, session_bandwidth) },
	{ "limits", "global-bandwidth", PX_D_SIZE, "0", 0, 100ULL << 30,
	    NULL, NULL, PX_FIELD(struct px_config, global_bandwidth) },
	{ "limits", "shutdown-grace", PX_D_DURATION, "30s", 0, 3600 * 1000,
	    NULL, NULL, PX_FIELD(struct px_config, shutdown_grace_ms) },
	{ "log", "format", PX_D_CHOICE, "kv", 0, 0, px_log_formats, NULL,
	    PX_FIELD(struct px_config, log_json) },
	{ "log", "level", PX_D_CHOICE, "info", 0, 0, px_log_levels,
	    px_log_level_values, PX_FIELD(struct px_config, log_level) },
	{ "pidfile", "path", PX_D_PATH, NULL, 0, 0, NULL, NULL,
	    PX_FIELD(struct px_config, pidfile) },
	/* Written by keepalived's notify script, read by the admin thread
	 * at scrape time (deploy/ha/). */
	{ "admin", "ha-state-file", PX_D_PATH, NULL, 0, 0, NULL, NULL,
	    PX_FIELD(struct px_config, ha_state_file) },
	/* The quotas' day so far, kept across restarts (quota.h). */
	{ "quotas", "state-file", PX_D_PATH, NULL, 0, 0, NULL, NULL,
	    PX_FIELD(struct px_config, quota_state_file) },
	/* The cluster's shared quota store (quota_store.h) and the
	 * members as the routing engine knows them (admin.c). */
	{ "cluster", "store-timeout", PX_D_DURATION, "1s", 1, 60 * 1000,
	    NULL, NULL, PX_FIELD(struct px_config, store_timeout_ms) },
	{ "cluster", "on-store-error", PX_D_CHOICE, "refuse", 0, 0,
	    px_store_errors, px_store_error_values,
	    PX_FIELD(struct px_config, store_error_refuse) },
	{ "cluster", "members-file", PX_D_PATH, NULL, 0, 0, NULL, NULL,
	    PX_FIELD(struct px_config, members_file) },
	{ "policies", "dir", PX_D_PATH, "../policy/enabled", 0, 0, NULL, NULL,
	    PX_FIELD(struct px_config, policy_dir) },
};
const size_t px_ndaemon_directives =
    sizeof(px_daemon_directives) / sizeof(px_daemon_directives[0]);

/* <workers>: a count or auto, one per online core. */
static void
px_load_workers(struct px_config *c, xmlNodePtr root, struct px_cfgerr *e)
{
	xmlNodePtr n;
	const char *why;
	uint64_t u;
	char *v;

	c->workers = 0;
	if ((n = px_child(root, "workers")) != NULL) {
		v = (char *)xmlNodeGetContent(n);
		if (v != NULL && strcmp(v, "auto") != 0) {
			if (px_parse_uint(v, 1, PX_MAX_WORKERS, &u, &why) == -1)
				px_cfg_error(e, n, "workers \"%s\": expected auto or 1..%d",
				    v, PX_MAX_WORKERS);
			else
				c->workers = (unsigned)u;
		}
		xmlFree(v);
	}
	if (c->workers == 0) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		c->workers = ncpu < 1 ? 1 : ncpu > PX_MAX_WORKERS ?
		    PX_MAX_WORKERS : (unsigned)ncpu;
	}
}

/* log/@target: a name, or file:PATH. */
static void
px_load_log_target(struct px_config *c, xmlNodePtr root, struct px_cfgerr *e)
{
	xmlNodePtr n = px_child(root, "log");
	char *v;

	c->log_target = PX_LOG_STDERR;
	if (n == NULL || (v = px_attr(n, "target")) == NULL)
		return;
	if (strcmp(v, "stderr") == 0)
		c->log_target = PX_LOG_STDERR;
	else if (strcmp(v, "syslog") == 0)
		c->log_target = PX_LOG_SYSLOG;
	else if (strcmp(v, "journal") == 0)
		c->log_target = PX_LOG_JOURNAL;
	else if (strncmp(v, "file:", 5) == 0 && v[5] != '\0') {
		c->log_target = PX_LOG_FILE;
		c->log_file = px_path_relative_to(c->path, v + 5);
	} else
		px_cfg_error(e, n, "target=\"%s\": expected stderr, syslog, journal or file:PATH", v);
	xmlFree(v);
}

/* audit/@target: stderr, syslog or file:PATH. */
static void
px_load_audit_target(struct px_config *c, xmlNodePtr root,
    struct px_cfgerr *e)
{
	xmlNodePtr n = px_child(root, "audit");
	char *v;

	if (n == NULL || (v = px_attr(n, "target")) == NULL)
		return;
	c->audit_on = true;
	if (strcmp(v, "stderr") == 0)
		c->audit_target = PX_LOG_STDERR;
	else if (strcmp(v, "syslog") == 0)
		c->audit_target = PX_LOG_SYSLOG;
	else if (strncmp(v, "file:", 5) == 0 && v[5] != '\0') {
		c->audit_target = PX_LOG_FILE;
		c->audit_file = px_path_relative_to(c->path, v + 5);
	} else {
		c->audit_on = false;
		px_cfg_error(e, n, "target=\"%s\": expected stderr, syslog or "
		    "file:PATH", v);
	}
	xmlFree(v);
}

/* <node name>: this proxyd's name among the nodes of a cluster, on every
 * log line and audit record, in /metrics and the status page. Default:
 * the host name, its first 64 characters, any character a name may not
 * have (px_valid_name) as '-'. */
static void
px_load_node(struct px_config *c, xmlNodePtr root, struct px_cfgerr *e)
{
	xmlNodePtr n = px_child(root, "node");
	char host[256], *v;
	size_t i;

	if (n != NULL && (v = px_attr(n, "name")) != NULL) {
		if (!px_valid_name(v))
			px_cfg_error(e, n, "node name=\"%s\": expected 1..64 "
			    "characters of A-Z a-z 0-9 . _ -", v);
		else
			snprintf(c->node_name, sizeof(c->node_name), "%s", v);
		xmlFree(v);
		return;
	}
	if (gethostname(host, sizeof(host)) == -1 || host[0] == '\0')
		snprintf(host, sizeof(host), "proxyd");
	host[sizeof(host) - 1] = '\0';
	host[PX_NODE_NAME_MAX] = '\0';
	for (i = 0; host[i] != '\0'; i++)
		if (!((host[i] >= 'a' && host[i] <= 'z') ||
		    (host[i] >= 'A' && host[i] <= 'Z') ||
		    (host[i] >= '0' && host[i] <= '9') || host[i] == '-' ||
		    host[i] == '_' || host[i] == '.'))
			host[i] = '-';
	memcpy(c->node_name, host, strlen(host) + 1);
}

static int
px_load_daemon(struct px_config *c, xmlNodePtr root, struct px_cfgerr *e)
{
	xmlNodePtr n;
	char *v;
	const char *why;
	unsigned before = e->count;

	px_check_repeats(root, e);
	px_load_workers(c, root, e);
	px_directives_load(px_daemon_directives, px_ndaemon_directives, c,
	    root, c->path, e);
	px_load_log_target(c, root, e);
	px_load_audit_target(c, root, e);
	px_load_node(c, root, e);

	if ((n = px_child(root, "user")) != NULL)
		px_privs_parse(c, n, e);

	if ((n = px_child(root, "admin")) != NULL &&
	    (v = px_attr(n, "listen")) != NULL) {
		if (px_parse_hostport(v, &c->admin, &c->admin_len, &why) == -1)
			px_cfg_error(e, n, "listen=\"%s\": %s", v, why);
		else if (!px_sockaddr_is_loopback((struct sockaddr *)&c->admin))
			/* The endpoint has no authentication: keep it local. */
			px_cfg_error(e, n, "listen=\"%s\": the admin endpoint must be on a loopback address", v);
		else
			c->admin_enabled = true;
		xmlFree(v);
	}

	/* cluster/@store: where every node counts the quotas (redis). */
	if ((n = px_child(root, "cluster")) != NULL &&
	    (v = px_attr(n, "store")) != NULL) {
		if (px_parse_hostport(v, &c->store, &c->store_len, &why) == -1)
			px_cfg_error(e, n, "store=\"%s\": %s", v, why);
		xmlFree(v);
	}

	if (px_zones_load(&c->zones, px_child(root, "zones"), e) == -1 &&
	    e->count == before)
		px_cfg_error(e, root, "invalid <zones>");
	px_scanners_load(&c->scanners, px_child(root, "scanners"), e);
	px_authns_load(&c->authns, px_child(root, "authenticators"), c->path,
	    e);

	return e->count == before ? 0 : -1;
}


static bool
px_addr_overlap(const struct sockaddr *a, const struct sockaddr *b)
{
	if (px_sockaddr_port(a) != px_sockaddr_port(b))
		return false;
	/* A v6 wildcard also takes v4 unless IPV6_V6ONLY; proxyd sets V6ONLY,
	 * so only the same family can overlap. */
	if (a->sa_family != b->sa_family)
		return false;
	return px_sockaddr_is_wildcard(a) || px_sockaddr_is_wildcard(b) ||
	    px_sockaddr_same_host(a, b);
}

static bool
px_same_listen(const struct px_service *a, const struct px_service *b)
{
	return a->listen_len == b->listen_len &&
	    memcmp(&a->listen, &b->listen, a->listen_len) == 0;
}

/* Transparent and redirect services may share a listen address: the
 * client and server lists pick one per connection. Reports what else
 * must then agree; false for a plain clash. */
static bool
px_may_share(const struct px_service *o, const struct px_service *svc,
    struct px_cfgerr *e)
{
	if (!px_same_listen(o, svc) || o->mode != svc->mode ||
	    (svc->mode != PX_MODE_TRANSPARENT && svc->mode != PX_MODE_REDIRECT))
		return false;
	if (o->origdst_conntrack != svc->origdst_conntrack)
		px_cfg_error_line(e, svc->file, svc->listen_line,
		    "origdst= differs from service \"%s\" (%s:%ld) on the "
		    "same listen address", o->name, o->file, o->listen_line);
	return true;
}

/* One group per listen address, built on the sorted services. */
static void
px_build_groups(struct px_config *c, struct px_cfgerr *e)
{
	size_t i, j;

	if ((c->groups = calloc(c->nservices ? c->nservices : 1,
	    sizeof(*c->groups))) == NULL) {
		px_cfg_error_line(e, c->path, 0, "out of memory");
		return;
	}
	for (i = 0; i < c->nservices; i++) {
		struct px_service *svc = &c->services[i], **ns;
		struct px_group *g = NULL;

		for (j = 0; j < c->ngroups && g == NULL; j++)
			if (px_same_listen(c->groups[j].svc[0], svc))
				g = &c->groups[j];
		if (g == NULL)
			g = &c->groups[c->ngroups++];
		else if (g->n == PX_GROUP_MAX) {
			px_cfg_error_line(e, svc->file, svc->listen_line,
			    "more than %d services on one listen address",
			    PX_GROUP_MAX);
			return;
		}
		if ((ns = realloc(g->svc, (g->n + 1) * sizeof(*ns))) == NULL) {
			px_cfg_error_line(e, c->path, 0, "out of memory");
			return;
		}
		g->svc = ns;
		svc->group = g;
		svc->group_idx = (uint16_t)g->n;
		g->svc[g->n++] = svc;
	}
	for (j = 0; j < c->ngroups; j++) {
		if (px_group_build(&c->groups[j], &c->zones) == -1) {
			px_cfg_error_line(e, c->path, 0, "out of memory");
			return;
		}
		px_group_check(&c->groups[j], &c->zones, e);
	}
}

static int
px_xml_filter(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return d->d_name[0] != '.' && n > 4 &&
	    strcmp(d->d_name + n - 4, ".xml") == 0;
}

static int
px_service_cmp(const void *a, const void *b)
{
	const struct px_service *x = a, *y = b;

	return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

static void
px_load_policies(struct px_config *c, struct px_cfgerr *e)
{
	struct dirent **ents = NULL;
	int i, j, nents;
	unsigned before, start = e->count;

	nents = scandir(c->policy_dir, &ents, px_xml_filter, alphasort);
	if (nents < 0) {
		px_cfg_error_line(e, c->path, 0, "policies dir \"%s\": %s",
		    c->policy_dir, strerror(errno));
		return;
	}
	if (nents > PX_MAX_SERVICES) {
		px_cfg_error_line(e, c->path, 0, "more than %d policy files",
		    PX_MAX_SERVICES);
		goto out;
	}
	c->services = calloc((size_t)(nents ? nents : 1), sizeof(*c->services));
	if (c->services == NULL) {
		px_cfg_error_line(e, c->path, 0, "out of memory");
		goto out;
	}
	for (i = 0; i < nents; i++) {
		struct px_service *svc = &c->services[c->nservices];
		xmlDocPtr doc;
		char *path;

		if (asprintf(&path, "%s/%s", c->policy_dir, ents[i]->d_name) == -1) {
			px_cfg_error_line(e, c->path, 0, "out of memory");
			goto out;
		}
		svc->file = path;
		c->nservices++;
		doc = px_xml_load(path, px_service_schema(), e);
		if (doc == NULL)
			continue;
		e->file = path;
		before = e->count;
		px_load_service(c, svc, xmlDocGetRootElement(doc), e);
		xmlFreeDoc(doc);
		if (e->count != before)
			continue;
		/* Cross-file checks: names and listening sockets are unique. */
		for (j = 0; j < (int)c->nservices - 1; j++) {
			struct px_service *o = &c->services[j];

			if (o->name == NULL)
				continue;
			if (strcmp(o->name, svc->name) == 0)
				px_cfg_error_line(e, path, svc->line,
				    "service name \"%s\" is also used by %s:%ld",
				    svc->name, o->file, o->line);
			if (px_addr_overlap((struct sockaddr *)&o->listen,
			    (struct sockaddr *)&svc->listen) &&
			    !px_may_share(o, svc, e)) {
				char a[PX_ADDRSTRLEN];

				px_cfg_error_line(e, path, svc->listen_line,
				    "listen %s clashes with service \"%s\" at %s:%ld",
				    px_sockaddr_str((struct sockaddr *)&svc->listen,
				    a, sizeof(a)), o->name, o->file, o->listen_line);
			}
		}
		if (c->admin_enabled && px_addr_overlap(
		    (struct sockaddr *)&c->admin, (struct sockaddr *)&svc->listen))
			px_cfg_error_line(e, path, svc->listen_line,
			    "listen port %u clashes with the admin endpoint of %s",
			    px_sockaddr_port((struct sockaddr *)&svc->listen), c->path);
	}
	qsort(c->services, c->nservices, sizeof(*c->services), px_service_cmp);
	if (e->count == start)
		px_build_groups(c, e);
out:
	for (i = 0; i < nents; i++)
		free(ents[i]);
	free(ents);
}

struct px_config *
px_config_load(const char *path, struct px_cfgerr *e)
{
	struct px_config *c;
	xmlDocPtr doc;
	unsigned before = e->count;

	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->path = strdup(path)) == NULL) {
		px_cfg_error_line(e, path, 0, "out of memory");
		free(c);
		return NULL;
	}
	atomic_init(&c->refs, 1);
	atomic_fetch_add_explicit(&px_configs_live, 1, memory_order_relaxed);
	doc = px_xml_load(path, px_schema_proxyd_rng, e);
	if (doc == NULL)
		goto fail;
	e->file = path;
	px_load_daemon(c, xmlDocGetRootElement(doc), e);
	xmlFreeDoc(doc);
	if (e->count != before)
		goto fail;
	px_load_policies(c, e);
	if (e->count != before)
		goto fail;
	return c;
fail:
	px_config_unref(c);
	return NULL;
}

atomic_uint px_configs_live;

struct px_config *
px_config_ref(struct px_config *c)
{
	atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
	return c;
}

void
px_config_unref(struct px_config *c)
{
	size_t i;

	if (c == NULL ||
	    atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
		return;
	for (i = 0; i < c->nservices; i++) {
		struct px_service *svc = &c->services[i];

		if (svc->analyser != NULL && svc->analyser->policy_free != NULL &&
		    svc->analyser_policy != NULL)
			svc->analyser->policy_free(svc->analyser_policy);
		px_tls_free(svc->tls_client);
		px_fp_free(&svc->fingerprints);
		px_tls_free(svc->tls_server);
		px_tls_free(svc->tls_passthrough);
		px_auth_use_free(svc->auth);
		px_tls_free(svc->starttls_client);
		px_tls_free(svc->starttls_server);
		xmlFree(svc->name);
		free(svc->file);
		px_addrlist_free(&svc->clients);
		px_addrlist_free(&svc->servers);
		px_scan_policy_free(&svc->scan);
	}
	for (i = 0; i < c->ngroups; i++)
		px_group_free(&c->groups[i], c->zones.n);
	free(c->groups);
	px_zones_free(&c->zones);
	px_scanners_free(&c->scanners);
	px_authns_free(&c->authns);
	free(c->services);
	atomic_fetch_sub_explicit(&px_configs_live, 1, memory_order_release);
	free(c->policy_dir);
	free(c->log_file);
	free(c->audit_file);
	free(c->pidfile);
	free(c->ha_state_file);
	free(c->quota_state_file);
	free(c->members_file);
	free(c->user);
	free(c->path);
	free(c);
}
