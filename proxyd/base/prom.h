/* Prometheus text exposition, what the admin's /metrics and the layers
 * that write their own families into it (the quota table) share. */
#ifndef PX_PROM_H
#define PX_PROM_H

struct evbuffer;

/* v as a label value (without its quotes): backslash, quote and newline
 * escaped, as the exposition format asks. */
void	px_prom_label(struct evbuffer *b, const char *v);

#endif
