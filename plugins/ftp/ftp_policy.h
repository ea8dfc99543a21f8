/* The <ftp> policy of a service: built once by ftp_policy_load() on the
 * main thread, read-only afterwards (workers share it), and the decisions
 * the control channel asks of it. Nothing here touches a session. */
#ifndef FTP_POLICY_H
#define FTP_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quota.h"
#include "rules.h"
#include "sniff.h"
#include "ftp/ftp_proto.h"

struct _xmlNode;
struct px_auth_id;
struct px_cfgerr;
struct px_quota_limit;

/* client-data= and server-data=, in the order of their names. */
enum ftp_mode {
	FTP_KEEP = 0,
	FTP_ACTIVE,
	FTP_PASSIVE,
};

/* One verb of a <command> rule. */
struct ftp_cmd_rule {
	char		 verb[FTP_VERB_MAX + 1];	/* upper case */
	enum px_action	 action;
	long		 line;		/* of its <command> */
	const char	*label;		/* its label=, in labels; NULL */
	/* user=/group= (px_who_set, as <scan>'s), in whos; NULL */
	const struct px_who_set *who;
};

/* <login>: how proxyd logs into the server for a user it authenticated
 * (the service's <auth>): the first whose user=/group= take the user. */
struct ftp_login {
	struct px_who_set who;
	char		*server_user;	/* NULL: the user's own name */
	char		*server_pw;	/* NULL: "proxyd@" if asked */
	bool		 pass_password;	/* the user's own password */
	/* quota-bytes=, quota-transfers=: each user it takes, per day */
	struct px_quota_limit quota;
	long		 line;
};

struct ftp_policy {
	enum ftp_mode	 client_data, server_data;
	uint16_t	 port_lo, port_hi;	/* 0, 0: any */
	bool		 strict;
	bool		 icase;			/* case="insensitive" */
	/* size-mismatch="block": a download whose size differs from the
	 * announced one (150's "(N bytes)", SIZE's 213) is refused. */
	bool		 size_mismatch_block;
	uint64_t	 max_line, max_user, max_pass;
	uint64_t	 timeout_ms;
	struct ftp_cmd_rule *cmds;		/* each verb once */
	size_t		 ncmds;
	/* What no <command> names: <command name="*"> decides when given
	 * (cmd_star); else the standard set (ftp_standard_command) is
	 * accepted and anything else refused. */
	bool		 cmd_star;
	enum px_action	 cmd_default;
	long		 cmd_star_line;
	char		*cmd_star_label;
	char		**labels;		/* of <command>s, owned */
	size_t		 nlabels;
	struct px_rules	 users;			/* PX_DEFAULT_ALLOW_LIST */
	/* Each <user>'s quota-bytes= and quota-transfers=, by its index
	 * in users. */
	struct px_quota_limit *user_quota;
	struct px_rules	 paths;			/* PX_DEFAULT_ACCEPT */
	/* user=/group= of <command>s (their ftp_cmd_rule's who) and
	 * <path>s (a px_rule's arg: index + 1), owned here. */
	struct px_who_set **whos;
	size_t		 nwhos;
	struct ftp_login *logins;
	size_t		 nlogins;
};

/* The analyser's policy_load and policy_free (struct px_analyser): sec is
 * the <ftp> element, NULL for the defaults. 0, or -1 after reporting
 * file:line through px_cfg_error(). */
int	ftp_policy_load(const struct _xmlNode *sec, void **pol,
	    struct px_cfgerr *e);
void	ftp_policy_free(void *pol);

/* Who the rules below are judged for, on this thread (NULL: nobody
 * proven): rules with user= or group= take only that identity. */
void	ftp_policy_who(const struct px_auth_id *id);
/* The <login> for id, NULL: none takes it. */
const struct ftp_login *ftp_login_for(const struct ftp_policy *p,
	    const struct px_auth_id *id);

/* RFC 959, 2389, 2428 and 3659 verbs: what an <ftp> without
 * <command name="*"> accepts when no rule names them. */
bool	ftp_standard_command(const char *verb);
/* verb: upper case, as ftp_cmd_parse() leaves it. */
bool	ftp_cmd_allowed(const struct ftp_policy *p, const char *verb);
/* The argument of USER. */
bool	ftp_user_allowed(const struct ftp_policy *p, const char *user);
/* The daily quota of the <user> rule that accepts user (0s: none). */
void	ftp_user_quota(const struct ftp_policy *p, const char *user,
	    struct px_quota_limit *l);
/* A canonical path (ftp_path_resolve) of a command; home: the login
 * directory. A pattern starting with "/" is matched against path, any
 * other against path relative to home (to "/" outside home). */
bool	ftp_path_allowed(const struct ftp_policy *p, const char *home,
	    const char *path);
/* rule= of a refusal by the three above (the same arguments; user or
 * path for the command's verb): px_rule_ref() of the rule that decided
 * with file the policy file's name, "default" when none did, "builtin"
 * for the TLS verbs no rule may allow. Returns buf. */
const char *ftp_cmd_ref(const struct ftp_policy *p, const char *verb,
	    const char *file, char *buf, size_t size);
const char *ftp_user_ref(const struct ftp_policy *p, const char *user,
	    const char *file, char *buf, size_t size);
const char *ftp_path_ref(const struct ftp_policy *p, const char *home,
	    const char *path, const char *file, char *buf, size_t size);
/* Has <path> rules: arguments are then resolved strictly. */
bool	ftp_path_rules(const struct ftp_policy *p);

#endif
