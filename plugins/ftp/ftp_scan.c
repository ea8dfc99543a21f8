/* ftp: files through the service's scanner (<scan>, proxyd/scan/). A
 * RETR's data (a download: RESPMOD) or a STOR/APPE/STOU's (an upload:
 * REQMOD), under a synthetic HTTP head that names the file, goes to the
 * receiver as it comes, copied to the scanner on the way, except its last
 * part, held until the verdict:
 *   - the last FTP_SCAN_TAIL bytes (a quarter of limits/@buffer when that
 *     is smaller) and the data connection's end (its FIN);
 *   - the server's final reply to the transfer command (a 2xx: the
 *     client hears of success only once the file is known clean).
 * Clean: the held bytes, the end and the reply go on. Infected (or the
 * scanner failed with on-error="block", or the file grew past max-size
 * with over-size="block"): the receiver's data connection is reset before
 * its last bytes, so a client never has the whole file and a server never
 * receives it whole, and the client gets a 550 (451 for a scanner's
 * failure) in place of the server's final reply.
 *
 * Memory per scanned transfer, besides the channel's own buffered relay
 * (up to limits/@buffer each way): the held tail, and at most about
 * limits/@buffer of copy waiting to go to the scanner (past that the
 * sender is not read until the scanner has taken it). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "analyser.h"
#include "icap.h"
#include "parse.h"
#include "scan.h"
#include "ftp/ftp_int.h"

#define FTP_SCAN_TAIL		(16 * 1024)

enum ftp_scan_state {
	FTP_SCAN_RUN = 0,	/* bytes flow, copied to the scanner */
	FTP_SCAN_ENDED,		/* the file is whole: held for the verdict */
	FTP_SCAN_PASSED,	/* clean, or allowed: nothing held any more */
	FTP_SCAN_BLOCKED,	/* refused: the receiver's connection reset */
	FTP_SCAN_GONE,		/* the channel ended before a verdict */
};

struct ftp_scan {
	struct ftp_scan		*next;		/* in ftp_state's list */
	struct px_session	*s;
	struct ftp_state	*st;
	struct px_channel	*ch;		/* NULL once it ended */
	struct px_icap_req	*icap;
	struct evbuffer		*hold;		/* the tail kept back */
	enum px_dir		 dir;
	enum ftp_scan_state	 state;
	unsigned		 id;		/* ftp_pending's scan */
	bool			 reply_done;	/* its final reply went */
	bool			 busy;		/* not to be freed: on the stack */
	bool			 starved;	/* the sender waits for the scanner */
	uint64_t		 size;
	char			 verb[FTP_VERB_MAX + 1];
	char			 file[200];	/* escaped, for the log */
	char			 path[512];	/* for the synthetic head */
	char			 reply[192];	/* BLOCKED: the client's reply */
};

static const char *
ftp_scan_dir_name(const struct ftp_scan *sc)
{
	return sc->dir == PX_TO_SERVER ? "upload" : "download";
}

static const struct px_scan_policy *
ftp_scan_policy(const struct ftp_scan *sc)
{
	return px_session_scan(sc->s);
}

static void
ftp_scan_count(const struct ftp_scan *sc, const char *verdict)
{
	px_scan_count(px_session_service(sc->s),
	    ftp_scan_policy(sc)->scanner->name, verdict);
}

/* The receiver's end of the data connection: the one reset on a block. */
static enum px_chan_end
ftp_scan_receiver(const struct ftp_scan *sc)
{
	return sc->dir == PX_TO_SERVER ? PX_CHAN_SERVER : PX_CHAN_CLIENT;
}

static size_t
ftp_scan_tail(const struct ftp_scan *sc)
{
	size_t b = px_session_buffer(sc->s) / 4;

	return b < FTP_SCAN_TAIL ? b : FTP_SCAN_TAIL;
}

