/* Logging. Worker threads push formatted lines into their own lock-free
 * single-producer ring; one log thread drains the rings and writes to
 * stderr, a file or syslog, so a slow disk never stalls a worker. Threads
 * without a ring (main, admin) write directly under a mutex: they are off
 * the request path. */
#ifndef PX_LOG_H
#define PX_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>


struct px_log_ring;

/* Where log lines go (log/@target). */
enum px_log_target {
	PX_LOG_STDERR = 0,
	PX_LOG_SYSLOG,
	PX_LOG_FILE,
	PX_LOG_JOURNAL,		/* systemd-journald, native fields */
};

int	px_log_open(enum px_log_target target, const char *file, int level);
/* Switches target/level (SIGHUP); also reopens a file for log rotation. */
int	px_log_reconfigure(enum px_log_target target, const char *file,
	    int level);
/* <log format="json">: one JSON object per line on stderr and files. */
void	px_log_set_json(bool on);
int	px_log_start(void);
/* Flushes every ring, stops the log thread. */
void	px_log_stop(void);

/* Gives the calling thread its own ring (workers call it once). */
struct px_log_ring *px_log_ring_attach(void);
void	px_log_ring_detach(struct px_log_ring *r);
uint64_t px_log_dropped(void);

extern _Atomic int px_log_level;

#define px_log_enabled(level) \
	((level) <= atomic_load_explicit(&px_log_level, memory_order_relaxed))

/* id 0: not about a session. */
void	px_logv(int level, uint64_t id, const char *fmt, va_list ap)
	    __attribute__((format(printf, 3, 0)));
void	px_log(int level, uint64_t id, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

#endif
