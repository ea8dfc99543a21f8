/* Logging (log.h): the per-worker rings, the log thread that drains them
 * to stderr, a file or syslog (and sleeps while they are empty), the
 * direct writes of threads without a ring, switching target and reopening
 * a file (log rotation), the audit records (px_log_record), and the
 * JSON form of the lines. */
#include "log.h"
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

#define PX_LOG_SLOTS	1024		/* power of two */
#define PX_LOG_LINE	512
#define PX_LOG_RINGS	512
#define PX_LOG_FLUSH_MS	50

struct px_log_slot {
	struct timespec	ts;
	int		level;
	uint16_t	len;
	uint64_t	id;		/* session, 0: none (journal field) */
	char		text[PX_LOG_LINE];
};

/* Records (px_log_record): fewer, longer lines than the log's. */
#define PX_REC_SLOTS	256		/* power of two */

struct px_rec_slot {
	uint16_t	len;
	char		text[PX_LOG_RECORD_MAX];
};

struct px_rec_ring {
	_Alignas(64) atomic_uint_fast64_t head;
	_Alignas(64) atomic_uint_fast64_t tail;
	struct px_rec_slot slots[PX_REC_SLOTS];
};

struct px_log_ring {
	_Alignas(64) atomic_uint_fast64_t head;	/* written by the producer */
	_Alignas(64) atomic_uint_fast64_t tail;	/* written by the log thread */
	_Alignas(64) atomic_uint_fast64_t dropped;
	atomic_bool	in_use;
	/* Set once by the ring's producer at its first record, kept with
	 * the ring (a later thread reusing it reuses this too). */
	_Atomic(struct px_rec_ring *) rec;
	struct px_log_slot slots[PX_LOG_SLOTS];
};

_Atomic int px_log_level = LOG_INFO;
static char px_node[PX_NODE_NAME_MAX + 1];
static atomic_bool px_log_json_on;

static struct px_log_ring *px_rings[PX_LOG_RINGS];
static atomic_uint px_nrings;
static _Thread_local struct px_log_ring *px_my_ring;
static pthread_mutex_t px_direct_lock = PTHREAD_MUTEX_INITIALIZER;
static int px_log_fd = 2;
static enum px_log_target px_log_target_cur = PX_LOG_STDERR;
static int px_wake_fd = -1;
static pthread_t px_log_thread;
static atomic_bool px_log_running;
static atomic_bool px_log_stopping;
/* Set by the log thread before it sleeps with nothing to write; the
 * producer that finds it set wakes it (Dekker with the rings' heads:
 * both sides store then load, seq_cst). */
static atomic_bool px_log_asleep;
/* The records' target, under px_direct_lock; px_rec_on is read bare. */
static atomic_bool px_rec_on;
static int px_rec_fd = -1;
static enum px_log_target px_rec_target = PX_LOG_STDERR;
static atomic_uint_fast64_t px_rec_dropped;
static char px_rec_batch[64 * 1024];
static size_t px_rec_batch_len;

static const char *
px_level_name(int level)
{
	switch (level) {
	case LOG_EMERG: case LOG_ALERT: case LOG_CRIT: return "crit";
	case LOG_ERR: return "error";
	case LOG_WARNING: return "warning";
	case LOG_NOTICE: return "notice";
	case LOG_INFO: return "info";
	default: return "debug";
	}
}

/* The log thread writes what it drained in one go, not a write(2) per
 * line (a busy HTTP service logs two lines per request). Under
 * px_direct_lock. */
static char	px_batch[64 * 1024];
static size_t	px_batch_len;
static bool	px_batch_on;

static void
px_log_batch_flush(void)
{
	/* A failed log write has nowhere to be reported; drop it. */
	if (px_batch_len != 0 && write(px_log_fd, px_batch, px_batch_len) < 0)
		(void)0;
	px_batch_len = 0;
}

#define PX_LOG_FIELDS		48
#define PX_JOURNAL_SOCKET	"/run/systemd/journal/socket"

