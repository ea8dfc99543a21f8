/* JSON strings, as every JSON proxyd writes has them (log lines in JSON,
 * audit records, the admin's status and the quota table): quotes,
 * backslashes and control bytes escaped, valid UTF-8 kept as it is, any
 * byte that is not part of valid UTF-8 (peer text need not be) as
 * \u00XX, the character of the same number, so every string parses and
 * the output stays UTF-8. */
#ifndef PX_JSON_H
#define PX_JSON_H

#include <stddef.h>

struct evbuffer;

/* How many bytes of valid UTF-8 start s (1..4), 0 if none does (len > 0). */
size_t	px_utf8_len(const unsigned char *s, size_t len);
/* A JSON string's body for s. Returns the length written (it stops
 * before an escape that might not fit: at most cap - 6 are used). */
size_t	px_json_escape(char *out, size_t cap, const char *s, size_t len);
/* v as a JSON string, quotes included, added to b. */
void	px_json_str(struct evbuffer *b, const char *v);

#endif
