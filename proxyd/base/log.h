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
#include <stddef.h>
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
/* <node name>: the name every line carries (node= in the text, "node" in
 * JSON, PROXYD_NODE in the journal), and the audit records too. Set once,
 * before any thread starts: workers read it without a lock. "" (never
 * set): lines carry none. */
void	px_log_set_node(const char *name);
const char *px_log_node(void);
#define PX_NODE_NAME_MAX	64
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

/* ---- records: a second stream, for the audit's JSON lines ------------
 * Whole lines taken as given, through a ring of their own per worker
 * (allocated at its first record) to the same log thread, which writes
 * them to their own target: a worker never writes to a file. */
#define PX_LOG_RECORD_MAX	2048	/* a line's bytes, newline included */
/* Where records go: PX_LOG_STDERR, PX_LOG_SYSLOG, PX_LOG_FILE (file, also
 * reopened when it is the same), or on false: none (records dropped).
 * 0, or -1 when the file cannot be opened (the old target kept). */
int	px_log_record_open(bool on, enum px_log_target target,
	    const char *file);
bool	px_log_record_on(void);
/* One line (without its newline, at most PX_LOG_RECORD_MAX - 1 bytes).
 * false: dropped (no target, or the ring is full). */
bool	px_log_record(const char *line, size_t len);
uint64_t px_log_records_dropped(void);

#endif