/* A line read back as fields, for the journal and JSON forms. A
 * structured line is "EVENT key=value ...": the event and every
 * key=value, the key [a-z0-9-]+ after a space; end= takes the rest of the
 * line, as in the text form. "EVENT WORD key=value ...", one bare
 * [a-z0-9-]+ word before the first key (data-transfer's direction, r66's
 * outcome), is structured too, the word its first field, "kind".
 *
 * A value is bare (up to the next space, taken as written) or quoted:
 * key="..." as px_log_escape(quoted) writes it, where \" is a quote, \\ a
 * backslash and \xNN the byte NN; it ends at the first unescaped quote
 * (or with the line, when the line was cut inside it). Any other
 * backslash stays as written. Only quoted values are decoded: a bare one
 * may hold a peer's raw backslash (an http path), which must not turn
 * into another byte. Bare names point into the line, decoded values into
 * vals (never longer than what they decode). */
struct px_log_kv {
	const char	*k, *v;
	size_t		 klen, vlen;
	bool		 quoted;	/* a string even when it reads as a number */
};

struct px_log_parsed {
	const char	*body;		/* the text after "#ID " */
	size_t		 bodylen;
	const char	*event;
	size_t		 eventlen;	/* 0: none */
	struct px_log_kv kv[PX_LOG_FIELDS];
	size_t		 nkv;
	char		 vals[PX_LOG_LINE];
	size_t		 nvals;
};

static bool
px_log_keychar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static int
px_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes the quoted value that starts after the quote at text[p] into
 * out->vals; returns where the text goes on (after the closing quote). */
static size_t
px_log_unquote(const char *text, size_t len, size_t p,
    struct px_log_parsed *out, struct px_log_kv *kv)
{
	char *o = out->vals + out->nvals;
	size_t room = sizeof(out->vals) - out->nvals, n = 0;
	int hi, lo;

	kv->v = o;
	kv->quoted = true;
	while (p < len && text[p] != '"' && n < room) {
		if (text[p] == '\\' && p + 1 < len &&
		    (text[p + 1] == '"' || text[p + 1] == '\\')) {
			o[n++] = text[p + 1];
			p += 2;
		} else if (text[p] == '\\' && p + 3 < len && text[p + 1] == 'x' &&
		    (hi = px_hexval(text[p + 2])) >= 0 &&
		    (lo = px_hexval(text[p + 3])) >= 0) {
			o[n++] = (char)(hi << 4 | lo);
			p += 4;
		} else
			o[n++] = text[p++];
	}
	kv->vlen = n;
	out->nvals += n;
	return p < len && text[p] == '"' ? p + 1 : p;
}

static void
px_log_parse(uint64_t id, const char *text, size_t len,
    struct px_log_parsed *out)
{
	size_t p = 0, k, klen, vs, ve, ws = 0, we = 0;

