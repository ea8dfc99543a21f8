/* What admin.c (the endpoint, /metrics), admin_status.c (the status
 * page and its JSON) and members.c (the cluster's members) share. Main
 * thread only. */
#ifndef PX_ADMIN_INT_H
#define PX_ADMIN_INT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "json.h"

struct evbuffer;
struct evhttp;
struct event_base;

extern time_t px_started;

/* The exported slots' label sets, service="..",analyser=".." (NULL: not
 * exported), one scrape's worth. */
struct px_scrape {
	unsigned	  nw, nslots;
	char		**labels;
	unsigned	 *an;		/* analyser index of each */
};
int	 px_scrape_open(struct px_scrape *sc);
void	 px_scrape_close(struct px_scrape *sc);
struct px_zone_denial;
/* The workers' denials by zone pair merged, for the scrape's exported
 * slots: how many, in *out (malloc'd, NULL when none; free it). */
size_t	 px_zone_denials(const struct px_scrape *sc,
	    struct px_zone_denial **out);
/* Slot i's counter at offset in struct px_svc_counters, over nw workers. */
uint64_t px_svc_sum(unsigned i, size_t offset, unsigned nw);
/* Worker k's blocks summed, at offset in struct px_svc_counters. */
uint64_t px_worker_sum(unsigned k, size_t offset);
/* The "ha" member of /api/services: the keepalived state, if any. */
void	 px_admin_ha_json(struct evbuffer *b);
/* members.c: cluster/@members-file (NULL: none; a change takes a
 * restart), its members in /metrics and as the "cluster" member. */
int	 px_members_configure(const char *path);
void	 px_members_metrics(struct evbuffer *b);
void	 px_members_json(struct evbuffer *b);
/* The "reload" member: the last reload's time, result and first error. */
void	 px_admin_reload_json(struct evbuffer *b);
/* 200 with body b (freed) as ctype. */
struct evhttp_request;
void	 px_admin_reply(struct evhttp_request *req, const char *ctype,
	    struct evbuffer *b);

/* admin_status.c: its routes (/, /status, /sessions, /api/...), and the
 * throughput sampler the page's chart reads. 0, or -1. */
int	 px_admin_status_start(struct event_base *base, struct evhttp *http);
void	 px_admin_status_stop(void);

#endif
