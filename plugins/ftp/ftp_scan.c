/* ftp: files through the service's scanner (<scan>, proxyd/scan/). A
 * RETR's data (a download: RESPMOD) or a STOR/APPE/STOU's (an upload:
 * REQMOD), under a synthetic HTTP head that names the file, is copied to
 * the scanner as it comes and held until the verdict:
 *   - with deliver="after-verdict" (the default) the whole file, in a
 *     spool (spool.h: memory up to limits/@buffer, then an unnamed file,
 *     at most max-size), and the data connection's end (its FIN);
 *   - with deliver="tail" it goes on to the receiver as it comes but for
 *     the last FTP_SCAN_TAIL bytes (a quarter of limits/@buffer when that
 *     is smaller) and the FIN;
 *   - either way the server's final reply to the transfer command (a 2xx:
 *     the client hears of success only once the file is known clean).
 * Clean: the held bytes, the end and the reply go on. Infected (or the
 * scanner failed with on-error="block", or the file grew past max-size
 * with over-size="block"): the receiver's data connection is reset before
 * its last bytes, so a client never has the whole file and a server never
 * receives it whole, and the client gets a 550 (451 for a scanner's
 * failure) in place of the server's final reply.
 *
 * A transfer cut short before its verdict (ABOR, the receiver gone) is
 * judged on what reached the scanner: that much is ended as the whole
 * body, and the server's final reply (any code) waits for the verdict,
 * replaced by the 550 when infected; its log line and record say it was
 * not complete. A receiver gone once the scanner had the whole file is
 * judged on the whole file; only its record says not complete (lost).
 * The control connection's end from the server waits with a reply held
 * for a verdict (ftp.c: px_session_hold_end). (APPE and REST, which move a file in pieces, are refused
 * by ftp.c under <scan partial="refuse">.)
 *
 * The same inspection serves <content> and <audit> (with or without a
 * scanner): a file's first bytes (PX_SNIFF_BYTES at most) are held, with
 * the server's 2xx, until libmagic named its type (a denied type: reset
 * and 550 as above, before any byte reached the receiver); the record's
 * sha256 is fed the bytes as they are taken from the sender, and it is
 * written once the channel ended and the final reply went.
 *
 * And the size check of a download (<ftp size-mismatch>): the announced
 * size (the 150 reply's "(N bytes)", else the 213 answer to a SIZE of
 * that file) against the bytes that came. With "block" the transfer is
 * inspected even without a scanner, its tail and end held as for one:
 * a file longer than announced is cut (reset, 550) as soon as it passes
 * that size, a shorter one at its end, before its held tail went; its end
 * waits for the command's 1xx reply if that has not come yet (the data
 * connection may end before proxyd read the control's 150). With "allow"
 * a mismatch is logged when the transfer is inspected anyway.
 *
 * Memory per scanned transfer, besides the channel's own buffered relay
 * (up to limits/@buffer each way): the held tail or the spool's memory
 * part (limits/@buffer; its file part is on disk), and at most about
 * limits/@buffer of copy waiting to go to the scanner (past that the
 * sender is not read until the scanner has taken it). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "analyser.h"
#include "audit.h"
#include "auth.h"
#include "icap.h"
#include "parse.h"
#include "scan.h"
#include "sniff.h"
#include "spool.h"
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
	struct px_spool		*spool;		/* after-verdict: the file */
	bool			 to_fd;		/* the receiver's end is plain */
	enum px_dir		 dir;
	enum ftp_scan_state	 state;
	unsigned		 id;		/* ftp_pending's scan */
	bool			 reply_done;	/* its final reply went */
	int			 server_code;	/* the server's final reply */
	unsigned		 busy;		/* not to be freed: on the stack
						 * (nested: a verdict's release may
						 * end the channel inside) */
	bool			 starved;	/* the sender waits for the scanner */
	bool			 scanning;	/* <scan> covers it (else only
						 * <content> or <audit>) */
	uint64_t		 size;
	/* The size check: the announced size (-1: none), the command's 1xx
	 * came, the check holds the end (size-mismatch="block"), it is
	 * done, its mismatch was logged. */
	int64_t			 announced;
	bool			 prelim;
	bool			 size_check;
	bool			 size_done;
	bool			 size_told;
	bool			 restarted;	/* after a REST: not checked */
	bool			 cut;		/* the channel ended before the
						 * file's end: judged on what came */
	bool			 lost;		/* the receiver went after it,
						 * before the verdict: the held
						 * end never reached it */
	const char		*reason;	/* the record's, when refused */
	/* <content>: the file's first bytes, gathered (and held, in hold)
	 * until judged; then its type and the action taken. */
	struct px_sniff		*sniff;
	size_t			 sniff_want;
	char			 type[96];
	const char		*content;	/* accept, deny; NULL none */
	char			 rule[280];	/* the refusing rule; "" */
	/* <audit>: the record, fed as bytes pass; what it will say. */
	struct px_audit		*audit;
	const char		*scanned;	/* the scanner's verdict */
	const char		*verdict;	/* deny, error; NULL accept */
	char			 canon[FTP_PATH_MAX];	/* "": not known */
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