	if (id != 0) {
		/* Skip the "#ID " the text carries for stderr readers. */
		while (p < len && text[p] != ' ')
			p++;
		if (p < len)
			p++;
	}
	out->body = text + p;
	out->bodylen = len - p;
	out->eventlen = 0;
	out->nkv = 0;
	out->nvals = 0;
	for (k = p; k < len && text[k] != ' ' && text[k] != '='; k++)
		;
	/* Only structured lines ("event key=value ..."): free text such as
	 * "service web: ... mode=fixed" stays a message alone. */
	if (k >= len || text[k] != ' ' || k == p || k - p >= 64)
		return;
	for (vs = p; vs < k; vs++)
		if (!px_log_keychar(text[vs]))
			return;
	for (ve = k + 1; ve < len && px_log_keychar(text[ve]); ve++)
		;
	if (ve > k + 1 && ve < len && text[ve] == ' ') {
		ws = k + 1;		/* EVENT WORD key=... */
		we = ve;
		for (ve = we + 1; ve < len && px_log_keychar(text[ve]); ve++)
			;
		if (ve == we + 1 || ve >= len || text[ve] != '=')
			return;
	} else if (ve == k + 1 || ve >= len || text[ve] != '=')
		return;
	out->event = text + p;
	out->eventlen = k - p;
	p = k + 1;
	if (we != 0) {
		out->kv[out->nkv++] = (struct px_log_kv){ .k = "kind",
		    .klen = 4, .v = text + ws, .vlen = we - ws };
		p = we + 1;
	}
	while (p < len && out->nkv < PX_LOG_FIELDS) {
		struct px_log_kv *kv = &out->kv[out->nkv];

		for (k = p; k < len && px_log_keychar(text[k]); k++)
			;
		klen = k - p;
		if (klen == 0 || k >= len || text[k] != '=' ||
		    (p > 0 && text[p - 1] != ' ')) {
			while (p < len && text[p] != ' ')	/* not key=value */
				p++;
			p++;
			continue;
		}
		*kv = (struct px_log_kv){ .k = text + p, .klen = klen };
		vs = k + 1;
		if (klen == 3 && memcmp(text + p, "end", 3) == 0)
			ve = len;
		else if (vs < len && text[vs] == '"') {
			out->nkv++;
			p = px_log_unquote(text, len, vs + 1, out, kv);
			continue;	/* junk after the quote: skipped */
		} else
			for (ve = vs; ve < len && text[ve] != ' '; ve++)
				;
		kv->v = text + vs;
		kv->vlen = ve - vs;
		out->nkv++;
		p = ve + 1;
	}
}

/* One journal entry per line: MESSAGE is the line as stderr shows it (no
 * timestamp: the journal has its own), plus PROXYD_SESSION, PROXYD_EVENT
 * and, for each key=value, PROXYD_KEY=value (upper case, '-' as '_'), so
 * that journalctl PROXYD_VERDICT=deny selects session ends. */
static void
px_log_journal(int level, uint64_t id, const char *text, size_t len)
{
	struct px_log_parsed pl;
	struct iovec iov[PX_LOG_FIELDS + 7];
	char fields[PX_LOG_LINE * 2 + 512];
	char msg[PX_LOG_LINE + 16], prio[16], sess[40], event[80];
	char node[PX_NODE_NAME_MAX + 16];
	size_t i = 0, off = 0, f, k;
	int n;

	px_log_parse(id, text, len, &pl);
	n = snprintf(msg, sizeof(msg), "MESSAGE=%.*s", (int)len, text);
	iov[i++] = (struct iovec){ msg, (size_t)n };
	n = snprintf(prio, sizeof(prio), "PRIORITY=%d", level);
	iov[i++] = (struct iovec){ prio, (size_t)n };
	iov[i++] = (struct iovec){ "SYSLOG_IDENTIFIER=proxyd", 24 };
	if (px_node[0] != '\0') {
		n = snprintf(node, sizeof(node), "PROXYD_NODE=%s", px_node);
		iov[i++] = (struct iovec){ node, (size_t)n };
	}
	if (id != 0) {
		n = snprintf(sess, sizeof(sess), "PROXYD_SESSION=%llu",
		    (unsigned long long)id);
		iov[i++] = (struct iovec){ sess, (size_t)n };
	}
	if (pl.eventlen != 0) {
		n = snprintf(event, sizeof(event), "PROXYD_EVENT=%.*s",
		    (int)pl.eventlen, pl.event);
		iov[i++] = (struct iovec){ event, (size_t)n };
	}
	for (f = 0; f < pl.nkv; f++) {
		const struct px_log_kv *kv = &pl.kv[f];

		if (off + 7 + kv->klen + 1 + kv->vlen > sizeof(fields))
			break;
		iov[i].iov_base = fields + off;
		memcpy(fields + off, "PROXYD_", 7);
		off += 7;
		for (k = 0; k < kv->klen; k++)
			fields[off++] = kv->k[k] == '-' ? '_' :
			    (char)(kv->k[k] >= 'a' && kv->k[k] <= 'z' ?
			    kv->k[k] - 'a' + 'A' : kv->k[k]);
		fields[off++] = '=';
		memcpy(fields + off, kv->v, kv->vlen);
		off += kv->vlen;
		iov[i].iov_len = (size_t)(fields + off - (char *)iov[i].iov_base);
		i++;
	}
	/* Nowhere to report a lost entry to: it is dropped, as a failed
	 * write to stderr is. */
	(void)sd_journal_sendv(iov, (int)i);
}

