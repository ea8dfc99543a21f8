/* r66: the <r66> element of a service, read once at load into a
 * struct r66_policy (r66_policy.h) that workers then only read. */
#include "r66_policy.h"

#include <fnmatch.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "config.h"
#include "parse.h"
#include "r66_wire.h"

static void
r66_list_free(struct r66_pat_list *l)
{
	size_t i, j;

	for (i = 0; i < l->n; i++) {
		for (j = 0; j < l->r[i].npats; j++)
			free(l->r[i].pats[j]);
		free(l->r[i].pats);
	}
	free(l->r);
}

void
r66_policy_free(void *pol)
{
	struct r66_policy *p = pol;

	if (p == NULL)
		return;
	r66_list_free(&p->hosts);
	r66_list_free(&p->rules);
	r66_list_free(&p->files);
	free(p);
}

/* NULL if absent; caller xmlFree()s. */
static char *
r66_prop(const xmlNode *n, const char *name)
{
	return (char *)xmlGetProp((xmlNode *)n, (const xmlChar *)name);
}

static int
r66_split(const xmlNode *n, const char *attr, const char *v, char ***out,
    size_t *nout, struct px_cfgerr *e)
{
	const char *p = v;
	char **list = NULL, **nl;
	size_t k = 0;

	for (;;) {
		size_t len;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		len = strcspn(p, " \t\n");
		if (len > 255 || (nl = realloc(list, (k + 1) *
		    sizeof(*list))) == NULL || (nl[k] = strndup(p, len)) == NULL) {
			px_cfg_error(e, n, "%s: item too long or out of memory",
			    attr);
			goto fail;
		}
		list = nl;
		k++;
		p += len;
	}
	if (k == 0) {
		px_cfg_error(e, n, "%s=\"\": expected at least one item", attr);
		goto fail;
	}
	*out = list;
	*nout = k;
	return 0;
fail:
	while (k > 0)
		free(list[--k]);
	free(list);
	return -1;
}

static int
r66_pat_rule_load(const xmlNode *n, const char *attr, struct r66_pat_list *l,
    struct px_cfgerr *e)
{
	struct r66_pat_rule r, *nr;
	char *v;
	const char *why;
	int rc = -1;

	memset(&r, 0, sizeof(r));
	if ((v = r66_prop(n, attr)) == NULL) {
		px_cfg_error(e, n, "<%s> needs %s=", (const char *)n->name, attr);
		return -1;
	}
	if (r66_split(n, attr, v, &r.pats, &r.npats, e) == -1) {
		xmlFree(v);
		return -1;
	}
	xmlFree(v);
	if ((v = r66_prop(n, "action")) != NULL) {
		if (strcmp(v, "accept") == 0)
			r.action = R66_ACCEPT;
		else if (strcmp(v, "deny") == 0)
			r.action = R66_DENY;
		else if (strcmp(v, "abort") == 0)
			r.action = R66_ABORT;
		else {
			px_cfg_error(e, n, "action=\"%s\": expected accept, deny "
			    "or abort", v);
			goto out;
		}
		xmlFree(v);
		v = NULL;
	}
	if ((v = r66_prop(n, "max-size")) != NULL) {
		if (px_parse_size(v, &r.max_size, &why) == -1) {
			px_cfg_error(e, n, "max-size=\"%s\": %s", v, why);
			goto out;
		}
		if (r.max_size == 0) {
			px_cfg_error(e, n, "max-size=\"%s\": must be above 0 "
			    "(leave it out for no limit)", v);
			goto out;
		}
	}
	if ((nr = realloc(l->r, (l->n + 1) * sizeof(*nr))) == NULL) {
		px_cfg_error(e, n, "out of memory");
		goto out;
	}
	l->r = nr;
	l->r[l->n++] = r;
	r.pats = NULL;
	r.npats = 0;
	rc = 0;
out:
	if (v != NULL)
		xmlFree(v);
	while (r.npats > 0)
		free(r.pats[--r.npats]);
	free(r.pats);
	return rc;
}

static int
r66_modes_load(const xmlNode *n, unsigned *modes, struct px_cfgerr *e)
{
	char *v = r66_prop(n, "allow"), **list = NULL;
	size_t k, nl = 0;
	int m, rc = -1;

	if (v == NULL) {
		px_cfg_error(e, n, "<mode> needs allow=");
		return -1;
	}
	if (r66_split(n, "allow", v, &list, &nl, e) == -1)
		goto out;
	*modes = 0;
	for (k = 0; k < nl; k++) {
		for (m = R66_MODE_SEND; m <= R66_MODE_RECVMD5THROUGH; m++)
			if (strcmp(list[k], r66_mode_name(m)) == 0)
				break;
		if (m > R66_MODE_RECVMD5THROUGH) {
			px_cfg_error(e, n, "allow: unknown mode \"%s\" (send recv "
			    "sendmd5 recvmd5 sendthrough recvthrough "
			    "sendmd5through recvmd5through)", list[k]);
			goto out;
		}
		*modes |= 1u << m;
	}
	rc = 0;
out:
	for (k = 0; k < nl; k++)
		free(list[k]);
	free(list);
	xmlFree(v);
	return rc;
}

