/* File policy by content: a service's <content type="..." action="..."/>
 * rules, and the judge that sniffs a body's first bytes with libmagic
 * (MIME type, not the name the peer gives it) and picks the first rule
 * that matches. Analyser-neutral: an analyser hands it bytes (the start
 * of an HTTP body, an FTP or R66 file), holds them until the verdict, and
 * logs and acts on it. Like scan.c it knows no px_config. */
#ifndef PX_SNIFF_H
#define PX_SNIFF_H

#include <stdbool.h>
#include <stddef.h>

struct _xmlNode;
struct px_cfgerr;
struct evbuffer;

/* What libmagic is given: the first bytes of a transfer, or all of it
 * when shorter. Its magic tests look at offsets within the first few
 * hundred bytes for the types a policy names (ELF, PE, archives). */
#define PX_SNIFF_BYTES		4096

/* One type of a <content> element: "major/minor", or "major/" for a
 * type ending in a star (every minor type: a prefix). */
struct px_content_type {
	char			 name[96];
	bool			 prefix;
};

/* The user= and group= of a <content> or a <scan>: names, groups, or
 * "*" (any: anyone proven). All empty: everyone, proven or not. */
struct px_who_set {
	char			**users, **groups;
	size_t			 nusers, ngroups;
	bool			 any;
};

/* One <content>: any of its types, then its action; with user= or
 * group=, only for those users. */
struct px_content_rule {
	struct px_content_type	*types;
	size_t			 ntypes;
	struct px_who_set	 who;
	bool			 deny;
	char			 ref[280];	/* "FILE:LINE", for rule= */
};

/* A service's <content> elements in file order (first match wins); none:
 * nothing is sniffed. */
struct px_content_policy {
	struct px_content_rule	*v;
	size_t			 n;
};

/* The verdict on a transfer's first bytes. */
struct px_content_verdict {
	bool			 deny;
	char			 type[96];	/* as libmagic said it */
	char			 error[96];	/* libmagic's failure, or "" */
	/* The rule that decided; NULL: none matched (accepted), or
	 * libmagic failed (denied: fail closed, type "unknown", error
	 * says why). */
	const struct px_content_rule *rule;
};

/* Reads every <content> child of a service's root element (file: the
 * service file, for the rules' ref). 0, or -1 after reporting. */
int	px_content_policy_load(struct px_content_policy *p,
	    const struct _xmlNode *service, const char *file,
	    struct px_cfgerr *e);
void	px_content_policy_free(struct px_content_policy *p);

/* The first rule naming mime (case-insensitive; a type ending in a star
 * matches every minor type of its major one), or NULL. Pure. */
const struct px_content_rule *px_content_match(
	    const struct px_content_policy *p, const char *mime);

/* Who a transfer is for, as the analyser knows it (this layer knows no
 * authentication): the user's name and a test of its groups. */
struct px_content_who {
	const char	*user;
	bool		(*in_group)(const void *arg, const char *group);
	const void	*arg;
};
/* Reads n's user= and group= into w; an element that has either on a
 * service (its root) with no <auth> nor <tls identity=> is an error at
 * its line. 0, or -1 after reporting. */
int	px_who_set_load(struct px_who_set *w, const struct _xmlNode *n,
	    const struct _xmlNode *service, struct px_cfgerr *e);
void	px_who_set_free(struct px_who_set *w);
/* Whether w takes who (NULL: nobody proven): true for every who when w
 * names nobody. */
bool	px_who_set_match(const struct px_who_set *w,
	    const struct px_content_who *who);

/* The same for a transfer of who (NULL: nobody proven): a rule with
 * user= or group= is passed by unless who is one of them. */
const struct px_content_rule *px_content_match_for(
	    const struct px_content_policy *p, const char *mime,
	    const struct px_content_who *who);

/* Sniffs buf (n bytes: the first PX_SNIFF_BYTES of a transfer, fewer
 * only when it is shorter) with this thread's magic and judges it by p.
 * The caller's thread: the magic of each thread is its own (libmagic is
 * not thread-safe), loaded at its first use. */
void	px_content_judge(const struct px_content_policy *p, const void *buf,
	    size_t n, struct px_content_verdict *v);
void	px_content_judge_for(const struct px_content_policy *p,
	    const struct px_content_who *who, const void *buf, size_t n,
	    struct px_content_verdict *v);

/* A transfer's first bytes gathered as they pass: the analyser copies
 * each run into it until it is full or the transfer ends, then judges. */
struct px_sniff {
	size_t			 n;
	unsigned char		 buf[PX_SNIFF_BYTES];
};

/* Copies what is still missing, up to want (at most PX_SNIFF_BYTES), of
 * the first n bytes of src (not drained). True once it has want. */
bool	px_sniff_add(struct px_sniff *sn, struct evbuffer *src, size_t n,
	    size_t want);

/* Frees this thread's magic (a worker's end). */
void	px_sniff_worker_exit(void);

/* ---- counters: proxyd_content_total{service,action} ---------------- */
/* One judged transfer: action accept or deny. Any thread. */
void	px_content_count(const char *service, const char *action);
void	px_content_metrics(struct evbuffer *b);

#endif