/* A JSON number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)? */
static bool
px_json_is_number(const char *s, size_t len)
{
	size_t i = 0, d;

	if (i < len && s[i] == '-')
		i++;
	for (d = i; i < len && s[i] >= '0' && s[i] <= '9'; i++)
		;
	if (i == d || (i - d > 1 && s[d] == '0') || i - d > 18)
		return false;
	if (i < len && s[i] == '.') {
		for (d = ++i; i < len && s[i] >= '0' && s[i] <= '9'; i++)
			;
		if (i == d)
			return false;
	}
	return i == len;
}

/* One object per line: ts, level, session, event, then the line's
 * key=value fields under the same names (numbers typed), and msg, the
 * line as the text form shows it. Returns the length written (with the
 * newline); a line that does not fit loses fields, never its validity. */
static size_t
px_log_json(char *out, size_t cap, const char *ts, int level, uint64_t id,
    const char *text, size_t len)
{
	struct px_log_parsed pl;
	size_t o, f;
	int n;

	px_log_parse(id, text, len, &pl);
	n = snprintf(out, cap, "{\"ts\":\"%s\",\"level\":\"%s\"", ts,
	    px_level_name(level));
	o = (size_t)n;
	if (px_node[0] != '\0') {
		/* The name has no character JSON escapes (px_log_set_node). */
		n = snprintf(out + o, cap - o, ",\"node\":\"%s\"", px_node);
		o += (size_t)n;
	}
	if (id != 0) {
		n = snprintf(out + o, cap - o, ",\"session\":%llu",
		    (unsigned long long)id);
		o += (size_t)n;
	}
	if (pl.eventlen != 0) {
		memcpy(out + o, ",\"event\":\"", 10);
		o += 10;
		o += px_json_escape(out + o, cap - o, pl.event, pl.eventlen);
		out[o++] = '"';
	}
	/* The message is written first into the tail budget, so that fields
	 * are what gives way when the line is long. */
	for (f = 0; f < pl.nkv; f++) {
		const struct px_log_kv *kv = &pl.kv[f];
		bool num = !kv->quoted &&
		    px_json_is_number(kv->v, kv->vlen);

		if (o + kv->klen + 6 * kv->vlen + 8 + 6 * pl.bodylen + 16 > cap)
			break;
		out[o++] = ',';
		out[o++] = '"';
		o += px_json_escape(out + o, cap - o, kv->k, kv->klen);
		out[o++] = '"';
		out[o++] = ':';
		if (num) {
			memcpy(out + o, kv->v, kv->vlen);
			o += kv->vlen;
		} else {
			out[o++] = '"';
			o += px_json_escape(out + o, cap - o, kv->v, kv->vlen);
			out[o++] = '"';
		}
	}
	memcpy(out + o, ",\"msg\":\"", 8);
	o += 8;
	o += px_json_escape(out + o, cap - o - 3, pl.body, pl.bodylen);
	out[o++] = '"';
	out[o++] = '}';
	out[o++] = '\n';
	return o;
}