static void ftp_audit_end(struct ftp_scan *sc);

static void
ftp_scan_free(struct ftp_scan *sc)
{
	struct ftp_scan **pp;

	ftp_audit_end(sc);

	for (pp = &sc->st->scans; *pp != NULL; pp = &(*pp)->next)
		if (*pp == sc) {
			*pp = sc->next;
			break;
		}
	if (sc->icap != NULL)
		px_icap_cancel(sc->icap);
	if (sc->hold != NULL)
		evbuffer_free(sc->hold);
	px_spool_free(sc->spool);
	free(sc->sniff);
	px_audit_cancel(sc->audit);
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
	sc->verdict = sc->reply[0] == '5' ? "deny" : "error";
	if (sc->icap != NULL)
		px_icap_cancel(sc->icap);
	sc->icap = NULL;
	if (sc->hold != NULL)
		evbuffer_drain(sc->hold, evbuffer_get_length(sc->hold));
	px_spool_free(sc->spool);
	sc->spool = NULL;
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

/* ---- the size check ----------------------------------------------------- */

/* The bytes so far (longer: past the announced size; else the whole
 * file, short) are not what was announced: logged once; true when
 * refused (size-mismatch="block": blocked now). */
static bool
ftp_size_mismatch(struct ftp_scan *sc, bool longer)
{
	bool block = ((const struct ftp_policy *)px_session_policy(
	    sc->s))->size_mismatch_block;

	if (!sc->size_told) {
		sc->size_told = true;
		px_session_log(sc->s, LOG_NOTICE, "ftp-size mismatch "
		    "announced=%lld size=%llu%s action=%s file=\"%s\" user=%s "
		    "dir=%s", (long long)sc->announced,
		    (unsigned long long)sc->size, longer && sc->ch != NULL ?
		    "+" : "", block ?
		    "block" : "allow", sc->file, sc->st->user[0] != '\0' ?
		    sc->st->user : "-", ftp_scan_dir_name(sc));
	}
	if (!block)
		return false;
	sc->size_done = true;
	sc->reason = "size-mismatch";
	snprintf(sc->rule, sizeof(sc->rule), "ftp/@size-mismatch");
	ftp_scan_block(sc, "denied: size differs from the announced one",
	    "550 %s: refused: %s data than the announced size (%lld bytes)",
	    sc->file, longer ? "more" : "less", (long long)sc->announced);
	return true;
}

/* The file is whole: its size against the announced one, once the
 * command's 1xx (which may announce it) came. false: not yet. */
static bool
ftp_size_settle(struct ftp_scan *sc)
{
	if (sc->size_done || (!sc->prelim && sc->dir == PX_TO_CLIENT &&
	    sc->size_check))
		return sc->size_done;
	sc->size_done = true;
	if (sc->announced >= 0 && sc->size < (uint64_t)sc->announced)
		(void)ftp_size_mismatch(sc, false);
	return true;
}

/* The check's end held and nothing else awaited: what is held goes (from
 * the channel's callback, resumed), then the held reply. */
static void
ftp_size_release(struct ftp_scan *sc)
{
	if (sc->state != FTP_SCAN_ENDED || sc->icap != NULL)
		return;
	ftp_scan_pass(sc);
	if (sc->ch != NULL)
		px_channel_resume(sc->ch, sc->dir, true);
	ftp_scan_wake_control(sc);
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

/* After size=N in a verdict line: a transfer cut short is judged on
 * what came, and says so. */
static const char *
ftp_scan_cut(const struct ftp_scan *sc)
{
	return sc->cut ? " complete=no" : "";
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
		    "scanner=%s file=\"%s\" user=%s dir=%s size=%llu%s "
		    "istag=\"%s\"%s%s%s", scn->name, sc->file, user,
		    ftp_scan_dir_name(sc), (unsigned long long)sc->size,
		    ftp_scan_cut(sc), res->istag, res->error[0] ? " note=\"" :
		    "", res->error,
		    res->error[0] ? "\"" : "");
		ftp_scan_count(sc, "clean");
		sc->scanned = "clean";
		ftp_scan_pass(sc);
		return;
	case PX_ICAP_INFECTED:
	case PX_ICAP_MODIFIED:
		ftp_scan_threat(res, threat, sizeof(threat));
		px_session_log(sc->s, LOG_NOTICE, "ftp-scan verdict=infected "
		    "threat=\"%s\" scanner=%s file=\"%s\" user=%s dir=%s "
		    "size=%llu%s istag=\"%s\"", threat, scn->name, sc->file,
		    user, ftp_scan_dir_name(sc), (unsigned long long)sc->size,
		    ftp_scan_cut(sc), res->istag);
		ftp_scan_count(sc, "infected");
		sc->scanned = "infected";
		if (sc->audit != NULL)
			snprintf(sc->audit->threat, sizeof(sc->audit->threat),
			    "%s", threat);
		ftp_scan_block(sc, "denied: infected (content scan)", "550 %s: "
		    "blocked by content scan (threat %s)", sc->file, threat);
		return;
	case PX_ICAP_ERROR:
		break;
	}
	px_log_escape(why, sizeof(why), res->error, strlen(res->error), true);
	px_session_log(sc->s, LOG_WARNING, "ftp-scan verdict=error "
	    "reason=\"%s\" scanner=%s file=\"%s\" user=%s dir=%s%s "
	    "on-error=%s", why, scn->name, sc->file, user,
	    ftp_scan_dir_name(sc), ftp_scan_cut(sc), scn->on_error_allow ?
	    "allow" : "block");
	if (scn->on_error_allow) {
		ftp_scan_count(sc, "error-allowed");
		sc->scanned = "error-allowed";
		ftp_scan_pass(sc);
		return;
	}
	ftp_scan_count(sc, "error");
	sc->scanned = "error";
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
	sc->busy++;
	/* The receiver closed its end of the data connection (a FIN: FTP's
	 * carries one way) before the held end went: it left, and what goes
	 * now does not reach it. */
	if (sc->ch != NULL && px_channel_input_closed(sc->ch,
	    sc->dir == PX_TO_CLIENT ? PX_TO_SERVER : PX_TO_CLIENT))
		sc->lost = true;
	ftp_scan_verdict(sc, res);
	if (sc->state == FTP_SCAN_PASSED && sc->size_check &&
	    !ftp_size_settle(sc)) {
		/* Clean, but the size is still to be checked (its 1xx). */
		sc->state = FTP_SCAN_ENDED;
	}
	if (sc->state == FTP_SCAN_PASSED) {
		/* The held tail goes from the channel's callback, then the
		 * end; then the held reply. */
		if (sc->ch != NULL)
			px_channel_resume(sc->ch, sc->dir, true);
		ftp_scan_wake_control(sc);
	}
	sc->busy--;
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
	if (sc->hold == NULL)
		sc->hold = evbuffer_new();
	if (!ftp_scan_policy(sc)->deliver_tail && sc->spool == NULL)
		sc->spool = px_spool_new(ftp_scan_policy(sc)->spool_dir,
		    px_session_buffer(sc->s), ftp_scan_policy(sc)->max_size);
	if (sc->hold != NULL && (sc->spool != NULL ||
	    ftp_scan_policy(sc)->deliver_tail))
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

/* The spool could not hold the file or give it back: refused as a
 * scanner's failure would be, whatever on-error says (the file was not
 * kept whole, so it cannot be delivered whole). */
static void
ftp_scan_spool_fail(struct ftp_scan *sc, const char *why)
{
	char esc[192];

	px_log_escape(esc, sizeof(esc), why, strlen(why), true);
	px_session_log(sc->s, LOG_WARNING, "ftp-scan verdict=error "
	    "reason=\"%s\" scanner=%s file=\"%s\" user=%s dir=%s",
	    esc, ftp_scan_policy(sc)->scanner->name, sc->file,
	    sc->st->user[0] != '\0' ? sc->st->user : "-",
	    ftp_scan_dir_name(sc));
	ftp_scan_count(sc, "error");
	sc->scanned = "error";
	sc->reason = "spool";
	ftp_scan_block(sc, "denied: the scan's spool failed", "451 %s: not "
	    "transferred: %s", sc->file, esc);
}

/* Everything the spool held goes to the receiver (the verdict let it
 * through); false when it could not (the transfer was blocked). */
static bool
ftp_scan_unspool(struct ftp_scan *sc, struct evbuffer *out)
{
	const char *why;

	if (sc->spool == NULL || out == NULL)
		return true;
	if (px_spool_release(sc->spool, out, sc->to_fd, &why) == -1) {
		ftp_scan_spool_fail(sc, why);
		return false;
	}
	px_spool_free(sc->spool);
	sc->spool = NULL;
	return true;
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
	sc->scanned = p->over_size_allow ? "over-size-allowed" : "over-size";
	ftp_scan_count(sc, sc->scanned);
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

/* ---- <content>: the file's type ----------------------------------------- */

/* The first bytes are in (or the file ended before them): libmagic names
 * the type, the first <content> rule naming it decides. Refused: the
 * receiver's connection is reset, the client gets a 550. */
static void
ftp_sniff_judge(struct ftp_scan *sc)
{
	const struct px_content_policy *cp = &ftp_scan_policy(sc)->content;
	struct px_content_verdict v;
	struct px_content_who who;
	size_t n = sc->sniff->n;

	px_content_judge_for(cp, px_auth_content_who(ftp_auth_id(sc->st), &who),
	    sc->sniff->buf, n, &v);
	free(sc->sniff);
	sc->sniff = NULL;
	memcpy(sc->type, v.type, sizeof(sc->type));
	sc->content = v.deny ? "deny" : "accept";
	px_content_count(px_session_service(sc->s), sc->content);
	px_session_log(sc->s, v.deny ? LOG_NOTICE : LOG_INFO, "ftp-content "
	    "type=%s action=%s rule=%s file=\"%s\" user=%s dir=%s sniffed=%zu"
	    "%s%s%s", v.type, sc->content, v.rule != NULL ? v.rule->ref :
	    v.deny ? "libmagic" : "-", sc->file, sc->st->user[0] != '\0' ?
	    sc->st->user : "-", ftp_scan_dir_name(sc), n, v.error[0] != '\0' ?
	    " reason=\"" : "", v.error, v.error[0] != '\0' ? "\"" : "");
	if (!v.deny)
		return;
	snprintf(sc->rule, sizeof(sc->rule), "%s", v.rule != NULL ?
	    v.rule->ref : "libmagic");
	/* What was taken from the sender counts in the record. */
	px_audit_feed_evbuffer(sc->audit, sc->hold,
	    evbuffer_get_length(sc->hold));
	ftp_scan_block(sc, "denied: file type not allowed (content)",
	    "550 %s: file type not allowed (%s)", sc->file, v.type);
}

/* Gathers the file's first bytes, all of them held (in hold) until they
 * are judged. false: not yet (nothing left in `in`); true: judged, and
 * when accepted what was held is back at the front of `in`. */
static bool
ftp_sniff_gather(struct ftp_scan *sc, struct evbuffer *in, size_t n,
    bool eof)
{
	bool full = px_sniff_add(sc->sniff, in, n, sc->sniff_want);

	evbuffer_add_buffer(sc->hold, in);
	if (!full && !eof)
		return false;
	if (sc->sniff->n == 0) {
		/* An empty file has no type to judge. */
		free(sc->sniff);
		sc->sniff = NULL;
	} else
		ftp_sniff_judge(sc);
	if (sc->state == FTP_SCAN_RUN)
		evbuffer_prepend_buffer(in, sc->hold);
	return true;
}

/* ---- the audit record --------------------------------------------------- */

/* The transfer is over (its channel and its final reply are through, or
 * the session ended): its record, if it has one, is written. */
static void
ftp_audit_end(struct ftp_scan *sc)
{
	struct px_audit_info in;

	if (sc->audit == NULL || px_audit_drop_below(&sc->audit,
	    ftp_scan_policy(sc)->audit_min_size))
		return;
	in = (struct px_audit_info){
		.user = sc->st->user[0] != '\0' ? sc->st->user : NULL,
		.auth = ftp_auth_id(sc->st) != NULL ? "password" : NULL,
		.rule = sc->rule[0] != '\0' ? sc->rule : NULL,
		.file = sc->canon[0] != '\0' ? sc->canon : sc->file,
		.direction = ftp_scan_dir_name(sc),
		.scan_verdict = sc->scanned,
		.content_type = sc->type[0] != '\0' ? sc->type : NULL,
		.content_action = sc->content,
		.verdict = sc->verdict != NULL ? sc->verdict : "accept",
		.reason = sc->reason,
		.complete = !sc->cut && !sc->lost &&
		    sc->state == FTP_SCAN_PASSED &&
		    sc->server_code / 100 == 2,
	};
	px_session_audit_info(sc->s, "ftp", px_session_server(sc->s), &in);
	px_audit_end(sc->audit, &in);
	sc->audit = NULL;
}

static enum px_verdict ftp_scan_data(void *arg, enum px_dir dir,
    struct evbuffer *in);

/* The file is whole (all of it in hold, its tail not sent): the scanner
 * has it all; without one the size check settles it now or, short of its
 * 1xx, holds the end until that came. */
static enum px_verdict
ftp_scan_eof(struct ftp_scan *sc, enum px_dir dir, struct evbuffer *in)
{
	sc->state = FTP_SCAN_ENDED;
	if (sc->icap != NULL) {
		px_icap_end(sc->icap);
		(void)ftp_size_settle(sc);
		if (sc->state != FTP_SCAN_ENDED)
			return ftp_scan_data(sc, dir, in);	/* blocked */
		px_channel_hold_end(sc->ch, dir);
		return PX_PASS;
	}
	if (!ftp_size_settle(sc)) {
		px_channel_hold_end(sc->ch, dir);
		return PX_PASS;
	}
	if (sc->state == FTP_SCAN_ENDED) {
		ftp_scan_pass(sc);
		ftp_scan_wake_control(sc);
	}
	return ftp_scan_data(sc, dir, in);	/* passed or blocked */
}

/* The channel's bytes (px_channel_inspect). */
static enum px_verdict
ftp_scan_data(void *arg, enum px_dir dir, struct evbuffer *in)
{
	struct ftp_scan *sc = arg;
	struct evbuffer *out;
	size_t n = evbuffer_get_length(in), len, tail;
	const char *why;
	bool eof;

	if (dir != sc->dir)
		return PX_PASS;	/* nothing comes the other way */
	out = px_channel_output(sc->ch, dir);
	switch (sc->state) {
	case FTP_SCAN_RUN:
		break;
	case FTP_SCAN_PASSED:
	case FTP_SCAN_GONE:
		if (!ftp_scan_unspool(sc, out))
			return ftp_scan_data(arg, dir, in);	/* blocked */
		if (sc->hold != NULL && out != NULL)
			evbuffer_add_buffer(out, sc->hold);
		px_audit_feed_evbuffer(sc->audit, in, n);
		return PX_PASS;
	default:
		/* Blocked, or ended and waiting: nothing more goes. */
		evbuffer_drain(in, n);
		return PX_MORE;
	}
	eof = px_channel_input_closed(sc->ch, dir);
	if (sc->sniff != NULL) {
		if (!ftp_sniff_gather(sc, in, n, eof))
			return PX_MORE;
		if (sc->state != FTP_SCAN_RUN || (!sc->scanning &&
		    !sc->size_check)) {
			if (sc->state == FTP_SCAN_RUN) {
				/* Accepted, no scanner: all goes on. */
				sc->state = FTP_SCAN_PASSED;
				ftp_scan_wake_control(sc);
			}
			return ftp_scan_data(arg, dir, in);
		}
		n = evbuffer_get_length(in);
	}
	if (sc->scanning && sc->icap == NULL && eof && n == 0) {
		/* An empty file: nothing to scan (as an empty HTTP body). */
		sc->scanning = false;
		if (!sc->size_check) {
			sc->state = FTP_SCAN_PASSED;
			ftp_scan_wake_control(sc);
			return PX_PASS;
		}
	}
	if (sc->scanning && sc->icap == NULL && ftp_scan_start_icap(sc) == -1)
		return ftp_scan_data(arg, dir, in);	/* passed or blocked */
	/* The scanner is behind: the sender waits (its bytes stay in `in`,
	 * which stops reading once full). At the end all goes. */
	if (sc->icap != NULL && !eof &&
	    px_icap_queued(sc->icap) >= px_session_buffer(sc->s)) {
		sc->starved = true;
		return PX_MORE;
	}
	sc->size += n;
	if (sc->announced >= 0 && sc->size > (uint64_t)sc->announced &&
	    ftp_size_mismatch(sc, true))
		return ftp_scan_data(arg, dir, in);	/* blocked */
	if (sc->icap != NULL && sc->size > ftp_scan_policy(sc)->max_size) {
		ftp_scan_over_size(sc);
		return ftp_scan_data(arg, dir, in);	/* passed or blocked */
	}
	if (sc->icap != NULL)
		px_icap_body(sc->icap, in, n);
	px_audit_feed_evbuffer(sc->audit, in, n);
	if (sc->icap != NULL && sc->spool != NULL) {
		/* after-verdict: not a byte goes before the verdict. */
		if (px_spool_add(sc->spool, in, n, &why) == -1) {
			ftp_scan_spool_fail(sc, why);
			return ftp_scan_data(arg, dir, in);	/* blocked */
		}
		if (eof)
			return ftp_scan_eof(sc, dir, in);
		return PX_PASS;
	}
	evbuffer_add_buffer(sc->hold, in);
	tail = ftp_scan_tail(sc);
	if ((len = evbuffer_get_length(sc->hold)) > tail && out != NULL)
		evbuffer_remove_buffer(sc->hold, out, len - tail);
	if (eof)
		return ftp_scan_eof(sc, dir, in);
	return PX_PASS;
}

/* What a transfer needs besides its scan: the sniffer for <content> (its
 * bytes held from the start: a buffer and a quarter of limits/@buffer at
 * most, as http), the record for <audit>. -1: out of memory. */
static int
ftp_scan_inspect_setup(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, struct ftp_scan *sc, bool auditing)
{
	const struct px_scan_policy *p = px_session_scan(s);
	size_t want = px_session_buffer(s) / 4;

	sc->announced = -1;
	if (!sc->scanning && p->content.n == 0 && !sc->size_check)
		sc->state = FTP_SCAN_PASSED;	/* only the record */
	if (sc->size_check && (sc->hold = evbuffer_new()) == NULL)
		return -1;
	if (p->content.n != 0) {
		if ((sc->sniff = calloc(1, sizeof(*sc->sniff))) == NULL ||
		    (sc->hold == NULL && (sc->hold = evbuffer_new()) == NULL))
			return -1;
		sc->sniff_want = want == 0 ? 1 : want < PX_SNIFF_BYTES ? want :
		    PX_SNIFF_BYTES;
	}
	/* NULL (out of memory): the transfer goes unrecorded. */
	if (auditing)
		sc->audit = px_audit_begin(-1);
	if (ftp_path_resolve(st->path.lost ? "/" : st->path.cwd, c->arg,
	    c->arglen, false, sc->canon, sizeof(sc->canon)) != FTP_PATH_OK ||
	    (st->path.lost && c->arg[0] != '/'))
		sc->canon[0] = '\0';
	/* A download of the file the client asked the SIZE of. */
	if (sc->dir == PX_TO_CLIENT && st->size_val >= 0 &&
	    sc->canon[0] != '\0' && strcmp(st->size_path, sc->canon) == 0)
		sc->announced = st->size_val;
	if (sc->audit != NULL)
		sc->audit->announced = sc->announced;
	if (sc->restarted)
		sc->announced = -1;
	/* One SIZE tells of one transfer (the file may change). */
	st->size_val = -1;
	return 0;
}

int
ftp_scan_begin(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, bool upload)
{
	const struct px_scan_policy *p = px_session_scan(s);
	struct px_content_who who;
	bool scanning = px_scan_on(p, upload ? PX_SCAN_UPLOAD :
	    PX_SCAN_DOWNLOAD, px_auth_content_who(ftp_auth_id(st), &who));
	bool auditing = p->audit && px_audit_enabled();
	bool restarted = st->rest;
	bool size_check = !upload && !restarted && ((const struct ftp_policy *)
	    px_session_policy(s))->size_mismatch_block;
	struct ftp_scan *sc;

	st->rest = false;
	if (st->ch == NULL || (!scanning && p->content.n == 0 && !auditing &&
	    !size_check))
		return 0;
	if ((sc = calloc(1, sizeof(*sc))) == NULL)
		return -1;
	sc->scanning = scanning;
	sc->size_check = size_check;
	sc->restarted = restarted;
	sc->dir = upload ? PX_TO_SERVER : PX_TO_CLIENT;
	if (ftp_scan_inspect_setup(s, st, c, sc, auditing) == -1)
		goto fail;
	sc->s = s;
	sc->st = st;
	sc->ch = st->ch;
	/* The receiver's end of the data channel speaks TLS (ftp_tls_data):
	 * a released spool is mapped for it, else sent by sendfile. */
	sc->to_fd = upload ? !(st->tls.on[PX_CHAN_SERVER] &&
	    st->tls.sprot_p) : !(st->tls.on[PX_CHAN_CLIENT] &&
	    st->tls.cprot_p);
	sc->id = ++st->scan_gen != 0 ? st->scan_gen : ++st->scan_gen;
	snprintf(sc->verb, sizeof(sc->verb), "%s", c->verb);
	px_log_escape(sc->file, sizeof(sc->file), c->arg, c->arglen, true);
	ftp_scan_url_path(st, c->arg, c->arglen, sc->path, sizeof(sc->path));
	if (px_channel_inspect(st->ch, ftp_scan_data, sc) == -1)
		goto fail;
	sc->next = st->scans;
	st->scans = sc;
	return (int)sc->id;
fail:
	free(sc->sniff);
	px_audit_cancel(sc->audit);
	if (sc->hold != NULL)
		evbuffer_free(sc->hold);
	free(sc);
	return -1;
}

enum ftp_scan_reply
ftp_scan_reply(struct ftp_state *st, unsigned id, int code)
{
	struct ftp_scan *sc = ftp_scan_find(st, id);

	if (sc == NULL)
		return FTP_SCAN_FORWARD;
	sc->server_code = code;
	switch (sc->state) {
	case FTP_SCAN_RUN:
	case FTP_SCAN_ENDED:
		/* Success is told once the file is known clean; a failure
		 * needs no verdict, unless the transfer was cut short (the
		 * 426 after an ABOR): its verdict comes first, with what
		 * follows (the session stays for it). */
		return code / 100 == 2 || sc->cut || sc->lost ?
		    FTP_SCAN_HOLD : FTP_SCAN_FORWARD;
	case FTP_SCAN_BLOCKED:
		return FTP_SCAN_REPLACE;
	default:
		return FTP_SCAN_FORWARD;
	}
}

void
ftp_size_sent(struct ftp_state *st, const struct ftp_cmd *c)
{
	st->size_val = -1;
	if (st->path.lost && c->arg[0] != '/')
		st->size_path[0] = '\0';
	else if (ftp_path_resolve(st->path.lost ? "/" : st->path.cwd, c->arg,
	    c->arglen, false, st->size_path, sizeof(st->size_path)) !=
	    FTP_PATH_OK)
		st->size_path[0] = '\0';
}

void
ftp_size_reply(struct ftp_state *st, const char *verb, int code,
    const char *line, size_t len)
{
	int64_t v = 0;
	size_t i, digits = 0;

	if (strcmp(verb, "SIZE") != 0 || code != 213 || st->size_path[0] == '\0')
		return;
	/* "213 N" (RFC 3659): N decimal, nothing else. */
	for (i = 4; i < len && line[i] >= '0' && line[i] <= '9' &&
	    digits < 18; i++, digits++)
		v = v * 10 + (line[i] - '0');
	while (i < len && (line[i] == '\r' || line[i] == '\n'))
		i++;
	if (len > 4 && line[3] == ' ' && digits > 0 && i == len)
		st->size_val = v;
}

void
ftp_scan_announced(struct ftp_state *st, unsigned id, const char *line,
    size_t len)
{
	struct ftp_scan *sc = ftp_scan_find(st, id);
	const char *open = NULL, *end = line + len;
	const char *q;
	uint64_t v = 0;
	size_t digits = 0;

	if (sc == NULL)
		return;
	sc->prelim = true;
	/* STOU: the server names the file it makes (RFC 1123 4.1.2.9:
	 * "150 FILE: name"; vsftpd says so). */
	if (sc->audit != NULL && strcmp(sc->verb, "STOU") == 0 && len > 10 &&
	    memcmp(line, "150 FILE: ", 10) == 0) {
		size_t n = len - 10;

		while (n > 0 && (line[10 + n - 1] == '\r' ||
		    line[10 + n - 1] == '\n'))
			n--;
		if (ftp_path_resolve(st->path.lost ? "/" : st->path.cwd,
		    line + 10, n, false, sc->canon, sizeof(sc->canon)) !=
		    FTP_PATH_OK || (st->path.lost && line[10] != '/'))
			px_log_escape(sc->canon, sizeof(sc->canon), line + 10,
			    n, true);
		return;
	}
	for (q = line; q < end; q++)
		if (*q == '(')
			open = q;
	for (q = open != NULL ? open + 1 : end; q < end && *q >= '0' &&
	    *q <= '9' && digits < 18; q++, digits++)
		v = v * 10 + (uint64_t)(*q - '0');
	if (digits > 0 && (size_t)(end - q) >= 7 &&
	    memcmp(q, " bytes)", 7) == 0 && sc->dir == PX_TO_CLIENT) {
		if (!sc->restarted)
			sc->announced = (int64_t)v;
		if (sc->audit != NULL)
			sc->audit->announced = (int64_t)v;
	}
	/* A download's end waiting for this reply: checked now. */
	if (sc->state != FTP_SCAN_ENDED || sc->size_done)
		return;
	sc->busy++;
	if (sc->size > (uint64_t)sc->announced && sc->announced >= 0)
		(void)ftp_size_mismatch(sc, true);
	else
		(void)ftp_size_settle(sc);
	ftp_size_release(sc);
	sc->busy--;
	ftp_scan_maybe_free(sc);
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

bool
ftp_scan_reply_held(const struct ftp_state *st)
{
	const struct ftp_scan *sc;

	for (sc = st->scans; sc != NULL; sc = sc->next)
		if ((sc->state == FTP_SCAN_RUN || sc->state == FTP_SCAN_ENDED) &&
		    sc->server_code != 0 && !sc->reply_done)
			return true;
	return false;
}

void
ftp_scan_chan_gone(struct ftp_state *st, const struct px_channel *ch,
    const struct px_chan_result *r)
{
	const uint64_t *bytes = r != NULL ? r->bytes : NULL;
	struct ftp_scan *sc;

	for (sc = st->scans; sc != NULL; sc = sc->next)
		if (sc->ch == ch)
			break;
	if (sc == NULL)
		return;
	sc->ch = NULL;
	sc->busy++;
	if (r != NULL && sc->audit != NULL) {
		snprintf(sc->audit->data_ja4, sizeof(sc->audit->data_ja4),
		    "%s", r->ja4);
		snprintf(sc->audit->data_ja4s, sizeof(sc->audit->data_ja4s),
		    "%s", r->ja4s);
	}
	if (bytes != NULL && sc->state == FTP_SCAN_PASSED &&
	    !sc->size_check && !sc->size_told && sc->announced >= 0 &&
	    bytes[sc->dir] != (uint64_t)sc->announced) {
		/* Not counted on the way (only recorded, or only sniffed):
		 * the channel's count tells (size-mismatch="allow"). */
		sc->size = bytes[sc->dir];
		(void)ftp_size_mismatch(sc, sc->size > (uint64_t)sc->announced);
	}
	if (sc->state == FTP_SCAN_ENDED && sc->icap != NULL) {
		/* The scanner has the whole file: its verdict is the whole
		 * file's (no complete=no); only the end held for it never
		 * reaches the receiver now. */
		sc->lost = true;
	} else if (sc->state == FTP_SCAN_RUN && sc->icap != NULL) {
		/* Cut short (ABOR, a peer went, a timeout) with bytes at the
		 * scanner: judged on what came, as a whole file would be
		 * (the rest may come another way). The server's 2xx waits
		 * for the verdict as usual; the receiver is gone, so there
		 * is nothing left to reset. */
		sc->cut = true;
		sc->size_done = true;	/* short, of course */
		sc->state = FTP_SCAN_ENDED;
		px_icap_end(sc->icap);
	} else if (sc->state == FTP_SCAN_RUN || sc->state == FTP_SCAN_ENDED) {
		/* Nothing at the scanner (no scan, or not started): no
		 * verdict to wait for; the server's reply tells what
		 * happened. */
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
	sc->busy--;
	ftp_scan_maybe_free(sc);
}

void
ftp_scan_close(struct ftp_state *st)
{
	while (st->scans != NULL)
		ftp_scan_free(st->scans);
}
