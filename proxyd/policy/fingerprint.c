/* fingerprint: a service's <fingerprint> rules (see fingerprint.h): their
 * values and list files read at each load, and the first-match verdict on
 * a session's JA4. */
#include "fingerprint.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "cfgread.h"
#include "ja4.h"

/* A list file bigger than this is a mistake, not a list. */
#define PX_FP_LIST_MAX	(1u << 20)

static int
px_fp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A pattern: "*", or a fingerprint with '*' for any run of characters. */
static bool
px_fp_pattern_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > PX_JA4_LEN || strchr(s, '*') == NULL)
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_*") == n;
}

static int
px_fp_push(char ***v, size_t *n, const char *s, size_t len)
{
	char **grown, *d;

	if ((d = strndup(s, len)) == NULL)
		return -1;
	if ((grown = px_grow(*v, *n, sizeof(**v))) == NULL) {
		free(d);
		return -1;
	}
	*v = grown;
	(*v)[(*n)++] = d;
	return 0;
}

/* One fingerprint or pattern into the rule; false if it is neither. */
static int
px_fp_add(struct px_fp_rule *r, const char *s, size_t len, bool patterns)
{
	char buf[PX_JA4_LEN + 1];

	if (len > PX_JA4_LEN)
		return 1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (px_ja4_valid(buf))
		return px_fp_push(&r->fps, &r->nfps, buf, len) == -1 ? -1 : 0;
	if (patterns && px_fp_pattern_ok(buf))
		return px_fp_push(&r->pats, &r->npats, buf, len) == -1 ? -1 : 0;
	return 1;
}

static char *
px_fp_path(const char *file, const char *v)
{
	const char *slash;
	char *p;
	int dir;

	if (v[0] == '/' || file == NULL || (slash = strrchr(file, '/')) == NULL)
		return strdup(v);
	dir = (int)(slash - file);
	if (asprintf(&p, "%.*s/%s", dir, file, v) == -1)
		return NULL;
	return p;
}

/* list=: one fingerprint a line; blank lines and '#' comments allowed. */
static int
px_fp_read_list(struct px_cfgerr *e, const xmlNode *n, struct px_fp_rule *r)
{
	FILE *f;
	char line[512], *s;
	size_t len;
	long lineno = 0;
	int rc = 0, k;

	if ((f = fopen(r->list, "r")) == NULL) {
		px_cfg_error(e, n, "list=\"%s\": %s", r->list, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		len = strlen(line);
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			px_cfg_error_line(e, r->list, lineno, "a line longer "
			    "than %zu bytes", sizeof(line) - 2);
			rc = -1;
			break;
		}
		if ((s = strchr(line, '#')) != NULL)
			*s = '\0';
		s = line + strspn(line, " \t\r\n");
		len = strcspn(s, " \t\r\n");
		if (len == 0)
			continue;
		if (s[len + strspn(s + len, " \t\r\n")] != '\0') {
			px_cfg_error_line(e, r->list, lineno, "one "
			    "fingerprint a line");
			rc = -1;
			continue;
		}
		if (r->nfps >= PX_FP_LIST_MAX) {
			px_cfg_error_line(e, r->list, lineno, "more than %u "
			    "fingerprints", PX_FP_LIST_MAX);
			rc = -1;
			break;
		}
		if ((k = px_fp_add(r, s, len, false)) == -1) {
			px_cfg_error(e, n, "out of memory");
			rc = -1;
			break;
		}
		if (k == 1) {
			px_cfg_error_line(e, r->list, lineno, "\"%.*s\" is not "
			    "a JA4 fingerprint (t13d1516h2_8daaf6152771_"
			    "e5627efa2ab1: 36 characters, lowercase hex hashes)",
			    (int)(len > 40 ? 40 : len), s);
			rc = -1;
		}
	}
	if (ferror(f)) {
		px_cfg_error(e, n, "list=\"%s\": read error", r->list);
		rc = -1;
	}
	fclose(f);
	return rc;
}