/* Caller holds px_direct_lock or is the log thread (which takes it too). */
static void
px_log_emit(const struct timespec *ts, int level, uint64_t id,
    const char *text, size_t len)
{
	char buf[PX_LOG_LINE * 16], stamp[96];
	struct tm tm;
	int n;

	if (px_log_target_cur == PX_LOG_SYSLOG) {
		/* syslog's own host field is the machine's, which need not
		 * be the node's name */
		syslog(level, "%s%s%s%.*s", px_node[0] != '\0' ? "node=" : "",
		    px_node, px_node[0] != '\0' ? " " : "", (int)len, text);
		return;
	}
	if (px_log_target_cur == PX_LOG_JOURNAL) {
		px_log_journal(level, id, text, len);
		return;
	}
	gmtime_r(&ts->tv_sec, &tm);
	snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	    tm.tm_sec, ts->tv_nsec / 1000000);
	if (atomic_load_explicit(&px_log_json_on, memory_order_relaxed))
		n = (int)px_log_json(buf, sizeof(buf), stamp, level, id, text,
		    len);
	else {
		n = snprintf(buf, sizeof(buf), "%s %s%s%s%s %.*s\n", stamp,
		    px_node[0] != '\0' ? "node=" : "", px_node,
		    px_node[0] != '\0' ? " " : "", px_level_name(level),
		    (int)len, text);
		if (n > PX_LOG_LINE + 63 + PX_NODE_NAME_MAX + 6)
			n = PX_LOG_LINE + 63 + PX_NODE_NAME_MAX + 6;
	}
	if (px_batch_on) {
		if (px_batch_len + (size_t)n > sizeof(px_batch))
			px_log_batch_flush();
		memcpy(px_batch + px_batch_len, buf, (size_t)n);
		px_batch_len += (size_t)n;
		return;
	}
	/* A failed log write has nowhere to be reported; drop it. */
	if (write(px_log_fd, buf, (size_t)n) < 0)
		return;
}

static int
px_log_open_target(enum px_log_target target, const char *file)
{
	int fd = 2;

	if (target == PX_LOG_FILE) {
		fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
		if (fd == -1) {
			fprintf(stderr, "proxyd: cannot open log file %s: %s\n",
			    file, strerror(errno));
			return -1;
		}
	} else if (target == PX_LOG_SYSLOG)
		openlog("proxyd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	else if (target == PX_LOG_JOURNAL) {
		struct stat st;

		/* Without journald every line would vanish: say so once and
		 * keep stderr (proxyd run by hand on a host without it). */
		errno = 0;
		if (stat(PX_JOURNAL_SOCKET, &st) == -1 || !S_ISSOCK(st.st_mode)) {
			fprintf(stderr, "proxyd: log target journal: %s: %s; "
			    "logging to stderr\n", PX_JOURNAL_SOCKET,
			    errno ? strerror(errno) : "not a socket");
			target = PX_LOG_STDERR;
		}
	}
	pthread_mutex_lock(&px_direct_lock);
	if (px_log_fd > 2)
		close(px_log_fd);
	px_log_fd = fd;
	px_log_target_cur = target;
	pthread_mutex_unlock(&px_direct_lock);
	return 0;
}

void
px_log_set_node(const char *name)
{
	snprintf(px_node, sizeof(px_node), "%s", name != NULL ? name : "");
}

const char *
px_log_node(void)
{
	return px_node;
}

void
px_log_set_json(bool on)
{
	atomic_store(&px_log_json_on, on);
}

int
px_log_open(enum px_log_target target, const char *file, int level)
{
	atomic_store(&px_log_level, level);
	return px_log_open_target(target, file);
}

int
px_log_reconfigure(enum px_log_target target, const char *file, int level)
{
	atomic_store(&px_log_level, level);
	return px_log_open_target(target, file);
}

/* Under px_direct_lock. */
static void
px_rec_flush(void)
{
	/* A failed write has nowhere to be reported; dropped, as the log's. */
	if (px_rec_batch_len != 0 && px_rec_fd >= 0 &&
	    write(px_rec_fd, px_rec_batch, px_rec_batch_len) < 0)
		(void)0;
	px_rec_batch_len = 0;
}

/* One record line (newline included) to the records' target. Under
 * px_direct_lock. */
