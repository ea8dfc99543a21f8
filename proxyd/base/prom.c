/* The Prometheus label escaper (prom.h). */
#include "prom.h"

#include <event2/buffer.h>

void
px_prom_label(struct evbuffer *b, const char *v)
{
	for (; *v != '\0'; v++) {
		if (*v == '\\' || *v == '"')
			evbuffer_add_printf(b, "\\%c", *v);
		else if (*v == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, v, 1);
	}
}
