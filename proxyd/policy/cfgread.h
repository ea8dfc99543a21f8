/* Reading configuration files, for every loader (the daemon file, the
 * services, zones, rules, TLS, privileges, the analysers' sections): the
 * error sink that reports "file:line: reason", a node's line, and the
 * attribute readers. It knows no configuration struct, so the loaders of
 * the policy layer use it without reaching up to config.c. */
#ifndef PX_CFGREAD_H
#define PX_CFGREAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct _xmlNode;

/* Error sink: every problem found is reported as "file:line: reason". */
struct px_cfgerr {
	FILE		*out;		/* where errors go; NULL: only counted */
	unsigned	 count;
	const char	*file;		/* file being loaded */
	char		 first[512];	/* first error, for the reload log */
	char		 last[512];	/* the line printed last: said once */
};

void	px_cfg_error(struct px_cfgerr *e, const struct _xmlNode *node,
	    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void	px_cfg_error_line(struct px_cfgerr *e, const char *file, long line,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A node's line in its file, true past 65535 too. */
long	px_xml_line(const struct _xmlNode *n);

/* Attribute readers for policy loaders: absent leaves *out alone and
 * returns 0; a bad value is reported as file:line and returns -1. */
char	*px_attr(const struct _xmlNode *n, const char *name);	/* xmlFree() */
int	px_attr_duration(struct px_cfgerr *e, const struct _xmlNode *n,
	    const char *name, bool allow_zero, uint64_t min, uint64_t max,
	    uint64_t *out);
int	px_attr_size(struct px_cfgerr *e, const struct _xmlNode *n,
	    const char *name, uint64_t min, uint64_t max, uint64_t *out);
int	px_attr_uint(struct px_cfgerr *e, const struct _xmlNode *n,
	    const char *name, uint64_t min, uint64_t max, uint64_t *out);
int	px_attr_bool(struct px_cfgerr *e, const struct _xmlNode *n,
	    const char *name, bool *out);

#endif