static void
ftp_scan_free(struct ftp_scan *sc)
{
	struct ftp_scan **pp;

	for (pp = &sc->st->scans; *pp != NULL; pp = &(*pp)->next)
		if (*pp == sc) {
			*pp = sc->next;
			break;
		}
	if (sc->icap != NULL)
		px_icap_cancel(sc->icap);
	if (sc->hold != NULL)
		evbuffer_free(sc->hold);
	free(sc);
}

/* Done with once nothing refers to it: its channel ended, its reply went
 * and no scan is under way. */
static void
ftp_scan_maybe_free(struct ftp_scan *sc)
{
	if (!sc->busy && sc->ch == NULL && sc->reply_done && sc->icap == NULL)
		ftp_scan_free(sc);
}

static struct ftp_scan *
ftp_scan_find(const struct ftp_state *st, unsigned id)
{
	struct ftp_scan *sc;

	for (sc = st->scans; sc != NULL; sc = sc->next)
		if (sc->id == id)
			return sc;
	return NULL;
}

/* A verdict is in: a final reply held for it goes now (or its
 * replacement). */
static void
ftp_scan_wake_control(struct ftp_scan *sc)
{
	if (!sc->st->in_data)
		px_session_resume(sc->s, PX_TO_CLIENT);
}

/* The transfer is refused: the receiver's connection is reset before its
 * last bytes, the client gets `reply` for the command. */
static void
ftp_scan_block(struct ftp_scan *sc, const char *why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
ftp_scan_block(struct ftp_scan *sc, const char *why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sc->reply, sizeof(sc->reply) - 2, fmt, ap);
	va_end(ap);
	strcat(sc->reply, "\r\n");
	sc->state = FTP_SCAN_BLOCKED;
	if (sc->icap != NULL)
		px_icap_cancel(sc->icap);
	sc->icap = NULL;
	if (sc->hold != NULL)
		evbuffer_drain(sc->hold, evbuffer_get_length(sc->hold));
	if (sc->ch != NULL)
		px_channel_abort(sc->ch, ftp_scan_receiver(sc), why);
	ftp_scan_wake_control(sc);
}

/* Scanning stops with the transfer allowed: what is held goes on, from
 * inside the channel's callback (held) or by resuming it. */
static void
ftp_scan_pass(struct ftp_scan *sc)
{
	sc->state = FTP_SCAN_PASSED;
	if (sc->icap != NULL)
		px_icap_cancel(sc->icap);
	sc->icap = NULL;
}

static void
ftp_scan_threat(const struct px_icap_result *res, char *buf, size_t len)
{
	if (res->threat[0] != '\0')
		px_log_escape(buf, len, res->threat, strlen(res->threat), true);
	else if (res->verdict == PX_ICAP_MODIFIED)
		snprintf(buf, len, "unnamed (the scanner changed the file)");
	else
		snprintf(buf, len, "unnamed (the scanner answered HTTP %d)",
		    res->http_status);
}

static void
ftp_scan_verdict(struct ftp_scan *sc, const struct px_icap_result *res)
{
	const struct px_scanner *scn = ftp_scan_policy(sc)->scanner;
	const char *user = sc->st->user[0] != '\0' ? sc->st->user : "-";
	char threat[128], why[128];

	switch (res->verdict) {
	case PX_ICAP_CLEAN:
		px_session_log(sc->s, LOG_INFO, "ftp-scan verdict=clean "
		    "scanner=%s file=\"%s\" user=%s dir=%s size=%llu "
		    "istag=\"%s\"", scn->name, sc->file, user,
		    ftp_scan_dir_name(sc), (unsigned long long)sc->size,
		    res->istag);
		ftp_scan_count(sc, "clean");
		ftp_scan_pass(sc);
		return;
	case PX_ICAP_INFECTED:
	case PX_ICAP_MODIFIED:
		ftp_scan_threat(res, threat, sizeof(threat));
		px_session_log(sc->s, LOG_NOTICE, "ftp-scan verdict=infected "
		    "threat=\"%s\" scanner=%s file=\"%s\" user=%s dir=%s "
		    "size=%llu istag=\"%s\"", threat, scn->name, sc->file, user,
		    ftp_scan_dir_name(sc), (unsigned long long)sc->size,
		    res->istag);
		ftp_scan_count(sc, "infected");
		ftp_scan_block(sc, "denied: infected (content scan)", "550 %s: "
		    "blocked by content scan (threat %s)", sc->file, threat);
		return;
	case PX_ICAP_ERROR:
		break;
	}
	px_log_escape(why, sizeof(why), res->error, strlen(res->error), true);
	px_session_log(sc->s, LOG_WARNING, "ftp-scan verdict=error "
	    "reason=\"%s\" scanner=%s file=\"%s\" user=%s dir=%s on-error=%s",
	    why, scn->name, sc->file, user, ftp_scan_dir_name(sc),
	    scn->on_error_allow ? "allow" : "block");
	if (scn->on_error_allow) {
		ftp_scan_count(sc, "error-allowed");
		ftp_scan_pass(sc);
		return;
	}
	ftp_scan_count(sc, "error");
	ftp_scan_block(sc, "denied: the content scanner failed", "451 %s: "
	    "not transferred: the content scanner failed (%s)", sc->file, why);
}

