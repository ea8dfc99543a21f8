/* The configuration readers and their error sink (cfgread.h). */
#include "cfgread.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include <libxml/tree.h>

#include "parse.h"

static void __attribute__((format(printf, 4, 0)))
px_cfgerr_vput(struct px_cfgerr *e, const char *file, long line,
    const char *fmt, va_list ap)
{
	char msg[400], full[sizeof(e->last)];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	snprintf(full, sizeof(full), "%s:%ld: %s", file ? file : "?", line, msg);
	/* libxml2 reports some causes once per place it meets them (an
	 * entity loop, an unreadable file): one line per cause. */
	if (e->count > 0 && strcmp(full, e->last) == 0)
		return;
	if (e->count == 0)
		snprintf(e->first, sizeof(e->first), "%s", full);
	snprintf(e->last, sizeof(e->last), "%s", full);
	e->count++;
	if (e->out != NULL)
		fprintf(e->out, "%s\n", full);
}

void
px_cfg_error_line(struct px_cfgerr *e, const char *file, long line,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	px_cfgerr_vput(e, file, line, fmt, ap);
	va_end(ap);
}

void
px_cfg_error(struct px_cfgerr *e, const struct _xmlNode *node,
    const char *fmt, ...)
{
	va_list ap;
	long line = node ? px_xml_line(node) : 0;

	va_start(ap, fmt);
	px_cfgerr_vput(e, e->file, line, fmt, ap);
	va_end(ap);
}

/* A node's line. Past 65535 the node's own field is full; with
 * XML_PARSE_BIG_LINES libxml2 keeps the line a text node ends on, and
 * the text just before an element ends where the element starts
 * (xmlGetLineNo looks after it instead: one line late). */
long
px_xml_line(const xmlNode *n)
{
	if (n->line < 65535)
		return n->line;
	if (n->prev != NULL && n->prev->type == XML_TEXT_NODE &&
	    n->prev->psvi != NULL)
		return (long)(intptr_t)n->prev->psvi;
	return xmlGetLineNo(n);
}

/* The caller frees with xmlFree(). NULL if absent. */
char *
px_attr(const xmlNode *n, const char *name)
{
	return n ? (char *)xmlGetProp((xmlNode *)n, (const xmlChar *)name) : NULL;
}

int
px_attr_duration(struct px_cfgerr *e, const xmlNode *n, const char *name,
    bool allow_zero, uint64_t min, uint64_t max, uint64_t *out)
{
	char *v = px_attr(n, name);
	const char *why;
	int rc = 0;

	if (v == NULL)
		return 0;
	if (px_parse_duration_ms(v, allow_zero, out, &why) == -1) {
		px_cfg_error(e, n, "%s=\"%s\": %s", name, v, why);
		rc = -1;
	} else if (*out != 0 && (*out < min || *out > max)) {
		px_cfg_error(e, n, "%s=\"%s\": must be between %llums and %llums",
		    name, v, (unsigned long long)min, (unsigned long long)max);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

int
px_attr_size(struct px_cfgerr *e, const xmlNode *n, const char *name,
    uint64_t min, uint64_t max, uint64_t *out)
{
	char *v = px_attr(n, name);
	const char *why;
	int rc = 0;

	if (v == NULL)
		return 0;
	if (px_parse_size(v, out, &why) == -1) {
		px_cfg_error(e, n, "%s=\"%s\": %s", name, v, why);
		rc = -1;
	} else if (*out < min || *out > max) {
		px_cfg_error(e, n, "%s=\"%s\": must be between %llu and %llu bytes",
		    name, v, (unsigned long long)min, (unsigned long long)max);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

int
px_attr_uint(struct px_cfgerr *e, const xmlNode *n, const char *name,
    uint64_t min, uint64_t max, uint64_t *out)
{
	char *v = px_attr(n, name);
	const char *why;
	int rc = 0;

	if (v == NULL)
		return 0;
	if (px_parse_uint(v, min, max, out, &why) == -1) {
		px_cfg_error(e, n, "%s=\"%s\": %s (allowed %llu..%llu)", name, v,
		    why, (unsigned long long)min, (unsigned long long)max);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

int
px_attr_bool(struct px_cfgerr *e, const xmlNode *n, const char *name, bool *out)
{
	char *v = px_attr(n, name);
	int rc = 0;

	if (v == NULL)
		return 0;
	if (strcmp(v, "yes") == 0)
		*out = true;
	else if (strcmp(v, "no") == 0)
		*out = false;
	else {
		px_cfg_error(e, n, "%s=\"%s\": expected yes or no", name, v);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}
