/* r66: the <r66> element of a service (docs/CONFIG.md), read once by
 * r66_policy_load() at config load; workers only read the result. */
#ifndef R66_POLICY_H
#define R66_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quota.h"
#include "rules.h"

struct _xmlNode;
struct px_cfgerr;

#define R66_MAX_BLOCK_DEF	(1024 * 1024)
#define R66_MAX_BLOCK_MAX	(16 * 1024 * 1024)

/* <partner id= password-file=>: a host id and the key it must present
 * in its Authent (R66-WIRE.md 6.4: MD5 of its password and "GoldenGate",
 * 16 times), computed at load. */
struct r66_partner {
	char		 id[128];
	unsigned char	 key[16];
	long		 line;
};

struct r66_policy {
	bool		 req_block_digest;
	bool		 req_global_digest;
	uint64_t	 max_block;
	unsigned	 modes;		/* bit (1 << mode) */
	long		 mode_line;	/* of <mode>; 0: none, the default */
	bool		 information;
	bool		 test;
	/* size-mismatch="block": a file whose size differs from the one its
	 * request announced is refused (else logged and let through). */
	bool		 size_mismatch_block;
	bool		 size_mismatch_hold;	/* block said: last block held */
	/* <host id>, <rule name>, <file pattern> in file order; a <file>
	 * rule's arg is its max-size (0: none). */
	struct px_rules	 hosts, rules, files;
	/* Each <host>'s quota-bytes= and quota-transfers=, by its index in
	 * hosts. */
	struct px_quota_limit *host_quota;
	/* The host table: with any <partner>, a requester proves its host
	 * id to proxyd before its Authent goes on. */
	struct r66_partner *partners;
	size_t		 npartners;
};

/* The analyser's policy_load and policy_free (struct px_analyser). */
int	r66_policy_load(const struct _xmlNode *sec, void **pol,
	    struct px_cfgerr *e);
void	r66_policy_free(void *pol);
/* The key an R66 partner with password pw presents (R66-WIRE.md 6.4). */
void	r66_password_key(const char *pw, size_t len, unsigned char key[16]);
const struct r66_partner *r66_partner_find(const struct r66_policy *p,
	    const char *id);

/* The daily quota of the <host> rule that accepts host (0s: none). */
void	r66_host_quota(const struct r66_policy *p, const char *host,
	    struct px_quota_limit *l);

#endif
