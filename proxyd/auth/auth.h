/* Authentication: the daemon file's <authenticators> (a Kerberos keytab
 * for GSSAPI, an LDAP directory for passwords and groups), a service's
 * <auth>, and the checks themselves, which run on a few auth threads fed
 * by a small queue: a worker never waits on a directory or a replay
 * cache. A check's answer comes back to the worker that asked through its
 * box (struct px_auth_box: a lock-free stack and the worker's wakeup), and
 * runs there, on the worker's thread, as any of its events would.
 *
 * Identities: a Kerberos principal becomes the user with its realm
 * stripped ("alice@EXAMPLE.TEST" is "alice"), so that one name works in
 * user= whichever method proved it; an LDAP user is the name it typed.
 * Groups come from the LDAP authenticator of the service's <auth>: the
 * values of group-attribute (memberOf) on the user's entry, read with the
 * same search that finds its DN, and cached with cache=. */
#ifndef PX_AUTH_H
#define PX_AUTH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct _xmlNode;
struct px_cfgerr;
struct evbuffer;

enum px_authn_kind {
	PX_AUTHN_KERBEROS = 0,
	PX_AUTHN_LDAP,
};

/* How a client proved who it is (the log's and audit's method=). */
enum px_auth_method {
	PX_AUTH_NEGOTIATE = 0,	/* Kerberos through GSSAPI/SPNEGO */
	PX_AUTH_BASIC,		/* a password, checked by LDAP bind */
	PX_AUTH_PASSWORD,	/* the same from an FTP client's USER/PASS */
	PX_AUTH_CERTIFICATE,	/* a verified TLS client certificate (no
				 * check here: the TLS layer's) */
	PX_AUTH_METHODS
};

/* A check's outcome: the metric's result= label, px_auth_result_name. */
enum px_auth_result {
	PX_AUTH_OK = 0,
	PX_AUTH_BAD_PASSWORD,	/* the bind as the user failed */
	PX_AUTH_NO_USER,	/* the filter found no entry (or several) */
	PX_AUTH_BAD_TOKEN,	/* GSSAPI refused the token */
	PX_AUTH_DIRECTORY_DOWN,	/* could not reach or bind the directory */
	PX_AUTH_TIMEOUT,	/* timeout= passed, queue wait included */
	PX_AUTH_BUSY,		/* the queue was full */
	PX_AUTH_ERROR,		/* anything else (out of memory, a bad reply) */
	PX_AUTH_RESULTS
};

/* The results a client cannot be blamed for: answered 503, not 407. */
static inline bool
px_auth_result_unavailable(enum px_auth_result r)
{
	return r == PX_AUTH_DIRECTORY_DOWN || r == PX_AUTH_TIMEOUT ||
	    r == PX_AUTH_BUSY || r == PX_AUTH_ERROR;
}

struct px_auth_cache;

/* One authenticator, shared by the configuration that loaded it and the
 * checks under way (refs): a reload makes new ones. */
struct px_authn {
	atomic_uint		 refs;
	enum px_authn_kind	 kind;
	char			*name;
	unsigned		 slot;		/* its row of the counters */
	/* kerberos */
	char			*keytab;
	char			*service;	/* "HTTP" */
	/* ldap */
	char			*url;
	char			*base_dn;
	char			*bind_dn;	/* NULL: anonymous search */
	char			*bind_pw;	/* read from bind-password-file */
	char			*user_filter;	/* "(uid=%u)" */
	char			*group_attr;	/* NULL: no groups */
	uint64_t		 cache_ms;	/* 0: nothing cached */
	uint64_t		 timeout_ms;
	struct px_auth_cache	*cache;		/* users checked lately */
	unsigned		 busy;		/* auth threads on it (queue mutex) */
};

/* <authenticators>: in file order. */
struct px_authns {
	struct px_authn	**a;
	size_t		  n;
};

/* Loads <authenticators> (NULL: none): every file it names is read now
 * (a keytab that cannot be read, a password file that is missing, a bad
 * url: errors at their line). 0, or -1 after reporting. */