/* The scanner's word: res NULL when what waited for it was written (the
 * channel may read again), else the verdict. */
static void
ftp_scan_icap_cb(void *arg, const struct px_icap_result *res)
{
	struct ftp_scan *sc = arg;

	if (res == NULL) {
		if (sc->starved && sc->ch != NULL && sc->state == FTP_SCAN_RUN) {
			sc->starved = false;
			px_channel_resume(sc->ch, sc->dir, false);
		}
		return;
	}
	sc->icap = NULL;	/* freed after this callback */
	sc->busy = true;
	ftp_scan_verdict(sc, res);
	if (sc->state == FTP_SCAN_PASSED) {
		/* The held tail goes from the channel's callback, then the
		 * end; then the held reply. */
		if (sc->ch != NULL)
			px_channel_resume(sc->ch, sc->dir, true);
		ftp_scan_wake_control(sc);
	}
	sc->busy = false;
	ftp_scan_maybe_free(sc);
}

/* "/dir/name" as an HTTP path: bytes outside a safe set escaped. */
static void
ftp_scan_url_path(const struct ftp_state *st, const char *arg, size_t len,
    char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *base = arg[0] == '/' || st->path.lost ? "" : st->path.cwd;
	char raw[FTP_PATH_MAX + FTP_LINE_MAX + 2];
	size_t i, k = 0, n;

	n = (size_t)snprintf(raw, sizeof(raw), "%s%s%.*s", base,
	    base[0] != '\0' && base[strlen(base) - 1] != '/' ? "/" : "",
	    (int)len, arg);
	if (n >= sizeof(raw))
		n = sizeof(raw) - 1;
	if (raw[0] != '/' && k + 1 < cap)
		out[k++] = '/';
	for (i = 0; i < n && k + 4 < cap; i++) {
		unsigned char c = (unsigned char)raw[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '/' || c == '.' || c == '-' ||
		    c == '_' || c == '~')
			out[k++] = (char)c;
		else {
			out[k++] = '%';
			out[k++] = hex[c >> 4];
			out[k++] = hex[c & 15];
		}
	}
	out[k] = '\0';
}

