/* The <ftp> policy of a service: built once by ftp_policy_load() on the
 * main thread, read-only afterwards (workers share it), and the decisions
 * the control channel asks of it. Nothing here touches a session. */
#ifndef FTP_POLICY_H
#define FTP_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct _xmlNode;
struct px_cfgerr;

/* client-data= and server-data=, in the order of their names. */
enum ftp_mode {
	FTP_KEEP = 0,
	FTP_ACTIVE,
	FTP_PASSIVE,
};

struct ftp_rule {
	char	*name;		/* verb, user name or path pattern */
	bool	 accept;
};

struct ftp_policy {
	enum ftp_mode	 client_data, server_data;
	uint16_t	 port_lo, port_hi;	/* 0, 0: any */
	bool		 strict;
	uint64_t	 max_line, max_user, max_pass;
	uint64_t	 timeout_ms;
	struct ftp_rule	*cmds;
	size_t		 ncmds;
	int		 cmd_default;		/* "*": 1 accept, 0 deny */
	struct ftp_rule	*users;
	size_t		 nusers;
	struct ftp_rule	*paths;
	size_t		 npaths;
};

/* The analyser's policy_load and policy_free (struct px_analyser): sec is
 * the <ftp> element, NULL for the defaults. 0, or -1 after reporting
 * file:line through px_cfg_error(). */
int	ftp_policy_load(const struct _xmlNode *sec, void **pol,
	    struct px_cfgerr *e);
void	ftp_policy_free(void *pol);

/* verb: upper case, as ftp_cmd_parse() leaves it. */
bool	ftp_cmd_allowed(const struct ftp_policy *p, const char *verb);
/* The argument of USER. */
bool	ftp_user_allowed(const struct ftp_policy *p, const char *user);
/* The argument of a command on a path. */
bool	ftp_path_allowed(const struct ftp_policy *p, const char *path);

#endif
