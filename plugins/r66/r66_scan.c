/* r66: each file a scanned transfer carries goes through the service's
 * scanner (<scan>, proxyd/scan/) as it passes: REQMOD with a PUT naming
 * the file for a file the client sends (upload), RESPMOD with a GET and a
 * 200 for one it receives (download). The Data blocks' bytes are copied
 * to the scanner (the frames themselves are judged whole, never spliced,
 * while their transfer is scanned); the last Data frame and whatever of
 * the transfer follows it from the sender (its EndTransfer) are held
 * until the verdict, and with deliver="after-verdict" (the default) every
 * frame before it too, in a spool (spool.h: memory up to limits/@buffer,
 * then an unnamed file), released once the file is clean. The receiver
 * thus never has the whole file, nor its end of transfer with the global
 * digest, before the scanner said yes (after-verdict: none of it).
 *
 * The same inspection serves <content> and <audit> (with or without a
 * scanner), and the end held for the size check (r66/@size-mismatch):
 *   - <content>: the file's first PX_SNIFF_BYTES are gathered from its
 *     blocks while every frame of the transfer is held; libmagic names
 *     the type once they are in (or at the EndTransfer of a shorter file),
 *     and a denied type refuses the transfer (an ErrorPacket to both ends,
 *     code 'a') before any block of the file reached the receiver;
 *   - <audit>: the record's sha256 is fed each block as it is taken, and
 *     the record is written when the transfer ends (r66_scan_free), with
 *     the outcome r66.c noted (r66_scan_outcome);
 *   - the last Data frame is held until the sender's next frame, so that
 *     an EndTransfer the size check refuses finds the file's end held.
 *
 * Memory per scanned transfer, at most: the held frames (one Data frame,
 * under max-block + 98 bytes, and the EndTransfer, a few dozen bytes; while
 * the type is unjudged, the frames of the first 4 KiB, at most
 * R66_SNIFF_HELD_MAX plus one frame), plus what waits to go to the
 * scanner: R66_SCAN_QUEUED_MAX, plus the last block fed, plus the
 * spool's memory part (limits/@buffer; its file part on disk). Over that the
 * session stops reading the sender's side until the scanner took it
 * (r66_scan_full). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "audit.h"
#include "icap.h"
#include "parse.h"
#include "r66_int.h"
#include "r66_scan.h"
#include "scan.h"
#include "sniff.h"
#include "spool.h"

#define R66_SCAN_QUEUED_MAX	(128 * 1024)
/* Frames held while the file's type is unjudged: past this (blocks of a
 * few bytes, or empty ones) it is judged on what came. */
#define R66_SNIFF_HELD_MAX	(64 * 1024)
/* A spool holds the frames as they will be sent: room for their heads
 * beyond max-size (blocks so small that theirs pass it are refused). */
#define R66_SPOOL_SLACK		(1024 * 1024)

struct r66_scan {
	struct px_session	*s;
	const struct px_scanner	*scanner;
	struct px_icap_req	*icap;		/* NULL once it answered */
	struct r66_scan_what	 what;
	enum px_dir		 dir;
	struct evbuffer		*tail;		/* the frames held */
	/* deliver="after-verdict", while scanning: every frame before the
	 * held last one (spool.h), until the verdict; NULL otherwise. */
	struct px_spool		*spool;
	uint64_t		 size;		/* block bytes scanned */
	bool			 ended;		/* the EndTransfer is held */
	bool			 stalled;	/* the scanner's queue is full */
	bool			 has_result;
	bool			 scanning;	/* <scan> covers it (icap) */
	bool			 passed;	/* nothing held any more */
	struct px_icap_result	 res;
	/* <content>: the first bytes, until judged (then NULL); the type
	 * and what was made of it. */
	struct px_sniff		*sniff;
	char			 type[96];
	const char		*content;	/* accept, deny; NULL: none */
	/* <audit>: the record, and what it will say. */
	struct px_audit		*audit;
	const char		*scanned;	/* the scanner's verdict */
	const char		*verdict;	/* accept, deny, error */
	char			 why[64];	/* reason= of the refusal */
	char			 ref[280];	/* policy-rule= of it */
};

