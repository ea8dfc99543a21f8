/* r66: the <r66> element of a service (docs/CONFIG.md), read once by
 * r66_policy_load() at config load; workers only read the result. */
#ifndef R66_POLICY_H
#define R66_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct _xmlNode;
struct px_cfgerr;

#define R66_MAX_BLOCK_DEF	(1024 * 1024)
#define R66_MAX_BLOCK_MAX	(16 * 1024 * 1024)

enum r66_action {
	R66_ACCEPT = 0,
	R66_DENY,
	R66_ABORT,
};

struct r66_pat_rule {
	char		**pats;
	size_t		 npats;
	enum r66_action	 action;
	uint64_t	 max_size;	/* <file>: 0 = none */
};

struct r66_pat_list {
	struct r66_pat_rule *r;
	size_t		 n;
};

struct r66_policy {
	bool		 req_block_digest;
	bool		 req_global_digest;
	uint64_t	 max_block;
	unsigned	 modes;		/* bit (1 << mode) */
	bool		 information;
	bool		 test;
	struct r66_pat_list hosts, rules, files;
};

/* The analyser's policy_load and policy_free (struct px_analyser). */
int	r66_policy_load(const struct _xmlNode *sec, void **pol,
	    struct px_cfgerr *e);
void	r66_policy_free(void *pol);
/* ACCEPT, DENY or ABORT for s against a list: an empty list accepts, a
 * list no rule of which matches denies. *max_size (may be NULL) gets the
 * matching rule's limit, 0 for none. */
enum r66_action r66_decide(const struct r66_pat_list *l, const char *s,
	    uint64_t *max_size);

#endif
