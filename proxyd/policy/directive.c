/* The loader of attributes declared as tables (directive.h). */
#include "directive.h"

#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "parse.h"

static const xmlNode *
px_directive_element(const xmlNode *root, const char *name)
{
	const xmlNode *n;

	for (n = root != NULL ? root->children : NULL; n != NULL; n = n->next)
		if (n->type == XML_ELEMENT_NODE &&
		    xmlStrcmp(n->name, (const xmlChar *)name) == 0)
			return n;
	return NULL;
}

static char *
px_directive_path(const char *file, const char *rel)
{
	char *copy, *out;

	if (rel[0] == '/' || file == NULL)
		return strdup(rel);
	if ((copy = strdup(file)) == NULL)
		return NULL;
	if (asprintf(&out, "%s/%s", dirname(copy), rel) == -1)
		out = NULL;
	free(copy);
	return out;
}

/* Stores v in the row's field, whatever its width. */
static void
px_directive_store(void *obj, const struct px_directive *d, uint64_t v)
{
	char *p = (char *)obj + d->offset;

	if (d->type == PX_D_BOOL || (d->type == PX_D_CHOICE &&
	    d->size == sizeof(bool))) {
		bool b = v != 0;

		memcpy(p, &b, sizeof(b));
	} else if (d->type == PX_D_CHOICE) {
		int i = (int)v;

		memcpy(p, &i, sizeof(i));
	} else if (d->size == sizeof(uint16_t)) {
		uint16_t x = (uint16_t)v;

		memcpy(p, &x, sizeof(x));
	} else if (d->size == sizeof(uint32_t)) {
		uint32_t x = (uint32_t)v;

		memcpy(p, &x, sizeof(x));
	} else
		memcpy(p, &v, sizeof(v));
}

static void
px_directive_choices(const struct px_directive *d, char *buf, size_t size)
{
	size_t i, len = 0;

	buf[0] = '\0';
	for (i = 0; d->choices[i] != NULL && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s",
		    i == 0 ? "" : d->choices[i + 1] == NULL ? " or " : ", ",
		    d->choices[i]);
}

/* Parses text for row d into *v (or, for a path, *path). NULL, or why
 * it is refused. */
static const char *
px_directive_parse(const struct px_directive *d, const char *text,
    const char *file, uint64_t *v, char **path)
{
	static _Thread_local char why[200];
	const char *msg = NULL;
	char choices[160];
	size_t i;

	switch (d->type) {
	case PX_D_UINT:
		if (px_parse_uint(text, d->min, d->max, v, &msg) == -1) {
			snprintf(why, sizeof(why), "%s (allowed %llu..%llu)", msg,
			    (unsigned long long)d->min,
			    (unsigned long long)d->max);
			return why;
		}
		return NULL;
	case PX_D_DURATION:
	case PX_D_DURATION_OFF:
		if (px_parse_duration_ms(text, d->type == PX_D_DURATION_OFF ||
		    d->min == 0, v, &msg) == -1)
			return msg;
		if (*v != 0 && (*v < (d->min ? d->min : 1) || *v > d->max)) {
			snprintf(why, sizeof(why), "must be between %llums and "
			    "%llums", (unsigned long long)(d->min ? d->min : 1),
			    (unsigned long long)d->max);
			return why;
		}
		return NULL;
	case PX_D_SIZE:
		if (px_parse_size(text, v, &msg) == -1)
			return msg;
		if (*v < d->min || *v > d->max) {
			snprintf(why, sizeof(why), "must be between %llu and %llu "
			    "bytes", (unsigned long long)d->min,
			    (unsigned long long)d->max);
			return why;
		}
		return NULL;
	case PX_D_BOOL:
		if (strcmp(text, "yes") == 0 || strcmp(text, "no") == 0) {
			*v = text[0] == 'y';
			return NULL;
		}
		return "expected yes or no";
	case PX_D_CHOICE:
		for (i = 0; d->choices[i] != NULL; i++)
			if (strcmp(text, d->choices[i]) == 0) {
				*v = d->values != NULL ?
				    (uint64_t)d->values[i] : i;
				return NULL;
			}
		px_directive_choices(d, choices, sizeof(choices));
		snprintf(why, sizeof(why), "expected %s", choices);
		return why;
	case PX_D_PATH:
		if (text[0] == '\0')
			return "expected a path";
		if ((*path = px_directive_path(file, text)) == NULL)
			return "out of memory";
		return NULL;
	}
	return "unknown attribute type";
}

