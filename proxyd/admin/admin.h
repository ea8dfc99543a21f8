/* The admin endpoint: HTTP on a loopback address for /metrics, the status
 * page and its JSON (admin_status.c), and POST /sessions/reset. Runs on
 * the main thread's event base, never on a worker: it reads the workers'
 * single-writer counters without locks, and what it asks of them (end
 * every session, hold their accepts while descriptors run out, copy their
 * sessions for the listing) it asks through worker.h's atomics, each
 * worker doing it on its own thread. */
#ifndef PX_ADMIN_H
#define PX_ADMIN_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct event_base;
struct px_config;

/* Main thread only (the admin runs there too). */
struct px_reload_stats {
	uint64_t	ok;
	uint64_t	failed;
	bool		last_failed;	/* the last attempt did not load */
	time_t		last_time;	/* of the last attempt; 0: none yet */
	time_t		last_ok_time;	/* of the last success; 0: the start */
	/* Why the last attempt failed: its first error (file:line: ...);
	 * "" after a success. */
	char		last_error[256];
};

/* Counts a reload that loaded the configuration (ok) or did not. */
void	px_reload_note(struct px_reload_stats *r, bool ok);
/* Before px_reload_note(r, false): what the status page says of it. */
void	px_reload_note_error(struct px_reload_stats *r, const char *why);

int	px_admin_start(struct event_base *base, const struct px_config *cfg,
	    const struct px_reload_stats *reloads);
void	px_admin_stop(void);
/* A rolling upgrade (core/handover.h). New process: px_admin_start takes
 * this listener (the old one's) instead of binding. Old process: its
 * listener, to pass on (-1: none), and, once passed, accept no more on
 * it (the new process does). */
void	px_admin_use_fd(int fd);
int	px_admin_listen_fd(void);
void	px_admin_pass(void);
/* The new process is gone: accept on it again. */
void	px_admin_unpass(void);

#endif
