/* r66: each file a scanned transfer carries goes through the service's
 * scanner (<scan>, proxyd/scan/) as it passes: REQMOD with a PUT naming
 * the file for a file the client sends (upload), RESPMOD with a GET and a
 * 200 for one it receives (download). The Data blocks' bytes are copied
 * to the scanner (the frames themselves are judged whole, never spliced,
 * while their transfer is scanned); the last Data frame and whatever of
 * the transfer follows it from the sender (its EndTransfer) are held
 * until the verdict. The receiver thus never has the whole file, nor its
 * end of transfer with the global digest, before the scanner said yes.
 *
 * Memory per scanned transfer, at most: the held frames (one Data frame,
 * under max-block + 98 bytes, and the EndTransfer, a few dozen bytes),
 * plus what waits to go to the scanner: R66_SCAN_QUEUED_MAX, plus the
 * last block fed. Over that the session stops reading the sender's side
 * until the scanner took it (r66_scan_full). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "icap.h"
#include "parse.h"
#include "r66_scan.h"
#include "scan.h"

#define R66_SCAN_QUEUED_MAX	(128 * 1024)

struct r66_scan {
	struct px_session	*s;
	const struct px_scanner	*scanner;
	struct px_icap_req	*icap;		/* NULL once it answered */
	struct r66_scan_what	 what;
	enum px_dir		 dir;
	struct evbuffer		*tail;		/* the frames held */
	uint64_t		 size;		/* block bytes scanned */
	bool			 ended;		/* the EndTransfer is held */
	bool			 stalled;	/* the scanner's queue is full */
	bool			 has_result;
	struct px_icap_result	 res;
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

enum r66_scan_state
r66_scan_begin(struct px_session *s, const struct r66_scan_what *w,
    struct r66_scan **out, struct r66_scan_refusal *why)
{
	const struct px_scan_policy *p = px_session_scan(s);
	unsigned bit = w->upload ? PX_SCAN_UPLOAD : PX_SCAN_DOWNLOAD;
	struct r66_scan *sc;
	char reason[96];

	*out = NULL;
	if (p->scanner == NULL || !(p->direction & bit))
		return R66_SCAN_OFF;
	if (w->length >= 0 && (uint64_t)w->length > p->max_size)
		return r66_scan_over(s, p, w, (uint64_t)w->length, false, why);
	if (w->rank > 0) {
		/* A restart sends the blocks from that rank on: the scanner
		 * would never see the file's start. */
		snprintf(reason, sizeof(reason), "restart at rank %u: the "
		    "file's start would go unscanned", w->rank);
		return r66_scan_failed(s, p->scanner, w, reason, why);
	}
	if ((sc = calloc(1, sizeof(*sc))) == NULL ||
	    (sc->tail = evbuffer_new()) == NULL) {
		free(sc);
		return r66_scan_failed(s, p->scanner, w, "out of memory", why);
	}
	sc->s = s;
	sc->scanner = p->scanner;
	sc->what = *w;
	sc->dir = w->upload ? PX_TO_SERVER : PX_TO_CLIENT;
	if ((sc->icap = r66_scan_icap(sc)) == NULL) {
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

enum r66_scan_state
r66_scan_take(struct r66_scan *sc, struct evbuffer *src,
    const struct r66_frame *f, struct evbuffer *out,
    struct r66_scan_refusal *why)
{
	const struct px_scan_policy *p = px_session_scan(sc->s);
	size_t head = R66_FRAME_MIN + f->hlen;

	if (f->code != R66_DATA) {
		evbuffer_remove_buffer(src, sc->tail, f->len);
		if (f->code == R66_ENDTRANSFER && !sc->ended) {
			/* The sender's end of transfer: the body is whole. */
			sc->ended = true;
			if (sc->icap != NULL)
				px_icap_end(sc->icap);
		}
		return R66_SCAN_ON;
	}
	if (sc->size + f->mlen > p->max_size) {
		/* A file of unannounced size grew past max-size. */
		if (r66_scan_over(sc->s, p, &sc->what, sc->size, true, why) ==
		    R66_SCAN_REFUSE)
			return R66_SCAN_REFUSE;
		evbuffer_add_buffer(out, sc->tail);
		evbuffer_remove_buffer(src, out, f->len);
		return R66_SCAN_OFF;
	}
	sc->size += f->mlen;
	/* The last frame held is not the last one: it goes. */
	evbuffer_add_buffer(out, sc->tail);
	evbuffer_remove_buffer(src, sc->tail, head);
	if (sc->icap != NULL)
		px_icap_body(sc->icap, src, f->mlen);
	evbuffer_remove_buffer(src, sc->tail, f->len - head);
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

enum r66_scan_state
r66_scan_settle(struct r66_scan *sc, struct evbuffer *out,
    struct r66_scan_refusal *why)
{
	const struct px_icap_result *res = &sc->res;
	char verdict[256], extra[160], threat[128];
	enum r66_scan_state st;

	if (!sc->has_result)
		return R66_SCAN_ON;
	snprintf(extra, sizeof(extra), "size=%llu%s istag=\"%s\"",
	    (unsigned long long)sc->size, sc->ended ? "" : "+", res->istag);
	switch (res->verdict) {
	case PX_ICAP_CLEAN:
		r66_scan_log(sc->s, LOG_INFO, sc->scanner, &sc->what,
		    "verdict=clean", extra);
		r66_scan_count(sc->s, sc->scanner, "clean");
		evbuffer_add_buffer(out, sc->tail);
		return R66_SCAN_OFF;
	case PX_ICAP_INFECTED:
	case PX_ICAP_MODIFIED:
		r66_scan_threat(res, threat, sizeof(threat));
		snprintf(verdict, sizeof(verdict), "verdict=infected "
		    "threat=\"%s\"", threat);
		r66_scan_log(sc->s, LOG_NOTICE, sc->scanner, &sc->what, verdict,
		    extra);
		r66_scan_count(sc->s, sc->scanner, "infected");
		r66_refusal(why, 'a', "scan-infected", "virus found: ",
		    threat);
		st = R66_SCAN_REFUSE;
		break;
	case PX_ICAP_ERROR:
	default:
		st = r66_scan_failed(sc->s, sc->scanner, &sc->what, res->error,
		    why);
		if (st == R66_SCAN_OFF) {
			evbuffer_add_buffer(out, sc->tail);
			return st;
		}
		break;
	}
	evbuffer_drain(sc->tail, evbuffer_get_length(sc->tail));
	return st;
}

void
r66_scan_abandon(struct r66_scan *sc, const char *why)
{
	char verdict[200];

	snprintf(verdict, sizeof(verdict), "verdict=none reason=\"%s\"", why);
	r66_scan_log(sc->s, LOG_NOTICE, sc->scanner, &sc->what, verdict, "");
	r66_scan_free(sc);
}

void
r66_scan_free(struct r66_scan *sc)
{
	if (sc == NULL)
		return;
	if (sc->icap != NULL)
		px_icap_cancel(sc->icap);
	if (sc->tail != NULL)
		evbuffer_free(sc->tail);
	free(sc);
}
