/* proxyd --check --trace (trace.c). */
#ifndef PX_TRACE_H
#define PX_TRACE_H

#include <stdio.h>

struct px_config;

/* Prints, for each listener that picks servers, what a connection from
 * client (an address) to dest (ADDR:PORT) would meet. 0; 1 for bad
 * arguments; 2 if the trees and the scan disagree. */
int	px_trace(const struct px_config *c, const char *client,
	    const char *dest, FILE *out);

#endif