int	px_authns_load(struct px_authns *as, const struct _xmlNode *n,
	    const char *daemon_file, struct px_cfgerr *e);
void	px_authns_free(struct px_authns *as);
const struct px_authn *px_authns_find(const struct px_authns *as,
	    const char *name);

/* A service's <auth>: which authenticators, which methods, and whether a
 * request without credentials is refused. */
struct px_auth_use {
	struct px_authn	*krb;		/* negotiate; a reference, or NULL */
	struct px_authn	*ldap;		/* basic and groups; or NULL */
	bool		 methods[PX_AUTH_METHODS];
	bool		 required;
	/* basic-without-tls="yes": Basic over a plain client connection */
	bool		 basic_plain;
	char		*realm;		/* Basic's realm= */
	long		 line;
};

/* Loads <auth> (NULL: none, *out NULL) against the daemon's
 * authenticators. 0, or -1 after reporting. */
int	px_auth_use_load(struct px_auth_use **out, const struct _xmlNode *n,
	    const struct px_authns *as, struct px_cfgerr *e);
void	px_auth_use_free(struct px_auth_use *u);

/* Who a client proved to be. groups: the directory's values, each ended
 * by a NUL, the list by an empty one (NULL: none known). */
struct px_auth_id {
	char			 user[128];
	enum px_auth_method	 method;
	char			*groups;
	size_t			 groups_len;
};

void	px_auth_id_clear(struct px_auth_id *id);
/* g is one of id's groups: its whole value (a DN, compared without case)
 * or the value of its first RDN ("ops" for "cn=ops,dc=example,dc=test"). */
bool	px_auth_id_in_group(const struct px_auth_id *id, const char *g);
const char *px_auth_method_name(enum px_auth_method m);
/* " user=NAME auth=METHOD" for a log line (the name escaped as the log
 * escapes a peer's bytes) into buf; "" for NULL (nobody proven). */
void	px_auth_id_log(const struct px_auth_id *id, char *buf, size_t len);
struct px_content_who;
/* id as the <content> rules see it (sniff.h), in *w: w, or NULL for
 * NULL (nobody proven). */
const struct px_content_who *px_auth_content_who(const struct px_auth_id *id,
	    struct px_content_who *w);
const char *px_auth_result_name(enum px_auth_result r);

/* ---- checks ------------------------------------------------------------ */

struct px_auth_req;
typedef void (*px_auth_done_cb)(struct px_auth_req *r, void *arg);

/* Where the answers for one thread's requests land: a lock-free stack the
 * auth threads push onto, and the owner's wakeup, called for the first
 * answer on an empty stack. The owner drains it on its own thread. */
struct px_auth_box {
	_Atomic(struct px_auth_req *) head;
	void	(*wake)(void *arg);
	void	*wake_arg;
};

/* A check under way. The asker owns it: it reads the result in its
 * callback, and frees it there (px_auth_req_free) or later; one it no
 * longer wants (its session ended) it cancels, and the box frees it. */
struct px_auth_req {
	struct px_auth_req	*next;		/* in the queue, then the box */
	struct px_auth_box	*box;
	px_auth_done_cb		 done;
	void			*arg;
	atomic_bool		 cancelled;
	uint64_t		 session;	/* for the log line */
	uint64_t		 deadline_us;	/* monotonic */
	enum px_auth_method	 method;
	struct px_authn		*an;		/* the one that checks; ref */
	struct px_authn		*groups_an;	/* after negotiate: groups; ref */
	/* in: basic's user and password, negotiate's token, or the user a
	 * certificate proved (certificate: only its groups are read) */
	char			 user[128];
	unsigned char		*secret;
	size_t			 secret_len;
	/* out */
	enum px_auth_result	 result;
	char			 reason[160];
	struct px_auth_id	 id;
	unsigned char		*reply;		/* negotiate's answer token */
	size_t			 reply_len;
};

/* A request for method against an (and groups_an after a Kerberos user
 * is known; may be NULL). secret is copied. NULL: out of memory. */
struct px_auth_req *px_auth_req_new(enum px_auth_method method,
	    struct px_authn *an, struct px_authn *groups_an, const char *user,
	    const void *secret, size_t secret_len);
