/* The JSON R66 carries (JSON requests, the Authent version's capabilities,
 * JsonCommand packets): flat objects read in place over (ptr, len), every
 * length checked, no allocation. Shared by r66_wire.c, r66.c, r66_check.c
 * and the unit/fuzz tests. */
#ifndef R66_JSON_H
#define R66_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Flat JSON object lookup: finds "key" at top level of the object in
 * (p, len); string values are unescaped into buf (NUL-terminated, \u0000
 * refused), numbers/true/false copied as text. 1 found, 0 absent, -1
 * malformed or does not fit. Nested values of other keys are skipped (at
 * most 16 deep); the whole input must be one object. */
int	r66_json_get(const uint8_t *p, size_t len, const char *key, char *buf,
	    size_t bufsz, bool *is_string);

#endif