/* The first bytes (or the end of an empty file): the scan starts. */
static int
ftp_scan_start_icap(struct ftp_scan *sc)
{
	const struct px_scanner *scn = ftp_scan_policy(sc)->scanner;
	static const char res_head[] = "HTTP/1.1 200 OK\r\n"
	    "Content-Type: application/octet-stream\r\n\r\n";
	char rq[700], host[PX_ADDRSTRLEN];
	bool down = sc->dir == PX_TO_CLIENT;

	snprintf(rq, sizeof(rq), "%s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n",
	    down ? "GET" : "PUT", sc->path, px_sockaddr_str(
	    px_session_server(sc->s), host, sizeof(host)), down ? "" :
	    "Content-Type: application/octet-stream\r\n");
	if ((sc->hold = evbuffer_new()) != NULL)
		sc->icap = px_icap_start(px_session_base(sc->s), scn, down, rq,
		    strlen(rq), res_head, down ? sizeof(res_head) - 1 : 0,
		    ftp_scan_icap_cb, sc);
	if (sc->icap != NULL)
		return 0;
	{
		struct px_icap_result res = { .verdict = PX_ICAP_ERROR };

		snprintf(res.error, sizeof(res.error), "out of memory");
		ftp_scan_verdict(sc, &res);
		if (sc->state == FTP_SCAN_PASSED)
			ftp_scan_wake_control(sc);
	}
	return -1;
}

/* The file grew past max-size. true: it goes on unscanned (allow). */
static bool
ftp_scan_over_size(struct ftp_scan *sc)
{
	const struct px_scan_policy *p = ftp_scan_policy(sc);

	px_session_log(sc->s, LOG_NOTICE, "ftp-scan verdict=over-size "
	    "size=%llu+ max-size=%llu scanner=%s file=\"%s\" user=%s dir=%s "
	    "over-size=%s", (unsigned long long)sc->size,
	    (unsigned long long)p->max_size, p->scanner->name, sc->file,
	    sc->st->user[0] != '\0' ? sc->st->user : "-", ftp_scan_dir_name(sc),
	    p->over_size_allow ? "allow" : "block");
	ftp_scan_count(sc, p->over_size_allow ? "over-size-allowed" :
	    "over-size");
	if (p->over_size_allow) {
		ftp_scan_pass(sc);
		ftp_scan_wake_control(sc);
		return true;
	}
	ftp_scan_block(sc, "denied: over the scanner's max-size", "550 %s: "
	    "refused: over the content scanner's max-size (%llu bytes)",
	    sc->file, (unsigned long long)p->max_size);
	return false;
}

/* The channel's bytes (px_channel_inspect). */
static enum px_verdict
ftp_scan_data(void *arg, enum px_dir dir, struct evbuffer *in)
{
	struct ftp_scan *sc = arg;
	struct evbuffer *out;
	size_t n = evbuffer_get_length(in), len, tail;
	bool eof;

	if (dir != sc->dir)
		return PX_PASS;	/* nothing comes the other way */
	out = px_channel_output(sc->ch, dir);
	switch (sc->state) {
	case FTP_SCAN_RUN:
		break;
	case FTP_SCAN_PASSED:
	case FTP_SCAN_GONE:
		if (sc->hold != NULL && out != NULL)
			evbuffer_add_buffer(out, sc->hold);
		return PX_PASS;
	default:
		/* Blocked, or ended and waiting: nothing more goes. */
		evbuffer_drain(in, n);
		return PX_MORE;
	}
	eof = px_channel_input_closed(sc->ch, dir);
	if (sc->icap == NULL && eof && n == 0) {
		/* An empty file: nothing to scan (as an empty HTTP body). */
		sc->state = FTP_SCAN_PASSED;
		ftp_scan_wake_control(sc);
		return PX_PASS;
	}
	if (sc->icap == NULL && ftp_scan_start_icap(sc) == -1)
		return ftp_scan_data(arg, dir, in);	/* passed or blocked */
	/* The scanner is behind: the sender waits (its bytes stay in `in`,
	 * which stops reading once full). At the end all goes. */
	if (!eof && px_icap_queued(sc->icap) >= px_session_buffer(sc->s)) {
		sc->starved = true;
		return PX_MORE;
	}
	sc->size += n;
	if (sc->size > ftp_scan_policy(sc)->max_size) {
		ftp_scan_over_size(sc);
		return ftp_scan_data(arg, dir, in);	/* passed or blocked */
	}
	px_icap_body(sc->icap, in, n);
	evbuffer_add_buffer(sc->hold, in);
	tail = ftp_scan_tail(sc);
	if ((len = evbuffer_get_length(sc->hold)) > tail && out != NULL)
		evbuffer_remove_buffer(sc->hold, out, len - tail);
	if (eof) {
		sc->state = FTP_SCAN_ENDED;
		px_icap_end(sc->icap);
		px_channel_hold_end(sc->ch, dir);
	}
	return PX_PASS;
}