static const char *
r66_scan_dir_name(bool upload)
{
	return upload ? "upload" : "download";
}

/* One r66-scan line: verdict (and threat or reason) first, then what the
 * transfer is, then `extra`. */
static void
r66_scan_log(struct px_session *s, int level, const struct px_scanner *scn,
    const struct r66_scan_what *w, const char *verdict, const char *extra)
{
	char file[400], host[200], rule[300];

	px_session_log(s, level, "r66-scan %s scanner=%s file=%s host=%s "
	    "rule=%s dir=%s%s%s", verdict, scn->name,
	    px_log_escape(file, sizeof(file), w->file, strlen(w->file), false),
	    px_log_escape(host, sizeof(host), w->host, strlen(w->host), false),
	    px_log_escape(rule, sizeof(rule), w->rule, strlen(w->rule), false),
	    r66_scan_dir_name(w->upload), extra[0] != '\0' ? " " : "", extra);
}

static void
r66_scan_count(struct px_session *s, const struct px_scanner *scn,
    const char *verdict)
{
	px_scan_count(px_session_service(s), scn->name, verdict);
}

/* The ErrorPacket's text is what (and detail), cut to fit. */
static void
r66_refusal(struct r66_scan_refusal *why, char code, const char *reason,
    const char *what, const char *detail)
{
	size_t n = 0;

	why->code = code;
	why->why = reason;
	why->ref[0] = '\0';
	why->counter = R66_C_DENIED_SCAN;
	for (; *what != '\0' && n < sizeof(why->msg) - 1; what++)
		why->msg[n++] = *what;
	for (; *detail != '\0' && n < sizeof(why->msg) - 1; detail++)
		why->msg[n++] = *detail;
	why->msg[n] = '\0';
}

/* The file cannot be scanned (reason): the scanner's on-error decides. */
static enum r66_scan_state
r66_scan_failed(struct px_session *s, const struct px_scanner *scn,
    const struct r66_scan_what *w, const char *reason,
    struct r66_scan_refusal *why)
{
	char verdict[200], extra[32];

	snprintf(verdict, sizeof(verdict), "verdict=error reason=\"%s\"",
	    reason);
	snprintf(extra, sizeof(extra), "on-error=%s", scn->on_error_allow ?
	    "allow" : "block");
	r66_scan_log(s, LOG_WARNING, scn, w, verdict, extra);
	if (scn->on_error_allow) {
		r66_scan_count(s, scn, "error-allowed");
		return R66_SCAN_OFF;
	}
	r66_scan_count(s, scn, "error");
	r66_refusal(why, 'a', "scan-error", "the file could not be scanned: ",
	    reason);
	return R66_SCAN_REFUSE;
}

/* size (plus `more` when it is a lower bound) is over max-size. */
static enum r66_scan_state
r66_scan_over(struct px_session *s, const struct px_scan_policy *p,
    const struct r66_scan_what *w, uint64_t size, bool more,
    struct r66_scan_refusal *why)
{
	char extra[128];

	snprintf(extra, sizeof(extra), "size=%llu%s max-size=%llu over-size=%s",
	    (unsigned long long)size, more ? "+" : "",
	    (unsigned long long)p->max_size, p->over_size_allow ? "allow" :
	    "block");
	r66_scan_log(s, LOG_NOTICE, p->scanner, w, "verdict=over-size", extra);
	if (p->over_size_allow) {
		r66_scan_count(s, p->scanner, "over-size-allowed");
		return R66_SCAN_OFF;
	}
	r66_scan_count(s, p->scanner, "over-size");
	r66_refusal(why, 'd', "scan-over-size",
	    "file over the scanner's max-size", "");
	return R66_SCAN_REFUSE;
}

/* Percent-encodes in for a request line or a Host value. */
static void
r66_scan_enc(char *out, size_t cap, const char *in)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *in != '\0' && o + 4 < cap; in++) {
		unsigned char ch = (unsigned char)*in;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~/", ch) != NULL) {
			out[o++] = (char)ch;
			continue;
		}
		out[o++] = '%';
		out[o++] = hex[ch >> 4];
		out[o++] = hex[ch & 15];
	}
	out[o] = '\0';
}

