/* Rule lists and choice attributes (see rules.h). */
#include "rules.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "cfgread.h"

#define PX_PATTERN_MAX	255

static const char *const px_action_names[] = { "accept", "deny", "abort" };

const char *
px_action_name(enum px_action a)
{
	return (unsigned)a < 3 ? px_action_names[a] : "?";
}

void *
px_grow(void *p, size_t n, size_t size)
{
	if (n != 0 && (n & (n - 1)) != 0)
		return p;	/* room left from the last doubling */
	if (n > SIZE_MAX / 2 / size)
		return NULL;
	return realloc(p, (n ? n * 2 : 1) * size);
}

void
px_rules_init(struct px_rules *l, enum px_rules_default dflt, int fnm_flags)
{
	memset(l, 0, sizeof(*l));
	l->dflt = dflt;
	l->fnm_flags = fnm_flags;
}

static void
px_rule_free(struct px_rule *r)
{
	size_t i;

	for (i = 0; i < r->npats; i++)
		free(r->pats[i]);
	free(r->pats);
	free(r->label);
}

void
px_rules_free(struct px_rules *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		px_rule_free(&l->r[i]);
	free(l->r);
	l->r = NULL;
	l->n = 0;
}

static int
px_rule_push(struct px_rule *r, const char *p, size_t len)
{
	char **pats, *copy;

	if ((copy = strndup(p, len)) == NULL)
		return -1;
	if ((pats = px_grow(r->pats, r->npats, sizeof(*pats))) == NULL) {
		free(copy);
		return -1;
	}
	r->pats = pats;
	r->pats[r->npats++] = copy;
	return 0;
}

struct px_rule *
px_rules_add(struct px_cfgerr *e, struct px_rules *l, const xmlNode *n,
    const char *attr, bool split, enum px_action action)
{
	struct px_rule rule, *grown;
	char *v = px_attr(n, attr);
	const char *w;
	size_t len;

	memset(&rule, 0, sizeof(rule));
	rule.action = action;
	rule.line = px_xml_line(n);
	if (px_attr_label(e, n, &rule.label) == -1)
		goto fail;
	for (w = v != NULL ? v : ""; *w != '\0'; w += len) {
		if (split)
			w += strspn(w, " \t\r\n");
		len = split ? strcspn(w, " \t\r\n") : strlen(w);
		if (len == 0)
			break;
		if (len > PX_PATTERN_MAX) {
			px_cfg_error(e, n, "%s: a pattern longer than %d bytes",
			    attr, PX_PATTERN_MAX);
			goto fail;
		}
		if (px_rule_push(&rule, w, len) == -1) {
			px_cfg_error(e, n, "out of memory");
			goto fail;
		}
	}
	if (rule.npats == 0) {
		px_cfg_error(e, n, "<%s> needs a non-empty %s=", (const char *)n->name,
		    attr);
		goto fail;
	}
	if ((grown = px_grow(l->r, l->n, sizeof(*grown))) == NULL) {
		px_cfg_error(e, n, "out of memory");
		goto fail;
	}
	l->r = grown;
	l->r[l->n] = rule;
	xmlFree(v);
	return &l->r[l->n++];
fail:
	px_rule_free(&rule);
	xmlFree(v);
	return NULL;
}

enum px_action
px_rules_default_action(const struct px_rules *l)
{
	switch (l->dflt) {
	case PX_DEFAULT_ACCEPT:
		return PX_ACT_ACCEPT;
	case PX_DEFAULT_ALLOW_LIST:
		return l->n == 0 ? PX_ACT_ACCEPT : PX_ACT_DENY;
	default:
		return PX_ACT_DENY;
	}
}

enum px_action
px_rules_decide(const struct px_rules *l, const char *s,
    const struct px_rule **hit)
{
	size_t i, j;

	for (i = 0; i < l->n; i++)
		for (j = 0; j < l->r[i].npats; j++)
			if (fnmatch(l->r[i].pats[j], s, l->fnm_flags) == 0) {
				if (hit != NULL)
					*hit = &l->r[i];
				return l->r[i].action;
			}
	if (hit != NULL)
		*hit = NULL;
	return px_rules_default_action(l);
}

