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
};

/* The analyser's policy_load and policy_free (struct px_analyser). */
int	r66_policy_load(const struct _xmlNode *sec, void **pol,
	    struct px_cfgerr *e);
void	r66_policy_free(void *pol);
/* The daily quota of the <host> rule that accepts host (0s: none). */
void	r66_host_quota(const struct r66_policy *p, const char *host,
	    struct px_quota_limit *l);

#endif