static void
r66_scan_cb(void *arg, const struct px_icap_result *res)
{
	struct r66_scan *sc = arg;

	if (res == NULL) {
		if (!sc->stalled)
			return;
		sc->stalled = false;
	} else {
		sc->icap = NULL;	/* freed after this callback */
		sc->res = *res;
		sc->has_result = true;
	}
	/* on_data settles it (or reads on); sc may be gone after this. */
	px_session_resume(sc->s, sc->dir);
}

/* Starts the ICAP request: the heads name the file as an HTTP transfer
 * would (a PUT to the server for an upload, a GET's 200 for a download). */
static struct px_icap_req *
r66_scan_icap(struct r66_scan *sc)
{
	const struct r66_scan_what *w = &sc->what;
	char file[3 * R66_NAME_MAX + 2], host[3 * 128 + 2];
	char rq[sizeof(file) + sizeof(host) + 64], rs[128];
	int rql, rsl = 0;

	r66_scan_enc(file, sizeof(file), w->file);
	r66_scan_enc(host, sizeof(host), w->server[0] != '\0' ? w->server :
	    "r66");
	rql = snprintf(rq, sizeof(rq), "%s /%s HTTP/1.1\r\nHost: %s\r\n\r\n",
	    w->upload ? "PUT" : "GET", file[0] == '/' ? file + 1 : file, host);
	if (rql < 0 || (size_t)rql >= sizeof(rq))
		return NULL;
	if (!w->upload) {
		if (w->length >= 0)
			rsl = snprintf(rs, sizeof(rs), "HTTP/1.1 200 OK\r\n"
			    "Content-Type: application/octet-stream\r\n"
			    "Content-Length: %lld\r\n\r\n",
			    (long long)w->length);
		else
			rsl = snprintf(rs, sizeof(rs), "HTTP/1.1 200 OK\r\n"
			    "Content-Type: application/octet-stream\r\n\r\n");
	}
	return px_icap_start(px_session_base(sc->s), sc->scanner, !w->upload,
	    rq, (size_t)rql, rs, (size_t)rsl, r66_scan_cb, sc);
}

/* ---- <content>: the file's type --------------------------------------- */

/* One r66-content line, and the count. */
static void
r66_content_log(struct r66_scan *sc, const struct px_content_verdict *v,
    size_t sniffed)
{
	const struct r66_scan_what *w = &sc->what;
	char file[400], host[200], rule[300];

	px_content_count(px_session_service(sc->s), sc->content);
	px_session_log(sc->s, v->deny ? LOG_NOTICE : LOG_INFO, "r66-content "
	    "type=%s action=%s rule=%s file=%s host=%s r66-rule=%s dir=%s "
	    "sniffed=%zu%s%s%s", v->type, sc->content, v->rule != NULL ?
	    v->rule->ref : v->deny ? "libmagic" : "-",
	    px_log_escape(file, sizeof(file), w->file, strlen(w->file), false),
	    px_log_escape(host, sizeof(host), w->host, strlen(w->host), false),
	    px_log_escape(rule, sizeof(rule), w->rule, strlen(w->rule), false),
	    r66_scan_dir_name(w->upload), sniffed, v->error[0] != '\0' ?
	    " reason=\"" : "", v->error, v->error[0] != '\0' ? "\"" : "");
}

/* The first bytes are in (or the file ended, or too many frames came
 * before them): libmagic names the type, the first <content> naming it
 * decides. REFUSE: denied (*why says so); ON: accepted. */
