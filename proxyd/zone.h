/* Zones (named address sets), the address lists of <clients> and <servers>
 * that name CIDRs and zones, and the dispatch of one listening socket
 * among the services that share it. Everything is built at config load
 * and read-only after: workers share it without locks.
 *
 * Matching is by prefix tree, never by scanning a list: an address walks
 * one tree of every zone's prefixes (its zone is the deepest hit) and, per
 * shared listener, one tree of the services' CIDRs; the zones met on the
 * way index the services that name them. A service matches an address
 * with a specificity: the length of the longest prefix of its list that
 * holds the address (for zone:NAME, the prefix of NAME itself; an absent
 * list holds everything at 0). The service that is at least as specific
 * as every other on both ends takes the connection; a configuration where
 * no such service exists for some connection is refused at load. */
#ifndef PX_ZONE_H
#define PX_ZONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "parse.h"

struct _xmlNode;
struct px_cfgerr;
struct px_service;

/* An address, or a region of addresses (a prefix), as tree key. */
struct px_key {
	uint8_t		addr[16];
	uint8_t		v6;		/* 0: IPv4 (v4-mapped v6 too), 1: IPv6 */
	uint8_t		len;		/* prefix bits that count */
};

void	px_key_from_sockaddr(struct px_key *k, const struct sockaddr *sa);
void	px_key_from_cidr(struct px_key *k, const struct px_cidr *c);

/* A binary trie, one root per family; node values are the owner's. */
struct px_ptree_node {
	int32_t		child[2];	/* 0: none (the roots are 0 and 1) */
	int32_t		val;		/* -1: none */
};

struct px_ptree {
	struct px_ptree_node *node;
	size_t		 n, cap;
};

/* The longest zone nesting an address may walk through. */
#define PX_PATH_MAX	129

int	px_ptree_init(struct px_ptree *t);
void	px_ptree_free(struct px_ptree *t);
/* The node of prefix c, made if new: its index, or -1 (out of memory). */
int32_t	px_ptree_insert(struct px_ptree *t, const struct px_cidr *c);
/* The valued nodes on k's path (prefixes holding k, up to k->len), from
 * the shortest: their values and prefix lengths. Returns how many. */
size_t	px_ptree_path(const struct px_ptree *t, const struct px_key *k,
	    int32_t *vals, uint8_t *lens);

struct px_zone {
	char		*name;
	int32_t		 parent;	/* -1: top level */
	long		 line;
	struct px_cidr	*cidrs;
	size_t		 ncidrs;
};

struct px_zones {
	struct px_zone	*z;
	size_t		 n;
	struct px_ptree	 tree;		/* every zone prefix; val: zone index */
};

/* The zones holding an address, from the outermost prefix in. */
struct px_zone_path {
	int32_t		 zone[PX_PATH_MAX];
	uint8_t		 len[PX_PATH_MAX];
	size_t		 n;
};

/* <zones> of the daemon file (n may be NULL: no zones). 0, or -1 after
 * reporting file:line. */
int	px_zones_load(struct px_zones *zs, const struct _xmlNode *n,
	    struct px_cfgerr *e);
void	px_zones_free(struct px_zones *zs);
int32_t	px_zones_find(const struct px_zones *zs, const char *name);
void	px_zones_path(const struct px_zones *zs, const struct px_key *k,
	    struct px_zone_path *out);
/* The most specific zone of the path, -1 for none. */
int32_t	px_zone_path_zone(const struct px_zone_path *p);
const char *px_zone_name(const struct px_zones *zs, int32_t z);

/* allow= of <clients> or <servers>: CIDRs and zone:NAME. */
struct px_addrlist {
	bool		 set;		/* the element is there */
	long		 line;
	struct px_cidr	*cidrs;
	size_t		 ncidrs;
	int32_t		*zones;
	size_t		 nzones;
};

int	px_addrlist_load(struct px_addrlist *l, const struct _xmlNode *n,
	    const struct px_zones *zs, struct px_cfgerr *e);
void	px_addrlist_free(struct px_addrlist *l);
/* Specificity of k (whose zone path is zp) in l: -1 when no entry holds
 * it. The plain scan, for --trace and to check the trees against; what
 * decided goes to why (may be NULL). */
int	px_addrlist_spec(const struct px_addrlist *l, const struct px_zones *zs,
	    const struct px_key *k, const struct px_zone_path *zp,
	    char *why, size_t whylen);

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