static void
px_rec_emit(const char *text, size_t len)
{
	if (!atomic_load_explicit(&px_rec_on, memory_order_relaxed))
		return;
	if (px_rec_target == PX_LOG_SYSLOG) {
		syslog(LOG_NOTICE, "%.*s", (int)(len - 1), text);
		return;
	}
	if (px_rec_batch_len + len > sizeof(px_rec_batch))
		px_rec_flush();
	memcpy(px_rec_batch + px_rec_batch_len, text, len);
	px_rec_batch_len += len;
}

static void
px_rec_drain(struct px_rec_ring *q)
{
	uint_fast64_t tail, head;

	if (q == NULL)
		return;
	tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
	head = atomic_load_explicit(&q->head, memory_order_acquire);
	for (; tail != head; tail++) {
		struct px_rec_slot *s = &q->slots[tail & (PX_REC_SLOTS - 1)];

		px_rec_emit(s->text, s->len);
	}
	atomic_store_explicit(&q->tail, tail, memory_order_release);
}

static bool
px_log_drain(void)
{
	unsigned i, n = atomic_load_explicit(&px_nrings, memory_order_acquire);
	bool any = false;

	pthread_mutex_lock(&px_direct_lock);
	px_batch_on = true;
	for (i = 0; i < n; i++) {
		struct px_log_ring *r = px_rings[i];
		uint_fast64_t tail, head;

		if (r == NULL)
			continue;
		tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
		head = atomic_load_explicit(&r->head, memory_order_acquire);
		for (; tail != head; tail++) {
			struct px_log_slot *s = &r->slots[tail & (PX_LOG_SLOTS - 1)];

			px_log_emit(&s->ts, s->level, s->id, s->text, s->len);
			any = true;
		}
		atomic_store_explicit(&r->tail, tail, memory_order_release);
		px_rec_drain(atomic_load_explicit(&r->rec,
		    memory_order_acquire));
	}
	px_log_batch_flush();
	px_rec_flush();
	px_batch_on = false;
	pthread_mutex_unlock(&px_direct_lock);
	return any;
}

/* Whether a ring holds a line or record the log thread has not taken. */
static bool
px_log_pending(void)
{
	unsigned i, n = atomic_load_explicit(&px_nrings, memory_order_acquire);

	for (i = 0; i < n; i++) {
		struct px_log_ring *r = px_rings[i];
		struct px_rec_ring *q;

		if (r == NULL)
			continue;
		if (atomic_load(&r->head) != atomic_load_explicit(&r->tail,
		    memory_order_relaxed))
			return true;
		q = atomic_load_explicit(&r->rec, memory_order_acquire);
		if (q != NULL && atomic_load(&q->head) !=
		    atomic_load_explicit(&q->tail, memory_order_relaxed))
			return true;
	}
	return false;
}

static void
px_log_wait(int ms)
{
	struct pollfd pfd = { .fd = px_wake_fd, .events = POLLIN };
	uint64_t v;

	if (poll(&pfd, 1, ms) > 0 && read(px_wake_fd, &v, sizeof(v)) < 0)
		(void)0;
}

/* A producer's line after its seq_cst store of the head: the one that
 * finds the log thread asleep (every ring was empty) wakes it. */
static void
px_log_wake(void)
{
	uint64_t one = 1;

	if (atomic_load(&px_log_asleep) &&
	    atomic_exchange(&px_log_asleep, false) &&
	    write(px_wake_fd, &one, sizeof(one)) < 0)
		(void)0;
}

