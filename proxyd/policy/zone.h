/* Zones (named address sets) and the address lists of <clients> and
 * <servers> that name CIDRs and zones, with <servers>' ports=; the choice
 * among the services that share a listening socket is dispatch.h's, on
 * these trees. Everything is built at config load and read-only after:
 * workers share it without locks.
 *
 * Matching is by prefix tree, never by scanning a list: an address walks
 * one tree of every zone's prefixes (its zone is the deepest hit) and, per
 * shared listener, one tree of the services' CIDRs; the zones met on the
 * way index the services that name them. A service matches an address
 * with a specificity: the length of the longest prefix of its list that
 * holds the address (for zone:NAME, the prefix of NAME itself; an absent
 * list holds everything at 0). The service that is at least as specific
 * as every other on both ends takes the connection (among those whose
 * ports= holds the destination port); a configuration where no such
 * service exists for some connection is refused at load. */
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
	int32_t		*byname;	/* open addressing by name hash: zone
					   index, -1 empty; cap a power of 2 */
	size_t		 byname_cap;
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

/* One range of ports= ("2100-2199"; "21" is 21-21). */
struct px_portrange {
	uint16_t	 lo, hi;
};

/* allow= of <clients> or <servers>: CIDRs and zone:NAME; and ports= of
 * <servers>: the destination ports it lets through. */
struct px_addrlist {
	bool		 set;		/* the element is there */
	long		 line;
	struct px_cidr	*cidrs;
	size_t		 ncidrs;
	int32_t		*zones;
	size_t		 nzones;
	struct px_portrange *ports;	/* sorted, disjoint, not adjacent */
	size_t		 nports;	/* 0: any port */
};

/* The zones holding k's zone, from it outwards, each with the prefix
 * length that counts for it: its own prefix on the path or, for a zone
 * without addresses, that of the zone inside it. Returns how many. */
size_t	px_zone_chain(const struct px_zones *zs, const struct px_zone_path *zp,
	    int32_t *zone, uint8_t *len);
/* "addr/prefix" for messages. */
void	px_cidr_str(const struct px_cidr *c, char *buf, size_t size);

/* allow= and ports= of n (allow= absent: every address, at /0). 0, or
 * -1 after reporting file:line. */
int	px_addrlist_load(struct px_addrlist *l, const struct _xmlNode *n,
	    const struct px_zones *zs, struct px_cfgerr *e);
/* Whether l's ports= holds port (no ports=, or no list: any port). */
bool	px_addrlist_port_ok(const struct px_addrlist *l, uint16_t port);
void	px_addrlist_free(struct px_addrlist *l);
/* Specificity of k (whose zone path is zp) in l: -1 when no entry holds
 * it. The plain scan, for --trace and to check the trees against; what
 * decided goes to why (may be NULL). */
int	px_addrlist_spec(const struct px_addrlist *l, const struct px_zones *zs,
	    const struct px_key *k, const struct px_zone_path *zp,
	    char *why, size_t whylen);

#endif