int
ftp_scan_begin(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, bool upload)
{
	const struct px_scan_policy *p = px_session_scan(s);
	struct ftp_scan *sc;

	if (p->scanner == NULL || st->ch == NULL || !(p->direction &
	    (upload ? PX_SCAN_UPLOAD : PX_SCAN_DOWNLOAD)))
		return 0;
	if ((sc = calloc(1, sizeof(*sc))) == NULL)
		return -1;
	sc->s = s;
	sc->st = st;
	sc->ch = st->ch;
	sc->dir = upload ? PX_TO_SERVER : PX_TO_CLIENT;
	sc->id = ++st->scan_gen != 0 ? st->scan_gen : ++st->scan_gen;
	snprintf(sc->verb, sizeof(sc->verb), "%s", c->verb);
	px_log_escape(sc->file, sizeof(sc->file), c->arg, c->arglen, true);
	ftp_scan_url_path(st, c->arg, c->arglen, sc->path, sizeof(sc->path));
	if (px_channel_inspect(st->ch, ftp_scan_data, sc) == -1) {
		free(sc);
		return -1;
	}
	sc->next = st->scans;
	st->scans = sc;
	return (int)sc->id;
}

enum ftp_scan_reply
ftp_scan_reply(struct ftp_state *st, unsigned id, int code)
{
	struct ftp_scan *sc = ftp_scan_find(st, id);

	if (sc == NULL)
		return FTP_SCAN_FORWARD;
	switch (sc->state) {
	case FTP_SCAN_RUN:
	case FTP_SCAN_ENDED:
		/* Success is told once the file is known clean; a failure
		 * needs no verdict. */
		return code / 100 == 2 ? FTP_SCAN_HOLD : FTP_SCAN_FORWARD;
	case FTP_SCAN_BLOCKED:
		return FTP_SCAN_REPLACE;
	default:
		return FTP_SCAN_FORWARD;
	}
}

const char *
ftp_scan_reply_text(const struct ftp_state *st, unsigned id)
{
	const struct ftp_scan *sc = ftp_scan_find(st, id);

	return sc != NULL ? sc->reply : "550 blocked by content scan\r\n";
}

void
ftp_scan_reply_done(struct ftp_state *st, unsigned id)
{
	struct ftp_scan *sc = ftp_scan_find(st, id);

	if (sc == NULL)
		return;
	sc->reply_done = true;
	ftp_scan_maybe_free(sc);
}

void
ftp_scan_chan_gone(struct ftp_state *st, const struct px_channel *ch)
{
	struct ftp_scan *sc;

	for (sc = st->scans; sc != NULL; sc = sc->next)
		if (sc->ch == ch)
			break;
	if (sc == NULL)
		return;
	sc->ch = NULL;
	sc->busy = true;
	if (sc->state == FTP_SCAN_RUN || sc->state == FTP_SCAN_ENDED) {
		/* Cut short (a peer went, a timeout): no verdict to wait
		 * for; the server's reply tells what happened. */
		px_session_log(sc->s, LOG_INFO, "ftp-scan verdict=none "
		    "reason=\"the transfer ended before the verdict\" file=\"%s\" "
		    "dir=%s size=%llu", sc->file, ftp_scan_dir_name(sc),
		    (unsigned long long)sc->size);
		sc->state = FTP_SCAN_GONE;
		if (sc->icap != NULL)
			px_icap_cancel(sc->icap);
		sc->icap = NULL;
		ftp_scan_wake_control(sc);
	}
	sc->busy = false;
	ftp_scan_maybe_free(sc);
}

void
ftp_scan_close(struct ftp_state *st)
{
	while (st->scans != NULL)
		ftp_scan_free(st->scans);
}
