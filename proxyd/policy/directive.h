/* Configuration attributes declared as tables, as nginx's ngx_command_t
 * with offsetof setters: each attribute is one row (its element, name,
 * type, range, default as the docs write it, and where it is stored), one
 * loader walks the rows, and a unit test holds docs/CONFIG.md to them.
 * Attributes whose meaning is more than a value (an address, a list of
 * rules) stay in code. */
#ifndef PX_DIRECTIVE_H
#define PX_DIRECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "cfgread.h"

enum px_dtype {
	PX_D_UINT = 0,		/* an integer, min..max */
	PX_D_DURATION,		/* milliseconds, min..max; 0 refused */
	PX_D_DURATION_OFF,	/* milliseconds: 0 = off, else min..max */
	PX_D_SIZE,		/* bytes, min..max */
	PX_D_BOOL,		/* yes or no */
	PX_D_CHOICE,		/* one of choices: stored as values[i] (or i) */
	PX_D_PATH,		/* a file name, relative to the file's folder;
				 * stored as a malloc'd absolute one */
};

struct px_directive {
	const char		*element;	/* child of the file's root */
	const char		*attr;
	enum px_dtype		 type;
	/* As docs/CONFIG.md writes it and the loader applies it; NULL:
	 * none (the field keeps what the caller put there). */
	const char		*dflt;
	uint64_t		 min, max;
	const char *const	*choices;	/* PX_D_CHOICE, NULL-terminated */
	const int		*values;	/* PX_D_CHOICE; NULL: the index */
	size_t			 offset;	/* of the field it fills */
	size_t			 size;		/* of that field */
};

/* offsetof and sizeof of one field, for a row. */
#define PX_FIELD(type, field)	offsetof(type, field), \
	sizeof(((type *)0)->field)

/* Sets obj's fields to t's defaults, then reads each row's attribute
 * from its element under root (an absent element or attribute keeps the
 * default). file: the file being loaded (paths are relative to its
 * folder). Reports each bad value as file:line; 0, or -1 if any. */
int	px_directives_load(const struct px_directive *t, size_t n, void *obj,
	    const struct _xmlNode *root, const char *file,
	    struct px_cfgerr *e);
/* The range column of docs/CONFIG.md for a row ("1..65535", "4k..64m",
 * "0 (off), 1ms..30d", "yes, no"), or "" when it has none. */
void	px_directive_range(const struct px_directive *d, char *buf,
	    size_t size);

#endif