static void *
px_log_main(void *arg)
{
	bool busy = false;

	(void)arg;
	(void)pthread_setname_np(pthread_self(), "px-log");
	while (!atomic_load(&px_log_stopping)) {
		/* Idle for a whole round, it sleeps: no timer wakes an idle
		 * gateway, and a steady trickle of lines costs the workers
		 * no wake-up write. */
		if (!busy) {
			atomic_store(&px_log_asleep, true);
			if (!px_log_pending() &&
			    !atomic_load(&px_log_stopping))
				px_log_wait(-1);
			atomic_store(&px_log_asleep, false);
		}
		/* A line waits at most this long, so a burst leaves in one
		 * write and its producers pay no syscall (but one when a
		 * ring passes half full). */
		if (!atomic_load(&px_log_stopping))
			px_log_wait(PX_LOG_FLUSH_MS);
		busy = px_log_drain();
	}
	px_log_drain();
	return NULL;
}

int
px_log_start(void)
{
	px_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (px_wake_fd == -1)
		return -1;
	if (pthread_create(&px_log_thread, NULL, px_log_main, NULL) != 0)
		return -1;
	atomic_store(&px_log_running, true);
	return 0;
}

void
px_log_stop(void)
{
	uint64_t one = 1;

	if (!atomic_load(&px_log_running))
		return;
	atomic_store(&px_log_stopping, true);
	if (write(px_wake_fd, &one, sizeof(one)) < 0)
		(void)0;
	pthread_join(px_log_thread, NULL);
	atomic_store(&px_log_running, false);
	close(px_wake_fd);
	px_wake_fd = -1;
}

