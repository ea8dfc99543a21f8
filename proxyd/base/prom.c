/* The Prometheus label escaper (prom.h). */
#include "prom.h"

#include <string.h>

#include <event2/buffer.h>

#include "json.h"	/* px_utf8_len */

void
px_prom_label(struct evbuffer *b, const char *v)
{
	const unsigned char *s = (const unsigned char *)v;
	size_t len = strlen(v), i, n;

	for (i = 0; i < len; i += n) {
		n = 1;
		if (s[i] == '\\' || s[i] == '"')
			evbuffer_add_printf(b, "\\%c", s[i]);
		else if (s[i] == '\n')
			evbuffer_add(b, "\\n", 2);
		else if (s[i] < 0x80)
			evbuffer_add(b, s + i, 1);
		else if ((n = px_utf8_len(s + i, len - i)) != 0)
			evbuffer_add(b, s + i, n);
		else {
			/* Not UTF-8, which the format requires: the byte as
			 * the text \xHH (its backslash escaped). */
			evbuffer_add_printf(b, "\\\\x%02X", s[i]);
			n = 1;
		}
	}
}
