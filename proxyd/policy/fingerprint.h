/* A service's <fingerprint> rules: TLS client fingerprints (JA4, see
 * ja4.h) to refuse or to let through, written in the policy
 * (ja4="FP ...") or kept in a list file (list="FILE", one per line), read
 * when the configuration is loaded, so a reload reads it again. Rules
 * are tried in file order, the first match wins; no match lets the
 * client through. Loaded once, then read-only: any worker may match. */
#ifndef PX_FINGERPRINT_H
#define PX_FINGERPRINT_H

#include <stdbool.h>
#include <stddef.h>

#include "rules.h"

struct _xmlNode;
struct px_cfgerr;

struct px_fp_rule {
	char		**fps;		/* exact fingerprints, sorted */
	size_t		  nfps;
	char		**pats;		/* with '*': fnmatch patterns */
	size_t		  npats;
	char		 *list;		/* list=, resolved; NULL: ja4= */
	enum px_action	  action;	/* accept or deny */
	long		  line;		/* of the element, in its policy */
	char		 *label;	/* label=; NULL */
};

struct px_fp_rules {
	struct px_fp_rule *r;
	size_t		   n;
};

/* Appends the rule of <fingerprint> n in the policy file `file` (a
 * relative list= is taken from its directory). 0, or -1 after reporting
 * file:line (the list file's own line for a bad entry in it). */
int	px_fp_load(struct px_cfgerr *e, const struct _xmlNode *n,
	    const char *file, struct px_fp_rules *l);
void	px_fp_free(struct px_fp_rules *l);
/* What the rules are matched against for a ClientHello whose JA4 could
 * not be computed (a hello px_ja4_hello refuses, no memory for it): no
 * fingerprint has it, the pattern "*" matches it, so a catch-all deny
 * still refuses such a client. */
#define PX_FP_UNKNOWN	"-"

/* The first rule that matches ja4 ("" or NULL: PX_FP_UNKNOWN), or NULL. */
const struct px_fp_rule *px_fp_match(const struct px_fp_rules *l,
	    const char *ja4);

#endif