/* "a, b or c" of the names in choices whose bit is in mask (all if 0). */
static void
px_choices_text(char *buf, size_t size, const char *const *choices,
    unsigned mask)
{
	size_t i, k = 0, total = 0, o = 0;

	for (i = 0; choices[i] != NULL; i++)
		if (mask == 0 || (mask & (1u << i)))
			total++;
	buf[0] = '\0';
	for (i = 0; choices[i] != NULL && o < size; i++) {
		if (mask != 0 && !(mask & (1u << i)))
			continue;
		o += (size_t)snprintf(buf + o, size - o, "%s%s", k == 0 ? "" :
		    k + 1 == total ? " or " : ", ", choices[i]);
		k++;
	}
}

static int
px_choice_index(const char *v, const char *const *choices, unsigned mask)
{
	int i;

	for (i = 0; choices[i] != NULL; i++)
		if ((mask == 0 || (mask & (1u << i))) && strcmp(v, choices[i]) == 0)
			return i;
	return -1;
}

int
px_attr_choice(struct px_cfgerr *e, const xmlNode *n, const char *name,
    const char *const *choices, int *out)
{
	char *v = px_attr(n, name), text[256];
	int i;

	if (v == NULL)
		return 0;
	if ((i = px_choice_index(v, choices, 0)) == -1) {
		px_choices_text(text, sizeof(text), choices, 0);
		px_cfg_error(e, n, "%s=\"%s\": expected %s", name, v, text);
		xmlFree(v);
		return -1;
	}
	*out = i;
	xmlFree(v);
	return 0;
}

int
px_attr_action(struct px_cfgerr *e, const xmlNode *n, unsigned allowed,
    bool required, enum px_action *out)
{
	static const char *const names[] = { "accept", "deny", "abort", NULL };
	char *v = px_attr(n, "action"), text[64];
	int i;

	px_choices_text(text, sizeof(text), names, allowed);
	if (v == NULL) {
		if (!required)
			return 0;
		px_cfg_error(e, n, "<%s> needs action= (%s)",
		    (const char *)n->name, text);
		return -1;
	}
	if ((i = px_choice_index(v, names, allowed)) == -1) {
		px_cfg_error(e, n, "action=\"%s\": expected %s", v, text);
		xmlFree(v);
		return -1;
	}
	*out = (enum px_action)i;
	xmlFree(v);
	return 0;
}

const char *
px_rule_ref_at(long line, const char *label, const char *file, char *buf,
    size_t size)
{
	const char *base;

	if (label != NULL) {
		snprintf(buf, size, "%s", label);
		return buf;
	}
	base = file != NULL ? strrchr(file, '/') : NULL;
	base = base != NULL ? base + 1 : file != NULL ? file : "-";
	snprintf(buf, size, "%s:%ld", base, line);
	return buf;
}

const char *
px_rule_ref(const struct px_rule *hit, const char *file, char *buf,
    size_t size)
{
	if (hit == NULL) {
		snprintf(buf, size, "default");
		return buf;
	}
	return px_rule_ref_at(hit->line, hit->label, file, buf, size);
}

int
px_attr_label(struct px_cfgerr *e, const xmlNode *n, char **out)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/-";
	char *v = px_attr(n, "label");
	size_t len;

	*out = NULL;
	if (v == NULL)
		return 0;
	len = strlen(v);
	if (len == 0 || len > PX_LABEL_MAX || strspn(v, ok) != len) {
		px_cfg_error(e, n, "label=\"%s\": expected 1 to %d letters, "
		    "digits or ._:/-", v, PX_LABEL_MAX);
		xmlFree(v);
		return -1;
	}
	*out = strdup(v);
	xmlFree(v);
	if (*out == NULL) {
		px_cfg_error(e, n, "out of memory");
		return -1;
	}
	return 0;
}