struct px_log_ring *
px_log_ring_attach(void)
{
	struct px_log_ring *r;
	unsigned i, n;

	/* Reuse a ring a finished thread left behind (reloads, restarts). */
	n = atomic_load(&px_nrings);
	for (i = 0; i < n; i++) {
		bool expected = false;

		if (px_rings[i] != NULL && atomic_compare_exchange_strong(
		    &px_rings[i]->in_use, &expected, true)) {
			px_my_ring = px_rings[i];
			return px_my_ring;
		}
	}
	if (n >= PX_LOG_RINGS || (r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	atomic_store(&r->in_use, true);
	pthread_mutex_lock(&px_direct_lock);
	n = atomic_load(&px_nrings);
	px_rings[n] = r;
	atomic_store_explicit(&px_nrings, n + 1, memory_order_release);
	pthread_mutex_unlock(&px_direct_lock);
	px_my_ring = r;
	return r;
}

void
px_log_ring_detach(struct px_log_ring *r)
{
	if (r == NULL)
		return;
	if (px_my_ring == r)
		px_my_ring = NULL;
	atomic_store(&r->in_use, false);
}

uint64_t
px_log_dropped(void)
{
	unsigned i, n = atomic_load(&px_nrings);
	uint64_t sum = 0;

	for (i = 0; i < n; i++)
		sum += atomic_load_explicit(&px_rings[i]->dropped,
		    memory_order_relaxed);
	return sum;
}

static int __attribute__((format(printf, 4, 0)))
px_format(char *buf, size_t size, uint64_t id, const char *fmt, va_list ap)
{
	int off = 0, n;

	if (id != 0)
		off = snprintf(buf, size, "#%llu ", (unsigned long long)id);
	n = vsnprintf(buf + off, size - (size_t)off, fmt, ap);
	if (n < 0)
		n = 0;
	n += off;
	if ((size_t)n >= size)
		n = (int)size - 1;
	return n;
}

void
px_logv(int level, uint64_t id, const char *fmt, va_list ap)
{
	struct px_log_ring *r = px_my_ring;
	struct timespec ts;

	if (!px_log_enabled(level))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (r != NULL && atomic_load_explicit(&px_log_running, memory_order_relaxed)) {
		uint_fast64_t head = atomic_load_explicit(&r->head,
		    memory_order_relaxed);
		uint_fast64_t tail = atomic_load_explicit(&r->tail,
		    memory_order_acquire);
		struct px_log_slot *s;
		uint64_t one = 1;

		if (head - tail >= PX_LOG_SLOTS) {
			atomic_store_explicit(&r->dropped, atomic_load_explicit(
			    &r->dropped, memory_order_relaxed) + 1,
			    memory_order_relaxed);
			return;
		}
		s = &r->slots[head & (PX_LOG_SLOTS - 1)];
		s->ts = ts;
		s->level = level;
		s->id = id;
		s->len = (uint16_t)px_format(s->text, sizeof(s->text), id, fmt, ap);
		atomic_store(&r->head, head + 1);
		px_log_wake();
		if (head - tail == PX_LOG_SLOTS / 2 &&
		    write(px_wake_fd, &one, sizeof(one)) < 0)
			(void)0;
		return;
	} else {
		char text[PX_LOG_LINE];
		int len = px_format(text, sizeof(text), id, fmt, ap);

		pthread_mutex_lock(&px_direct_lock);
		px_log_emit(&ts, level, id, text, (size_t)len);
		pthread_mutex_unlock(&px_direct_lock);
	}
}

void
px_log(int level, uint64_t id, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	px_logv(level, id, fmt, ap);
	va_end(ap);
}

/* ---- records ----------------------------------------------------------- */

int
px_log_record_open(bool on, enum px_log_target target, const char *file)
{
	int fd = -1;

	if (on && target == PX_LOG_FILE && (fd = open(file, O_WRONLY |
	    O_CREAT | O_APPEND | O_CLOEXEC, 0640)) == -1) {
		px_log(LOG_ERR, 0, "cannot open audit file %s: %s", file,
		    strerror(errno));
		return -1;
	}
	if (on && target == PX_LOG_STDERR)
		fd = 2;
	pthread_mutex_lock(&px_direct_lock);
	px_rec_flush();
	if (px_rec_fd > 2)
		close(px_rec_fd);
	px_rec_fd = fd;
	px_rec_target = target;
	atomic_store(&px_rec_on, on);
	pthread_mutex_unlock(&px_direct_lock);
	return 0;
}

bool
px_log_record_on(void)
{
	return atomic_load_explicit(&px_rec_on, memory_order_relaxed);
}

uint64_t
px_log_records_dropped(void)
{
	return atomic_load(&px_rec_dropped);
}

static bool
px_rec_drop(void)
{
	atomic_fetch_add_explicit(&px_rec_dropped, 1, memory_order_relaxed);
	return false;
}

bool
px_log_record(const char *line, size_t len)
{
	struct px_log_ring *r = px_my_ring;
	struct px_rec_ring *q;
	uint_fast64_t head, tail;
	struct px_rec_slot *s;
	uint64_t one = 1;

	if (!px_log_record_on())
		return false;
	if (len > PX_LOG_RECORD_MAX - 1)
		return px_rec_drop();
	if (r == NULL || !atomic_load_explicit(&px_log_running,
	    memory_order_relaxed)) {
		char text[PX_LOG_RECORD_MAX];

		/* Off the workers (or before the log thread): direct. */
		memcpy(text, line, len);
		text[len] = '\n';
		pthread_mutex_lock(&px_direct_lock);
		px_rec_emit(text, len + 1);
		px_rec_flush();
		pthread_mutex_unlock(&px_direct_lock);
		return true;
	}
	if ((q = atomic_load_explicit(&r->rec, memory_order_relaxed)) ==
	    NULL) {
		if ((q = calloc(1, sizeof(*q))) == NULL)
			return px_rec_drop();
		atomic_store_explicit(&r->rec, q, memory_order_release);
	}
	head = atomic_load_explicit(&q->head, memory_order_relaxed);
	tail = atomic_load_explicit(&q->tail, memory_order_acquire);
	if (head - tail >= PX_REC_SLOTS)
		return px_rec_drop();
	s = &q->slots[head & (PX_REC_SLOTS - 1)];
	memcpy(s->text, line, len);
	s->text[len] = '\n';
	s->len = (uint16_t)(len + 1);
	atomic_store(&q->head, head + 1);
	px_log_wake();
	if (head - tail == PX_REC_SLOTS / 2 &&
	    write(px_wake_fd, &one, sizeof(one)) < 0)
		(void)0;
	return true;
}