static enum r66_scan_state
r66_content_judge(struct r66_scan *sc, struct r66_scan_refusal *why)
{
	const struct px_content_policy *cp = &px_session_scan(sc->s)->content;
	struct px_content_verdict v;
	size_t n = sc->sniff->n;

	if (n == 0) {
		/* An empty file has no type to judge. */
		free(sc->sniff);
		sc->sniff = NULL;
		return R66_SCAN_ON;
	}
	px_content_judge(cp, sc->sniff->buf, n, &v);
	free(sc->sniff);
	sc->sniff = NULL;
	memcpy(sc->type, v.type, sizeof(sc->type));
	sc->content = v.deny ? "deny" : "accept";
	r66_content_log(sc, &v, n);
	if (!v.deny)
		return R66_SCAN_ON;
	r66_refusal(why, 'a', "content-type", "file type not allowed: ",
	    v.type);
	snprintf(why->ref, sizeof(why->ref), "%s", v.rule != NULL ?
	    v.rule->ref : "libmagic");
	why->counter = R66_C_DENIED_CONTENT;
	return R66_SCAN_REFUSE;
}

/* ---- the transfer ----------------------------------------------------- */

/* Whether <scan> covers the transfer: true with *state ON, or false with
 * *state OFF (not scanned: allowed unscanned, or no <scan> for it) or
 * REFUSE. *scanned: the record's scan_verdict when decided here. */
static bool
r66_scan_covers(struct px_session *s, const struct r66_scan_what *w,
    enum r66_scan_state *state, const char **scanned,
    struct r66_scan_refusal *why)
{
	const struct px_scan_policy *p = px_session_scan(s);
	unsigned bit = w->upload ? PX_SCAN_UPLOAD : PX_SCAN_DOWNLOAD;
	char reason[96];

	*state = R66_SCAN_OFF;
	*scanned = NULL;
	if (p->scanner == NULL || !(p->direction & bit))
		return false;
	if (w->length >= 0 && (uint64_t)w->length > p->max_size) {
		*state = r66_scan_over(s, p, w, (uint64_t)w->length, false, why);
		*scanned = *state == R66_SCAN_OFF ? "over-size-allowed" :
		    "over-size";
		return false;
	}
	if (w->rank > 0) {
		/* A restart sends the blocks from that rank on: the scanner
		 * would never see the file's start. */
		snprintf(reason, sizeof(reason), "restart at rank %u: the "
		    "file's start would go unscanned", w->rank);
		*state = r66_scan_failed(s, p->scanner, w, reason, why);
		*scanned = *state == R66_SCAN_OFF ? "error-allowed" : "error";
		return false;
	}
	*state = R66_SCAN_ON;
	return true;
}

/* The record starts: the TLS peers are taken now (the connections may be
 * gone by its end). */
static void
r66_audit_begin(struct r66_scan *sc)
{
	if ((sc->audit = px_audit_begin(sc->what.length)) == NULL)
		return;
	(void)px_session_tls_peer_subject(sc->s, PX_CHAN_SERVER,
	    sc->audit->tls_server, sizeof(sc->audit->tls_server));
	(void)px_session_tls_peer_subject(sc->s, PX_CHAN_CLIENT,
	    sc->audit->tls_client, sizeof(sc->audit->tls_client));
}

enum r66_scan_state
r66_scan_begin(struct px_session *s, const struct r66_scan_what *w,
    struct r66_scan **out, struct r66_scan_refusal *why)
{
	const struct px_scan_policy *p = px_session_scan(s);
	bool auditing = p->audit && px_audit_enabled();
	bool content = p->content.n != 0;
	enum r66_scan_state state;
	const char *scanned;
	struct r66_scan *sc;
	bool scanning;