int
r66_policy_load(const xmlNode *sec, void **pol, struct px_cfgerr *e)
{
	struct r66_policy *p;
	const xmlNode *n;
	const char *why;
	char *v;
	bool seen_mode = false;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		px_cfg_error(e, sec, "out of memory");
		return -1;
	}
	p->max_block = R66_MAX_BLOCK_DEF;
	p->modes = 0x1fe;	/* 1..8 */
	p->information = p->test = true;
	if (sec == NULL)
		goto done;
	if ((v = r66_prop(sec, "require-digest")) != NULL) {
		if (strcmp(v, "yes") == 0)
			p->req_block_digest = p->req_global_digest = true;
		else if (strcmp(v, "block") == 0)
			p->req_block_digest = true;
		else if (strcmp(v, "global") == 0)
			p->req_global_digest = true;
		else if (strcmp(v, "no") != 0) {
			px_cfg_error(e, sec, "require-digest=\"%s\": expected yes, "
			    "no, block or global", v);
			xmlFree(v);
			goto fail;
		}
		xmlFree(v);
	}
	if ((v = r66_prop(sec, "max-block")) != NULL) {
		if (px_parse_size(v, &p->max_block, &why) == -1) {
			px_cfg_error(e, sec, "max-block=\"%s\": %s", v, why);
			xmlFree(v);
			goto fail;
		}
		if (p->max_block < 100 || p->max_block > R66_MAX_BLOCK_MAX) {
			px_cfg_error(e, sec, "max-block=\"%s\": must be between "
			    "100 and 16m", v);
			xmlFree(v);
			goto fail;
		}
		xmlFree(v);
	}
	if (px_attr_bool(e, sec, "information", &p->information) == -1 ||
	    px_attr_bool(e, sec, "test", &p->test) == -1)
		goto fail;
	for (n = sec->children; n != NULL; n = n->next) {
		int rc = 0;

		if (n->type != XML_ELEMENT_NODE)
			continue;
		if (xmlStrcmp(n->name, (const xmlChar *)"host") == 0)
			rc = r66_pat_rule_load(n, "id", &p->hosts, e);
		else if (xmlStrcmp(n->name, (const xmlChar *)"rule") == 0)
			rc = r66_pat_rule_load(n, "name", &p->rules, e);
		else if (xmlStrcmp(n->name, (const xmlChar *)"file") == 0)
			rc = r66_pat_rule_load(n, "pattern", &p->files, e);
		else if (xmlStrcmp(n->name, (const xmlChar *)"mode") == 0) {
			if (seen_mode) {
				px_cfg_error(e, n, "<mode> given twice");
				goto fail;
			}
			seen_mode = true;
			rc = r66_modes_load(n, &p->modes, e);
		} else {
			px_cfg_error(e, n, "unknown element <%s> in <r66>",
			    (const char *)n->name);
			rc = -1;
		}
		if (rc == -1)
			goto fail;
	}
done:
	*pol = p;
	return 0;
fail:
	r66_policy_free(p);
	return -1;
}

/* First matching rule (NULL: none matched). An empty list matches all. */
static const struct r66_pat_rule *
r66_match(const struct r66_pat_list *l, const char *s, bool *empty)
{
	size_t i, j;

	*empty = l->n == 0;
	for (i = 0; i < l->n; i++)
		for (j = 0; j < l->r[i].npats; j++)
			if (fnmatch(l->r[i].pats[j], s, 0) == 0)
				return &l->r[i];
	return NULL;
}

/* ACCEPT, DENY or ABORT for s against a list; *max_size from the rule. */
enum r66_action
r66_decide(const struct r66_pat_list *l, const char *s, uint64_t *max_size)
{
	const struct r66_pat_rule *r;
	bool empty;

	if (max_size != NULL)
		*max_size = 0;
	r = r66_match(l, s, &empty);
	if (empty)
		return R66_ACCEPT;
	if (r == NULL)
		return R66_DENY;
	if (max_size != NULL)
		*max_size = r->max_size;
	return r->action;
}