static void
px_fp_rule_free(struct px_fp_rule *r)
{
	size_t i;

	for (i = 0; i < r->nfps; i++)
		free(r->fps[i]);
	for (i = 0; i < r->npats; i++)
		free(r->pats[i]);
	free(r->fps);
	free(r->pats);
	free(r->list);
	free(r->label);
}

int
px_fp_load(struct px_cfgerr *e, const xmlNode *n, const char *file,
    struct px_fp_rules *l)
{
	struct px_fp_rule r, *grown;
	char *ja4 = px_attr(n, "ja4"), *list = px_attr(n, "list");
	const char *w;
	size_t len;
	int k;

	memset(&r, 0, sizeof(r));
	r.line = px_xml_line(n);
	if (px_attr_action(e, n, PX_ACTIONS_AD, true, &r.action) == -1 ||
	    px_attr_label(e, n, &r.label) == -1)
		goto fail;
	if ((ja4 == NULL) == (list == NULL)) {
		px_cfg_error(e, n, "<fingerprint> needs one of ja4= and list=");
		goto fail;
	}
	for (w = ja4 != NULL ? ja4 : ""; *w != '\0'; w += len) {
		w += strspn(w, " \t\r\n");
		if ((len = strcspn(w, " \t\r\n")) == 0)
			break;
		if ((k = px_fp_add(&r, w, len, true)) == -1) {
			px_cfg_error(e, n, "out of memory");
			goto fail;
		}
		if (k == 1) {
			px_cfg_error(e, n, "ja4=\"%.*s\": not a JA4 fingerprint "
			    "(t13d1516h2_8daaf6152771_e5627efa2ab1: 36 characters, "
			    "lowercase hex hashes) nor a pattern of one with '*'",
			    (int)(len > 40 ? 40 : len), w);
			goto fail;
		}
	}
	if (ja4 != NULL && r.nfps + r.npats == 0) {
		px_cfg_error(e, n, "<fingerprint> needs a non-empty ja4=");
		goto fail;
	}
	if (list != NULL) {
		if ((r.list = px_fp_path(file, list)) == NULL) {
			px_cfg_error(e, n, "out of memory");
			goto fail;
		}
		if (px_fp_read_list(e, n, &r) == -1)
			goto fail;
	}
	/* (qsort's array may not be NULL, even for no element) */
	if (r.nfps > 1)
		qsort(r.fps, r.nfps, sizeof(*r.fps), px_fp_cmp);
	if ((grown = px_grow(l->r, l->n, sizeof(*grown))) == NULL) {
		px_cfg_error(e, n, "out of memory");
		goto fail;
	}
	l->r = grown;
	l->r[l->n++] = r;
	xmlFree(ja4);
	xmlFree(list);
	return 0;
fail:
	px_fp_rule_free(&r);
	xmlFree(ja4);
	xmlFree(list);
	return -1;
}

void
px_fp_free(struct px_fp_rules *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		px_fp_rule_free(&l->r[i]);
	free(l->r);
	l->r = NULL;
	l->n = 0;
}

const struct px_fp_rule *
px_fp_match(const struct px_fp_rules *l, const char *ja4)
{
	const struct px_fp_rule *r;
	size_t i, j;

	if (l == NULL)
		return NULL;
	/* No JA4 is no pass: an allowlist's closing ja4="*" deny must
	 * still refuse the client. */
	if (ja4 == NULL || ja4[0] == '\0')
		ja4 = PX_FP_UNKNOWN;
	for (i = 0; i < l->n; i++) {
		r = &l->r[i];
		if (r->nfps > 0 && bsearch(&ja4, r->fps, r->nfps,
		    sizeof(*r->fps), px_fp_cmp) != NULL)
			return r;
		for (j = 0; j < r->npats; j++)
			if (fnmatch(r->pats[j], ja4, 0) == 0)
				return r;
	}
	return NULL;
}