	*out = NULL;
	scanning = r66_scan_covers(s, w, &state, &scanned, why);
	if (state == R66_SCAN_REFUSE)
		return R66_SCAN_REFUSE;
	if (content && w->rank > 0) {
		/* The type is the file's start's, which a restart skips. */
		char rank[48];

		snprintf(rank, sizeof(rank), "%u", w->rank);
		r66_refusal(why, 'a', "content-restart", "a restart's type "
		    "cannot be judged: rank ", rank);
		snprintf(why->ref, sizeof(why->ref), "content");
		why->counter = R66_C_DENIED_CONTENT;
		return R66_SCAN_REFUSE;
	}
	if (!scanning && !content && !auditing && !w->hold_end)
		return R66_SCAN_OFF;
	if ((sc = calloc(1, sizeof(*sc))) == NULL ||
	    (sc->tail = evbuffer_new()) == NULL ||
	    (content && (sc->sniff = calloc(1, sizeof(*sc->sniff))) == NULL)) {
		if (sc != NULL && sc->tail != NULL)
			evbuffer_free(sc->tail);
		free(sc);
		if (!scanning)
			return R66_SCAN_OFF;	/* nothing refuses it */
		return r66_scan_failed(s, p->scanner, w, "out of memory", why);
	}
	sc->s = s;
	sc->scanner = p->scanner;
	sc->scanning = scanning;
	sc->scanned = scanned;
	sc->what = *w;
	sc->dir = w->upload ? PX_TO_SERVER : PX_TO_CLIENT;
	if (auditing)
		r66_audit_begin(sc);
	if (scanning && !p->deliver_tail && (sc->spool = px_spool_new(
	    p->spool_dir, px_session_buffer(s), p->max_size +
	    R66_SPOOL_SLACK)) == NULL) {
		r66_scan_free(sc);
		return r66_scan_failed(s, p->scanner, w, "out of memory", why);
	}
	if (scanning && (sc->icap = r66_scan_icap(sc)) == NULL) {
		r66_scan_free(sc);
		return r66_scan_failed(s, p->scanner, w, "out of memory", why);
	}
	*out = sc;
	return R66_SCAN_ON;
}

enum px_dir
r66_scan_dir(const struct r66_scan *sc)
{
	return sc->dir;
}

static void
r66_scan_spool_log(struct r66_scan *sc, const char *err)
{
	char extra[200];

	snprintf(extra, sizeof(extra), "verdict=error reason=\"%s\"", err);
	r66_scan_log(sc->s, LOG_WARNING, sc->scanner, &sc->what, extra, "");
}

/* Frames that would go to the receiver now (n bytes of src): into the
 * spool while the verdict is awaited (after-verdict), else to out. 0, or
 * -1 refused (the spool failed: why filled). */
static int
r66_scan_out(struct r66_scan *sc, struct evbuffer *src, size_t n,
    struct evbuffer *out, struct r66_scan_refusal *why)
{
	const char *err;

	if (sc->spool == NULL || !sc->scanning) {
		evbuffer_remove_buffer(src, out, n);
		return 0;
	}
	if (n == 0 || px_spool_add(sc->spool, src, n, &err) == 0)
		return 0;
	r66_scan_spool_log(sc, err);
	r66_scan_count(sc->s, sc->scanner, "error");
	sc->scanned = "error";
	r66_refusal(why, 'a', "scan-spool", "the file could not be held for "
	    "its scan: ", err);
	evbuffer_drain(src, n);
	return -1;
}

/* What the spool held goes to out first (the verdict let it through).
 * 0, or -1 refused (why filled). */
static int
r66_scan_unspool(struct r66_scan *sc, struct evbuffer *out,
    struct r66_scan_refusal *why)
{
	const char *err;

	if (sc->spool == NULL)
		return 0;
	/* The receiver's connection: sendfile when it is plain. */
	if (px_spool_release(sc->spool, out, !px_session_tls_on(sc->s,
	    sc->dir == PX_TO_SERVER ? PX_CHAN_SERVER : PX_CHAN_CLIENT),
	    &err) == -1) {
		r66_scan_spool_log(sc, err);
		r66_scan_count(sc->s, sc->scanner, "error");
		sc->scanned = "error";
		r66_refusal(why, 'a', "scan-spool", "the file could not be "
		    "released: ", err);
		return -1;
	}
	px_spool_free(sc->spool);
	sc->spool = NULL;
	return 0;
}

/* Scanning stopped before the verdict (over-size allowed): the spool's
 * frames go first. */
static int
r66_scan_unspool_idle(struct r66_scan *sc, struct evbuffer *out,
    struct r66_scan_refusal *why)
{
	return sc->scanning ? 0 : r66_scan_unspool(sc, out, why);
}