static int
px_directive_set(const struct px_directive *d, void *obj, const char *text,
    const char *file, const xmlNode *node, struct px_cfgerr *e)
{
	uint64_t v = 0;
	char *path = NULL;
	const char *why = px_directive_parse(d, text, file, &v, &path);

	if (why != NULL) {
		px_cfg_error(e, node, "%s=\"%s\": %s", d->attr, text, why);
		return -1;
	}
	if (d->type == PX_D_PATH) {
		char **slot = (char **)(void *)((char *)obj + d->offset);

		free(*slot);
		*slot = path;
	} else
		px_directive_store(obj, d, v);
	return 0;
}

int
px_directives_load(const struct px_directive *t, size_t n, void *obj,
    const xmlNode *root, const char *file, struct px_cfgerr *e)
{
	unsigned before = e->count;
	size_t i;

	for (i = 0; i < n; i++)
		if (t[i].dflt != NULL)
			(void)px_directive_set(&t[i], obj, t[i].dflt, file, root,
			    e);
	for (i = 0; i < n; i++) {
		const xmlNode *el = px_directive_element(root, t[i].element);
		char *v = el != NULL ? (char *)xmlGetProp((xmlNode *)el,
		    (const xmlChar *)t[i].attr) : NULL;

		if (v != NULL)
			(void)px_directive_set(&t[i], obj, v, file, el, e);
		xmlFree(v);
	}
	return e->count == before ? 0 : -1;
}

static void
px_range_size(uint64_t v, char *buf, size_t size)
{
	static const struct { uint64_t unit; char c; } units[] = {
		{ 1ULL << 30, 'g' }, { 1ULL << 20, 'm' }, { 1ULL << 10, 'k' },
	};
	size_t i;

	for (i = 0; v != 0 && i < sizeof(units) / sizeof(units[0]); i++)
		if (v % units[i].unit == 0) {
			snprintf(buf, size, "%llu%c",
			    (unsigned long long)(v / units[i].unit), units[i].c);
			return;
		}
	snprintf(buf, size, "%llu", (unsigned long long)v);
}

static void
px_range_ms(uint64_t v, char *buf, size_t size)
{
	static const struct { uint64_t unit; const char *s; } units[] = {
		{ 86400000, "d" }, { 3600000, "h" }, { 60000, "m" },
		{ 1000, "s" },
	};
	size_t i;

	for (i = 0; v != 0 && i < sizeof(units) / sizeof(units[0]); i++)
		if (v % units[i].unit == 0) {
			snprintf(buf, size, "%llu%s",
			    (unsigned long long)(v / units[i].unit), units[i].s);
			return;
		}
	snprintf(buf, size, v == 0 ? "0" : "%llums", (unsigned long long)v);
}

void
px_directive_range(const struct px_directive *d, char *buf, size_t size)
{
	char lo[32], hi[32];
	size_t i, len = 0;

	buf[0] = '\0';
	switch (d->type) {
	case PX_D_UINT:
		snprintf(buf, size, "%llu..%llu", (unsigned long long)d->min,
		    (unsigned long long)d->max);
		break;
	case PX_D_SIZE:
		px_range_size(d->min, lo, sizeof(lo));
		px_range_size(d->max, hi, sizeof(hi));
		snprintf(buf, size, "%s..%s", lo, hi);
		break;
	case PX_D_DURATION:
	case PX_D_DURATION_OFF:
		px_range_ms(d->min, lo, sizeof(lo));
		px_range_ms(d->max, hi, sizeof(hi));
		snprintf(buf, size, "%s%s..%s", d->type == PX_D_DURATION_OFF ?
		    "0 (off), " : "", lo, hi);
		break;
	case PX_D_CHOICE:
		for (i = 0; d->choices[i] != NULL && len < size; i++)
			len += (size_t)snprintf(buf + len, size - len, "%s%s",
			    i == 0 ? "" : ", ", d->choices[i]);
		break;
	case PX_D_BOOL:
	case PX_D_PATH:
		break;
	}
}
