/* Several services on one listen address: which one takes a connection,
 * by the most specific match of its client and its destination against
 * each service's <clients> and <servers> (CIDRs and zones, in prefix
 * trees; a service whose <servers ports=> leaves the destination port out
 * does not select the connection), and the load-time check that every
 * pair of regions, on every port, has one answer. Config builds the
 * groups; workers and --trace choose with them. */
#ifndef PX_DISPATCH_H
#define PX_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "zone.h"

struct px_service;

enum px_dim { PX_DIM_CLIENT = 0, PX_DIM_SERVER = 1 };

/* Services on one listen address: a bound on the dispatch's stack. */
#define PX_GROUP_MAX	256

struct px_svcset {
	uint16_t	*idx;		/* into the group's services */
	size_t		 n;
};

/* The services on one listening address. */
struct px_group {
	struct px_service **svc;
	size_t		 n;
	struct px_ptree	 tree[2];	/* CIDRs per end; val: into sets */
	struct px_svcset *sets[2];
	size_t		 nsets[2];
	struct px_svcset *zrefs[2];	/* per zone: who names it; NULL: none */
};

/* Builds g->tree and friends from its services. 0, or -1 (memory). */
int	px_group_build(struct px_group *g, const struct px_zones *zs);
void	px_group_free(struct px_group *g, size_t nzones);
/* Specificity of each service (spec[g->n]) for one end. */
void	px_group_specs(const struct px_group *g, const struct px_zones *zs,
	    enum px_dim dim, const struct px_key *k,
	    const struct px_zone_path *zp, int16_t *spec);
/* Takes the services whose <servers ports=> leaves port out out of
 * spec (a server end's specificities): they do not select it. */
void	px_group_ports(const struct px_group *g, uint16_t port, int16_t *spec);
/* The service both ends select: its index; -1 when none matches both,
 * -2 when no one is at least as specific as all others on both ends
 * (tie, may be NULL: two such candidates). */
int	px_group_choose(const struct px_group *g, const int16_t *cspec,
	    const int16_t *sspec, int tie[2]);
/* Every pair of end regions a shared group can tell apart has a choice:
 * otherwise reports both services' file:line and returns -1. */
int	px_group_check(const struct px_group *g, const struct px_zones *zs,
	    struct px_cfgerr *e);

#endif
