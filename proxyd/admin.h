/* Status and Prometheus metrics over HTTP on a loopback address. Runs on the
 * main thread's event base, never on a worker: it only reads the workers'
 * single-writer counters. */
#ifndef PX_ADMIN_H
#define PX_ADMIN_H

#include <stdint.h>

struct event_base;
struct px_config;

struct px_reload_stats {
	uint64_t	ok;
	uint64_t	failed;
};

int	px_admin_start(struct event_base *base, const struct px_config *cfg,
	    const struct px_reload_stats *reloads);
void	px_admin_stop(void);

#endif