/* The scanner is out of it (the file went past max-size, allowed): what
 * only it needed is let go. */
static void
r66_scan_stop(struct r66_scan *sc)
{
	sc->scanning = false;
	if (sc->icap != NULL)
		px_icap_cancel(sc->icap);
	sc->icap = NULL;
	sc->stalled = false;
}

/* Nothing left to inspect but the record's bytes (or nothing at all). */
static bool
r66_scan_idle(const struct r66_scan *sc)
{
	return sc->icap == NULL && !sc->has_result && sc->sniff == NULL;
}

/* The sender's EndTransfer (in tail now): the file is whole. */
static enum r66_scan_state
r66_scan_ended(struct r66_scan *sc, struct evbuffer *out,
    struct r66_scan_refusal *why)
{
	sc->ended = true;
	if (sc->sniff != NULL && r66_content_judge(sc, why) == R66_SCAN_REFUSE)
		return R66_SCAN_REFUSE;
	if (sc->icap != NULL) {
		px_icap_end(sc->icap);
		return R66_SCAN_ON;
	}
	if (!sc->has_result) {
		/* Nothing to wait for: what was held goes. */
		if (r66_scan_unspool(sc, out, why) == -1)
			return R66_SCAN_REFUSE;
		evbuffer_add_buffer(out, sc->tail);
		sc->passed = true;
	}
	return R66_SCAN_ON;
}

/* A Data frame went past max-size (a file of unannounced size). */
static enum r66_scan_state
r66_scan_grew(struct r66_scan *sc, struct r66_scan_refusal *why)
{
	const struct px_scan_policy *p = px_session_scan(sc->s);

	if (r66_scan_over(sc->s, p, &sc->what, sc->size, true, why) ==
	    R66_SCAN_REFUSE) {
		sc->scanned = "over-size";
		return R66_SCAN_REFUSE;
	}
	sc->scanned = "over-size-allowed";
	r66_scan_stop(sc);
	return R66_SCAN_OFF;
}

enum r66_scan_state
r66_scan_take(struct r66_scan *sc, struct evbuffer *src,
    const struct r66_frame *f, struct evbuffer *out,
    struct r66_scan_refusal *why)
{
	const struct px_scan_policy *p = px_session_scan(sc->s);
	size_t head = R66_FRAME_MIN + f->hlen, before;
	bool judged;

	if (sc->passed) {
		/* Judged and released: the rest goes, the record fed. */
		if (f->code == R66_DATA) {
			evbuffer_remove_buffer(src, out, head);
			px_audit_feed_evbuffer(sc->audit, src, f->mlen);
			evbuffer_remove_buffer(src, out, f->len - head);
		} else
			evbuffer_remove_buffer(src, out, f->len);
		return R66_SCAN_ON;
	}
	if (f->code != R66_DATA) {
		evbuffer_remove_buffer(src, sc->tail, f->len);
		if (f->code == R66_ENDTRANSFER && !sc->ended)
			return r66_scan_ended(sc, out, why);
		return R66_SCAN_ON;
	}
	if (sc->scanning && sc->size + f->mlen > p->max_size &&
	    r66_scan_grew(sc, why) == R66_SCAN_REFUSE) {
		evbuffer_drain(src, f->len);
		return R66_SCAN_REFUSE;
	}
	if (r66_scan_unspool_idle(sc, out, why) == -1) {
		evbuffer_drain(src, f->len);
		return R66_SCAN_REFUSE;
	}
	if (r66_scan_idle(sc) && sc->audit == NULL && !sc->what.hold_end) {
		/* Scanning stopped (over-size allowed), nothing else. */
		evbuffer_add_buffer(out, sc->tail);
		evbuffer_remove_buffer(src, out, f->len);
		return R66_SCAN_OFF;
	}
	sc->size += f->mlen;
	/* The last frame held is not the last one: it goes (unless the
	 * file's type is still to be judged: all is held until then). */
	if (sc->sniff == NULL && r66_scan_out(sc, sc->tail,
	    evbuffer_get_length(sc->tail), out, why) == -1) {
		evbuffer_drain(src, f->len);
		return R66_SCAN_REFUSE;
	}
	before = evbuffer_get_length(sc->tail);
	evbuffer_remove_buffer(src, sc->tail, head);
	px_audit_feed_evbuffer(sc->audit, src, f->mlen);
	judged = sc->sniff != NULL &&
	    (px_sniff_add(sc->sniff, src, f->mlen, PX_SNIFF_BYTES) ||
	    before > R66_SNIFF_HELD_MAX);
	/* Judged before the scanner has the block: a denied type's first
	 * block never goes to it (smaller blocks before it did). */
	if (judged && r66_content_judge(sc, why) == R66_SCAN_REFUSE) {
		evbuffer_drain(src, f->len - head);
		return R66_SCAN_REFUSE;
	}
	if (sc->icap != NULL)
		px_icap_body(sc->icap, src, f->mlen);
	evbuffer_remove_buffer(src, sc->tail, f->len - head);
	/* Accepted: all held before this frame goes. */
	if (judged && r66_scan_out(sc, sc->tail, before, out, why) == -1)
		return R66_SCAN_REFUSE;
	if (sc->icap != NULL && px_icap_queued(sc->icap) > R66_SCAN_QUEUED_MAX)
		sc->stalled = true;
	return R66_SCAN_ON;
}

