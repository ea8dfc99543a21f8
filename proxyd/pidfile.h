/* <pidfile>, and `proxyd -s reload|stop`, which signals the daemon that
 * wrote it (as nginx -s does). */
#ifndef PX_PIDFILE_H
#define PX_PIDFILE_H

#include <stdio.h>

struct px_config;

/* Writes our pid to path, refusing when a live proxyd already holds it
 * (a stale file is replaced). A missing directory is made. As root,
 * before the drop to cfg's <user>, that directory and systemd's
 * RuntimeDirectory are given to the user, so that it can remove the file
 * at a clean stop. 0, or -1 after a line on err. */
int	px_pidfile_write(const char *path, const struct px_config *cfg,
	    FILE *err);
/* A rolling upgrade's new process: our pid in path, replacing the old
 * one's. 0, or -1 with errno. */
int	px_pidfile_takeover(const char *path);
/* Removes it if it still holds our pid. */
void	px_pidfile_remove(const char *path);
/* proxyd -s SIGNAL: "reload" checks the configuration first (a broken
 * one is reported and not sent) then sends SIGHUP; "stop" sends SIGTERM
 * and waits for the daemon to exit; "upgrade" checks as reload does, then
 * starts the binary as a new daemon that takes the sessions over
 * (core/handover.h) and returns once it listens. The exit status. */
int	px_pidfile_command(const char *config_path, const char *what);

#endif