void	px_auth_req_free(struct px_auth_req *r);
/* Queues r for an auth thread (started at the first call); its callback
 * runs on box's owner's thread once answered. When the queue is full, r
 * is answered PX_AUTH_BUSY through the box all the same. */
void	px_auth_submit(struct px_auth_req *r, struct px_auth_box *box,
	    px_auth_done_cb done, void *arg);
/* The asker no longer wants r: freed once answered, its callback not run.
 * From the box owner's thread. */
void	px_auth_cancel(struct px_auth_req *r);
/* Runs the callbacks of the answers in box (the owner's thread). */
void	px_auth_box_drain(struct px_auth_box *box);
/* The owner is gone (its thread joined): no answer reaches box once this
 * returns (a check still running or queued for it is freed when done),
 * and those already in it are freed without their callbacks. Then box's
 * memory and its wakeup may go. */
void	px_auth_box_close(struct px_auth_box *box);

/* proxyd_auth_total{authenticator,method,result} for /metrics. */
void	px_auth_metrics(struct evbuffer *b);
/* Counts one outcome (the auth threads; tests). */
void	px_auth_count(const struct px_authn *an, enum px_auth_method m,
	    enum px_auth_result r);

/* ---- pure helpers (auth_ldap.c, auth_cache.c; unit tested) ------------ */

/* tmpl with every %u replaced by user escaped for an LDAP filter (RFC
 * 4515: '*', '(', ')', '\\' and NUL as \XX) and %% by '%'. -1 when it
 * does not fit in size. */
int	px_ldap_filter(const char *tmpl, const char *user, size_t ulen,
	    char *out, size_t size);

/* A cache of users checked lately: per user, a salted hash of the
 * password that bound (basic) and its groups, each until its expiry. At
 * most max entries; the oldest goes first. Safe across threads. */
struct px_auth_cache *px_auth_cache_new(size_t max);
void	px_auth_cache_free(struct px_auth_cache *c);
/* Stores user's groups and its name as the directory spells it (canon)
 * (and, when pw is not NULL, that pw is its password) until now_ms +
 * ttl_ms. */
void	px_auth_cache_put(struct px_auth_cache *c, const char *user,
	    const char *canon, const void *pw, size_t pwlen,
	    const char *groups, size_t glen, uint64_t now_ms, uint64_t ttl_ms);
/* 1: user is cached, unexpired (and pw, when given, is the one stored),
 * its groups copied to *groups (malloc'd, NULL for none), its name as
 * stored to canon (csize bytes; NULL: not wanted). 0: not known.
 * -1: pw given and not the one stored (the entry is dropped: the
 * directory decides again). */
int	px_auth_cache_get(struct px_auth_cache *c, const char *user,
	    const void *pw, size_t pwlen, uint64_t now_ms, char **groups,
	    size_t *glen, char *canon, size_t csize);
size_t	px_auth_cache_count(struct px_auth_cache *c);

/* The Kerberos principal's user: without its "@REALM" when REALM is realm
 * (the acceptor's own), else the whole principal. -1: it does not fit. */
int	px_auth_principal_user(const char *principal, size_t len,
	    const char *realm, char *out, size_t size);

/* auth_ldap.c / auth_krb.c: one check, on an auth thread. */
void	px_auth_ldap_check(struct px_auth_req *r);
void	px_auth_ldap_groups(struct px_authn *an, struct px_auth_req *r);
void	px_auth_krb_check(struct px_auth_req *r);
/* Load-time checks: 0, or -1 with *why. */
int	px_auth_ldap_url_ok(const char *url, const char **why);
int	px_auth_krb_keytab_ok(const char *path, const char *service,
	    char *why, size_t size);

uint64_t px_auth_now_us(void);

/* A file named by a policy (rel, relative to file's directory): malloc'd,
 * NULL when out of memory. */
char	*px_auth_path(const char *file, const char *rel);
/* The first line of a password file, without its newline: malloc'd, or
 * NULL with *why (a missing file, an empty line). */
char	*px_auth_read_secret(const char *path, const char **why);

#endif