bool
r66_scan_full(const struct r66_scan *sc)
{
	return sc->stalled && sc->icap != NULL && !sc->has_result;
}

/* The threat for the log and the ErrorPacket. */
static void
r66_scan_threat(const struct px_icap_result *res, char *buf, size_t len)
{
	if (res->threat[0] != '\0')
		snprintf(buf, len, "%s", res->threat);
	else if (res->verdict == PX_ICAP_MODIFIED)
		snprintf(buf, len, "unnamed (the scanner changed the file)");
	else
		snprintf(buf, len, "unnamed (the scanner answered HTTP %d)",
		    res->http_status);
}

/* The file passed the scanner (clean, or allowed): what was held goes,
 * unless its type is still to be judged (a scanner may answer before the
 * end: a 204 after its preview). OFF when nothing is left to inspect. */
static enum r66_scan_state
r66_scan_passed(struct r66_scan *sc, struct evbuffer *out,
    struct r66_scan_refusal *why)
{
	sc->has_result = false;
	sc->scanning = false;
	if (sc->sniff != NULL)
		return R66_SCAN_ON;
	if (r66_scan_unspool(sc, out, why) == -1) {
		evbuffer_drain(sc->tail, evbuffer_get_length(sc->tail));
		return R66_SCAN_REFUSE;
	}
	evbuffer_add_buffer(out, sc->tail);
	if (sc->audit == NULL && (!sc->what.hold_end || sc->ended))
		return R66_SCAN_OFF;
	/* Still to come: the record's bytes, or the size checked at the
	 * end (whose last frame is held again). */
	sc->passed = sc->ended;
	return R66_SCAN_ON;
}

enum r66_scan_state
r66_scan_settle(struct r66_scan *sc, struct evbuffer *out,
    struct r66_scan_refusal *why)
{
	const struct px_icap_result *res = &sc->res;
	char verdict[256], extra[256], threat[128];
	enum r66_scan_state st;

