/* Prometheus text exposition, what the admin's /metrics and the layers
 * that write their own families into it (the quota table) share. */
#ifndef PX_PROM_H
#define PX_PROM_H

struct evbuffer;

/* v as a label value (without its quotes): backslash, quote and newline
 * escaped, as the exposition format asks; a byte that is not part of
 * well-formed UTF-8 (a value from the wire: an FTP user name, an R66
 * host id) as the four characters \xHH, since the format takes UTF-8
 * only and has no escape for a byte. */
void	px_prom_label(struct evbuffer *b, const char *v);

#endif
