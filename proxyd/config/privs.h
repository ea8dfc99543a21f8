/* Privileges: proxyd starts as root to bind and open what it must, then
 * runs as the <user> of proxyd.xml with only the capabilities its sockets
 * need (CAP_NET_ADMIN, CAP_NET_RAW, CAP_NET_BIND_SERVICE) and no way back. */
#ifndef PX_PRIVS_H
#define PX_PRIVS_H

#include <stdbool.h>
#include <stdio.h>

struct px_config;
struct px_cfgerr;
struct _xmlNode;

/* Reads <user name= group=> into c->user/uid/gid; unknown names and root
 * are reported as file:line. */
void	px_privs_parse(struct px_config *c, const struct _xmlNode *n,
	    struct px_cfgerr *e);

/* True when px_privs_drop() will change the uid: c names a user and the
 * process is root. */
bool	px_privs_will_drop(const struct px_config *c);

/* Becomes c->user with the kept capabilities, no_new_privs set and the
 * bounding set cut to the kept ones. Must run before any thread is started
 * (capabilities are per thread). 0 (also when there is nothing to do, with
 * a warning on errout), -1 with the reason on errout. */
int	px_privs_drop(const struct px_config *c, FILE *errout);
/* Logs who proxyd runs as and its capabilities (after px_log_open). */
void	px_privs_log(const struct px_config *c);

#endif