	if (!sc->has_result)
		return R66_SCAN_ON;
	snprintf(extra, sizeof(extra), "size=%llu%s istag=\"%s\"%s%.80s%s",
	    (unsigned long long)sc->size, sc->ended ? "" : "+", res->istag,
	    res->error[0] != '\0' && res->verdict == PX_ICAP_CLEAN ?
	    " note=\"" : "", res->verdict == PX_ICAP_CLEAN ? res->error : "",
	    res->error[0] != '\0' && res->verdict == PX_ICAP_CLEAN ? "\"" :
	    "");
	switch (res->verdict) {
	case PX_ICAP_CLEAN:
		r66_scan_log(sc->s, LOG_INFO, sc->scanner, &sc->what,
		    "verdict=clean", extra);
		r66_scan_count(sc->s, sc->scanner, "clean");
		sc->scanned = "clean";
		return r66_scan_passed(sc, out, why);
	case PX_ICAP_INFECTED:
	case PX_ICAP_MODIFIED:
		r66_scan_threat(res, threat, sizeof(threat));
		snprintf(verdict, sizeof(verdict), "verdict=infected "
		    "threat=\"%s\"", threat);
		r66_scan_log(sc->s, LOG_NOTICE, sc->scanner, &sc->what, verdict,
		    extra);
		r66_scan_count(sc->s, sc->scanner, "infected");
		sc->scanned = "infected";
		if (sc->audit != NULL)
			snprintf(sc->audit->threat, sizeof(sc->audit->threat),
			    "%s", threat);
		r66_refusal(why, 'a', "scan-infected", "virus found: ",
		    threat);
		st = R66_SCAN_REFUSE;
		break;
	case PX_ICAP_ERROR:
	default:
		st = r66_scan_failed(sc->s, sc->scanner, &sc->what, res->error,
		    why);
		sc->scanned = st == R66_SCAN_OFF ? "error-allowed" : "error";
		if (st == R66_SCAN_OFF)
			return r66_scan_passed(sc, out, why);
		break;
	}
	sc->has_result = false;
	evbuffer_drain(sc->tail, evbuffer_get_length(sc->tail));
	px_spool_free(sc->spool);
	sc->spool = NULL;
	return st;
}

void
r66_scan_abandon(struct r66_scan *sc, const char *why)
{
	char verdict[200];

	if (sc->scanning || sc->icap != NULL) {
		snprintf(verdict, sizeof(verdict), "verdict=none "
		    "reason=\"%s\"", why);
		r66_scan_log(sc->s, LOG_NOTICE, sc->scanner, &sc->what, verdict,
		    "");
	}
	r66_scan_outcome(sc, "error", sc->what.upload ? "client-closed" :
	    "server-closed", NULL);
	r66_scan_free(sc);
}

void
r66_scan_outcome(struct r66_scan *sc, const char *verdict, const char *why,
    const char *ref)
{
	if (sc == NULL || sc->verdict != NULL)
		return;
	sc->verdict = verdict;
	snprintf(sc->why, sizeof(sc->why), "%s", why != NULL ? why : "");
	snprintf(sc->ref, sizeof(sc->ref), "%s", ref != NULL ? ref : "");
}

/* The record, if the transfer reached the service's min-size. */
static void
r66_audit_end(struct r66_scan *sc)
{
	const char *verdict = sc->verdict != NULL ? sc->verdict : "error";
	struct px_audit_info in;

	if (px_audit_drop_below(&sc->audit,
	    px_session_scan(sc->s)->audit_min_size))
		return;
	in = (struct px_audit_info){
		.user = sc->what.host[0] != '\0' ? sc->what.host : NULL,
		.auth = sc->what.auth,
		.rule = sc->ref[0] != '\0' ? sc->ref : NULL,
		.transfer_rule = sc->what.rule,
		.reason = sc->why[0] != '\0' ? sc->why : NULL,
		.file = sc->what.file,
		.direction = r66_scan_dir_name(sc->what.upload),
		.scan_verdict = sc->scanned,
		.content_type = sc->type[0] != '\0' ? sc->type : NULL,
		.content_action = sc->content,
		.verdict = strcmp(verdict, "accept") == 0 ? "accept" :
		    strcmp(verdict, "deny") == 0 ? "deny" : "error",
		.complete = strcmp(verdict, "accept") == 0,
	};
	px_session_audit_info(sc->s, "r66", px_session_server(sc->s), &in);
	px_audit_end(sc->audit, &in);
	sc->audit = NULL;
}

void
r66_scan_free(struct r66_scan *sc)
{
	if (sc == NULL)
		return;
	if (sc->audit != NULL)
		r66_audit_end(sc);
	if (sc->icap != NULL)
		px_icap_cancel(sc->icap);
	if (sc->tail != NULL)
		evbuffer_free(sc->tail);
	px_spool_free(sc->spool);
	free(sc->sniff);
	free(sc);
}
