/* One helper for the rule lists of every analyser (ftp commands, users and
 * paths; r66 hosts, rules and files; ...): rules are tried in file order,
 * the first with a pattern that matches decides, and what no rule matches
 * gets the list's default. Every list states its default when it is made
 * (px_rules_init), and docs/CONFIG.md lists them. Also the one way to read
 * an action= or a fixed-choice attribute. Built at config load, read-only
 * after: workers share it. */
#ifndef PX_RULES_H
#define PX_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct _xmlNode;
struct px_cfgerr;

enum px_action {
	PX_ACT_ACCEPT = 0,
	PX_ACT_DENY,	/* refused with a protocol-proper answer */
	PX_ACT_ABORT,	/* the connection reset, no answer */
};

/* The actions an element may take, for px_attr_action(). */
#define PX_ACTIONS_AD	((1u << PX_ACT_ACCEPT) | (1u << PX_ACT_DENY))
#define PX_ACTIONS_ADA	(PX_ACTIONS_AD | (1u << PX_ACT_ABORT))

/* What a string no rule matches gets. */
enum px_rules_default {
	PX_DEFAULT_ACCEPT = 0,
	PX_DEFAULT_DENY,
	/* An allow-list: accept while the list is empty (not configured),
	 * deny once it has a rule. */
	PX_DEFAULT_ALLOW_LIST,
};

struct px_rule {
	char		**pats;		/* shell patterns (fnmatch) */
	size_t		  npats;
	enum px_action	  action;
	long		  line;		/* in its policy file */
	char		 *label;	/* label=, NULL: none (px_rule_ref) */
	uint64_t	  arg;		/* the analyser's own value (a size, ...) */
};

struct px_rules {
	struct px_rule	*r;
	size_t		 n;
	enum px_rules_default dflt;
	int		 fnm_flags;	/* for fnmatch(): FNM_CASEFOLD, ... */
};

/* Room for element n of an array grown by this function only, one at a
 * time: it doubles when n is 0 or a power of two, so loading N rules costs
 * O(N), not the O(N^2) of a realloc per element (a policy may hold a
 * hundred thousand). Returns p (moved, maybe) or NULL; p is then intact. */
void	*px_grow(void *p, size_t n, size_t size);

void	px_rules_init(struct px_rules *l, enum px_rules_default dflt,
	    int fnm_flags);
void	px_rules_free(struct px_rules *l);
/* Appends a rule for element n with the patterns of its attribute attr
 * (split on white space when split, else the whole value; each at most
 * 255 bytes) and the given action. The rule, or NULL after reporting
 * file:line (attribute missing or empty, a pattern too long, memory). */
struct px_rule *px_rules_add(struct px_cfgerr *e, struct px_rules *l,
	    const struct _xmlNode *n, const char *attr, bool split,
	    enum px_action action);
/* The action for s, and the rule that decided (NULL: the default). */
enum px_action px_rules_decide(const struct px_rules *l, const char *s,
	    const struct px_rule **hit);
/* The action the default gives this list now. */
enum px_action px_rules_default_action(const struct px_rules *l);
const char *px_action_name(enum px_action a);

/* The longest label= (px_attr_label) and the room px_rule_ref() needs. */
#define PX_LABEL_MAX	64
#define PX_RULE_REF_MAX	320
/* What a deny line prints as rule=: the label of the rule that decided
 * when it has one, else FILE:LINE (FILE: the base name of the policy file
 * path `file`, "-" if NULL); "default" when hit is NULL (no rule matched,
 * the list's default decided). Returns buf. */
const char *px_rule_ref(const struct px_rule *hit, const char *file,
	    char *buf, size_t size);
/* The same for a rule kept outside a px_rules list: its line and label. */
const char *px_rule_ref_at(long line, const char *label, const char *file,
	    char *buf, size_t size);
/* label= of a rule element: a name for its log lines (rule=NAME) in place
 * of file:line. *out gets a copy (free() it) or NULL when absent. 0, or -1
 * after reporting (empty, over PX_LABEL_MAX bytes, or a byte outside
 * letters, digits and "._:/-": deny lines must stay one word). */
int	px_attr_label(struct px_cfgerr *e, const struct _xmlNode *n,
	    char **out);

/* action= of n, one of `allowed` (PX_ACTIONS_*). Absent: an error when
 * required, else *out is left as it is. 0, or -1 after reporting. */
int	px_attr_action(struct px_cfgerr *e, const struct _xmlNode *n,
	    unsigned allowed, bool required, enum px_action *out);
/* An attribute with a fixed set of values (choices, NULL-terminated):
 * *out becomes the index of its value; absent leaves *out. 0, or -1 after
 * reporting "name=\"v\": expected a, b or c". */
int	px_attr_choice(struct px_cfgerr *e, const struct _xmlNode *n,
	    const char *name, const char *const *choices, int *out);

#endif
