/* Dropping root. The kept capabilities are fixed, not derived from the
 * services in the config: a reload may add a transparent service or a port
 * below 1024, and a capability once dropped cannot come back. */
#include "privs.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <libxml/tree.h>

#include "config.h"
#include "log.h"

static const cap_value_t px_kept_caps[] = {
	CAP_NET_ADMIN,		/* IP_TRANSPARENT, SO_MARK, conntrack */
	CAP_NET_RAW,		/* IP_TRANSPARENT on older kernels */
	CAP_NET_BIND_SERVICE,	/* a reload that adds a port < 1024 */
};
#define PX_NKEPT	(sizeof(px_kept_caps) / sizeof(px_kept_caps[0]))

void
px_privs_parse(struct px_config *c, const struct _xmlNode *n,
    struct px_cfgerr *e)
{
	char *name = px_attr(n, "name"), *group = px_attr(n, "group");
	struct passwd *pw;
	struct group *gr;

	/* Main thread only (load and reload): getpwnam's static buffer is
	 * not shared with anyone. */
	errno = 0;
	if (name == NULL || (pw = getpwnam(name)) == NULL) {
		px_cfg_error(e, n, "user name=\"%s\": no such user%s%s",
		    name ? name : "", errno ? ": " : "",
		    errno ? strerror(errno) : "");
		goto out;
	}
	if (pw->pw_uid == 0) {
		px_cfg_error(e, n, "user name=\"%s\": is root; name an "
		    "unprivileged user or leave <user> out", name);
		goto out;
	}
	c->uid = pw->pw_uid;
	c->gid = pw->pw_gid;
	if (group != NULL) {
		errno = 0;
		if ((gr = getgrnam(group)) == NULL) {
			px_cfg_error(e, n, "user group=\"%s\": no such group",
			    group);
			goto out;
		}
		if (gr->gr_gid == 0) {
			px_cfg_error(e, n, "user group=\"%s\": is root's group",
			    group);
			goto out;
		}
		c->gid = gr->gr_gid;
	}
	c->user_line = xmlGetLineNo((xmlNode *)n);
	if ((c->user = strdup(name)) == NULL)
		px_cfg_error(e, n, "out of memory");
out:
	xmlFree(name);
	xmlFree(group);
}

bool
px_privs_will_drop(const struct px_config *c)
{
	return c->user != NULL && geteuid() == 0;
}

/* Capabilities and setuid act on the calling thread only (glibc fixes up
 * the uid on every thread, not the capability sets): refuse to run with
 * threads that would keep root's. */
static int
px_privs_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int
px_privs_drop(const struct px_config *c, FILE *errout)
{
	cap_value_t cap;
	cap_t caps;
	size_t i;
	int rc;

	if (c->user == NULL)
		return 0;	/* px_privs_log() warns when that is root */
	if (geteuid() != 0) {
		/* As nginx does with its user directive: only root can
		 * switch, anyone else runs as it is (a laptop, a unit with
		 * User=). */
		if (geteuid() != c->uid)
			fprintf(errout, "proxyd: warning: %s:%ld: not started "
			    "as root: <user name=\"%s\"> ignored, running as "
			    "uid %ld\n", c->path, c->user_line, c->user,
			    (long)geteuid());
		return 0;
	}
	if (px_privs_threads() != 1) {
		fprintf(errout, "proxyd: cannot drop privileges: more than one "
		    "thread runs\n");
		return -1;
	}
	/* Cut the bounding set first (that needs CAP_SETPCAP, which goes
	 * with the uid): nothing exec'd later regains what is not kept. */
	for (cap = 0; cap <= CAP_LAST_CAP; cap++) {
		bool kept = false;

		for (i = 0; i < PX_NKEPT; i++)
			kept |= px_kept_caps[i] == cap;
		if (!kept && CAP_IS_SUPPORTED(cap) && cap_drop_bound(cap) == -1) {
			fprintf(errout, "proxyd: cannot drop capability %d from "
			    "the bounding set: %s\n", (int)cap, strerror(errno));
			return -1;
		}
	}
	if (initgroups(c->user, c->gid) == -1 ||
	    setresgid(c->gid, c->gid, c->gid) == -1) {
		fprintf(errout, "proxyd: cannot switch to group %ld: %s\n",
		    (long)c->gid, strerror(errno));
		return -1;
	}
	/* Keep the permitted set across the uid change, then trim it. */
	if (prctl(PR_SET_KEEPCAPS, 1L, 0L, 0L, 0L) == -1 ||
	    setresuid(c->uid, c->uid, c->uid) == -1) {
		fprintf(errout, "proxyd: cannot switch to user %s: %s\n",
		    c->user, strerror(errno));
		return -1;
	}
	if ((caps = cap_init()) == NULL)
		return -1;
	rc = cap_set_flag(caps, CAP_PERMITTED, (int)PX_NKEPT, px_kept_caps,
	    CAP_SET) == -1 || cap_set_flag(caps, CAP_EFFECTIVE, (int)PX_NKEPT,
	    px_kept_caps, CAP_SET) == -1 || cap_set_proc(caps) == -1 ? -1 : 0;
	cap_free(caps);
	if (rc == -1 || prctl(PR_SET_KEEPCAPS, 0L, 0L, 0L, 0L) == -1 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0L, 0L, 0L) == -1 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) == -1) {
		fprintf(errout, "proxyd: cannot set capabilities: %s\n",
		    strerror(errno));
		return -1;
	}
	/* Prove it, as OpenBSD daemons do: root must not come back. */
	if (setuid(0) != -1 || seteuid(0) != -1 || setgid(0) != -1) {
		fprintf(errout, "proxyd: still able to regain root after "
		    "dropping privileges\n");
		return -1;
	}
	return 0;
}

void
px_privs_log(const struct px_config *c)
{
	cap_t caps = cap_get_proc();
	char *text = caps ? cap_to_text(caps, NULL) : NULL;

	if (c->user != NULL && getuid() == c->uid)
		px_log(LOG_INFO, 0, "running as user %s (uid %ld, gid %ld), "
		    "capabilities %s, no_new_privs", c->user, (long)getuid(),
		    (long)getgid(), text ? text : "?");
	else if (getuid() == 0)
		px_log(LOG_WARNING, 0, "running as root with every capability: "
		    "add <user name=\"proxyd\"/> to %s to drop them after "
		    "startup", c->path);
	cap_free(text);
	cap_free(caps);
}
