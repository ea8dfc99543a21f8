/* Bodies through the service's scanner (<scan>, proxyd/scan/): a request
 * body (upload) by REQMOD, a response body (download) by RESPMOD, copied
 * to the scanner as it arrives. With deliver="after-verdict" (the
 * default) none of it goes on before the verdict: what would be sent
 * (data and chunk framing) passes through scan->hold into scan->spool
 * (spool.h: memory up to limits/@buffer, then an unnamed file), released
 * whole to the peer once clean; a refused download gets a page in place
 * of its held head. A response small enough to hold whole (below) stays
 * in memory. A response head held (here, held whole, or sniffed) is
 * kept parsed (scan->kept, a copy), apart from the held bytes, and goes
 * through the client's writer (http_client) ahead of them when they are
 * released: a writer is never given a head as bytes. It counts as the
 * bytes the writer will make of it (in the session's count, the
 * buffer's backpressure, the tail, the spool's memory and bound) from
 * when it is judged, as if it were held as those bytes. The request head
 * is never held (it goes with the request, before its body).
 * With deliver="tail" the body goes on to its peer as it arrives, except
 * its last part, held in scan->hold until the verdict:
 *   - the last HTTP_SCAN_TAIL bytes of what would go to the peer (data,
 *     and for a chunked body its framing: the last chunk and the final
 *     0-chunk are always among them);
 *   - a response with a Content-Length whose head and body fit in
 *     HTTP_SCAN_WHOLE: all of it, head included, so that an infected one
 *     is answered with a 403 page rather than cut off.
 * Clean: what is held goes on. Infected: a download whose head is held
 * gets a 403 page naming the threat, one whose head went is reset before
 * its last bytes; an upload is never completed towards the server (its
 * connection is reset) and the client gets the 403. An upload whose
 * server answers before it has all of it (an early response) is never
 * completed either: what is held is dropped unsent and unjudged, its scan
 * cancelled, the server connection reset (http_scan_unsent). Changed by the
 * scanner (a 200 naming no threat): a response held whole is replaced by
 * the scanner's (http_scan_mod.c), anything else is refused as infected.
 * Both bounds shrink to a quarter (tail) and a half (whole) of
 * limits/@buffer when that is smaller, so a held part never stops the
 * pumps.
 * With <content> rules, each body's first PX_SNIFF_BYTES (a quarter of
 * the buffer at most; the whole body when shorter) are held too, with
 * the response head, until libmagic named their type: a denied download
 * gets a 403 page naming the type (its head was held), a denied upload
 * a 403 and the server connection reset before the body completes.
 * With <scan partial="refuse"> (the default) a service that scans
 * downloads asks the server for whole bodies (http_scan_whole: no Range,
 * no If-Range, no Request-Range), so that no part of a body is judged
 * alone, and refuses a part the server sends anyway (a 206, or a
 * Content-Range: http_scan_partial), as a scanned upload refuses a
 * request carrying a part (Content-Range). */
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "auth.h"
#include "conn.h"
#include "http_h2_origin.h"
#include "http_h2_txn.h"
#include "http_head.h"
#include "http_int.h"
#include "http_scan_int.h"
#include "audit.h"
#include "icap.h"
#include "scan.h"
#include "sniff.h"
#include "spool.h"
#include "tls.h"

#define HTTP_SCAN_TAIL		(16 * 1024)
#define HTTP_SCAN_WHOLE		(64 * 1024)
#define HTTP_SCAN_SPOOL_SLACK	(1024 * 1024)

static size_t
http_scan_tail(const struct http_txn *t)
{
	const struct http_state *h = t->conn;

	return h->buffer / 4 < HTTP_SCAN_TAIL ? h->buffer / 4 : HTTP_SCAN_TAIL;
}

/* t ended under a call (refused, its session closing or gone; an HTTP/2
 * stream's transaction ends alone, its connection going on). */
static bool
http_scan_over(const struct http_txn *t)
{
	const struct http_state *h = t->conn;

	return h->gone || h->closing || t->ended;
}

const char *
http_scan_dir_name(enum px_dir dir)
{
	return dir == PX_TO_SERVER ? "upload" : "download";
}

const struct px_scanner *
http_scanner(const struct http_txn *t)
{
	const struct http_state *h = t->conn;

	return px_session_scan(h->s)->scanner;
}

/* Whether this request's bodies in direction bit are scanned: the
 * service's <scan>, for the user its connection proved (user=/group=). */
static bool
http_scan_on(const struct http_txn *t, unsigned bit)
{
	const struct http_state *h = t->conn;
	struct px_content_who who;

	return px_scan_on(px_session_scan(h->s), bit,
	    px_auth_content_who(http_auth_txn_id(t), &who));
}

void
http_scan_count(struct http_txn *t, enum px_dir dir, const char *verdict)
{
	struct http_state *h = t->conn;

	t->scan[dir].scanned = verdict;	/* for the audit record */
	px_scan_count(px_session_service(h->s), http_scanner(t)->name, verdict);
}

/* The connection that receives dir's bytes is a plain socket (a spool's
 * file then goes by sendfile). Not an HTTP/2 stream's: nghttp2 copies
 * its DATA out of the buffer, which a sendfile segment cannot give. */
static bool
http_scan_to_fd(const struct http_txn *t, enum px_dir dir)
{
	const struct http_state *h = t->conn;
	const struct px_conn *c = dir == PX_TO_CLIENT ? h->c : t->srv.io;

	if (dir == PX_TO_CLIENT && t->h2w != NULL)
		return false;
	return c != NULL && c->tf == NULL;
}

/* Keeps the head m (and rs) held in the scan of dir, size bytes as its
 * writer counts it. 0, or -1 out of memory. */
static int
http_scan_keep(struct http_txn *t, enum px_dir dir, const struct http_head *m,
    const struct http_resp_ctx *rs, size_t size)
{
	struct http_scan *sc = &t->scan[dir];
	size_t elen = rs->extra != NULL ? strlen(rs->extra) + 1 : 0;
	struct http_scan_head *k;

	if (sc->kept != NULL)
		return -1;	/* one head per body */
	if ((k = calloc(1, sizeof(*k) + elen)) == NULL)
		return -1;
	if ((k->m = http_head_dup(m)) == NULL) {
		free(k);
		return -1;
	}
	k->rs = *rs;
	if (elen != 0) {
		memcpy(k->extra, rs->extra, elen);
		k->rs.extra = k->extra;
	}
	k->size = size;
	sc->kept = k;
	return 0;
}

/* The held head of dir goes: its bytes, counted when it was kept. */
size_t
http_scan_head_free(struct http_scan *sc)
{
	size_t n;

	if (sc->kept == NULL)
		return 0;
	n = sc->kept->size;
	free(sc->kept->m);
	free(sc->kept);
	sc->kept = NULL;
	return n;
}

/* The held head of dir (if any) goes on to out through the client's
 * writer, ahead of the body held with it. */
static void
http_scan_head_go(struct http_txn *t, enum px_dir dir, struct evbuffer *out)
{
	struct http_scan_head *k = t->scan[dir].kept;

	if (k == NULL)
		return;
	http_client(t)->head(t, k->m, &k->rs, out);
	(void)http_scan_head_free(&t->scan[dir]);
}

/* Everything held in dir (hold and spool) is dropped unsent. Its bytes
 * were counted as they came in (px_session_account): they go off the
 * session's count, which says what reached the peer. Returns them. */
static uint64_t
http_scan_drop(struct http_txn *t, enum px_dir dir)
{
	struct http_state *h = t->conn;
	struct http_scan *sc = &t->scan[dir];
	uint64_t n = http_scan_head_free(sc);

	if (sc->hold != NULL) {
		n += evbuffer_get_length(sc->hold);
		evbuffer_drain(sc->hold, evbuffer_get_length(sc->hold));
	}
	if (sc->spool != NULL)
		n += px_spool_length(sc->spool);
	px_spool_free(sc->spool);
	sc->spool = NULL;
	px_session_unsent(h->s, dir, n);
	return n;
}

/* What the spool of dir held goes on to out (NULL: dropped, the peer
 * gone), first, behind the held head; then nothing is spooled any more.
 * 0, or -1 with why (nothing went). */
static int
http_scan_unspool(struct http_txn *t, enum px_dir dir,
    struct evbuffer *out, const char **why)
{
	struct http_state *h = t->conn;
	struct http_scan *sc = &t->scan[dir];
	bool to_fd = http_scan_to_fd(t, dir), fd;
	struct evbuffer *body;

	if (sc->spool == NULL)
		return 0;
	fd = to_fd && px_spool_on_disk(sc->spool) != 0;
	if (out == NULL)
		px_session_unsent(h->s, dir, px_spool_length(sc->spool) +
		    http_scan_head_free(sc));
	else if (sc->kept == NULL) {
		if (px_spool_release(sc->spool, out, to_fd, why) == -1)
			return -1;
	} else {
		/* The head goes to the writer only once the body is sure
		 * to follow it. */
		if ((body = evbuffer_new()) == NULL) {
			*why = "spool: out of memory";
			return -1;
		}
		if (px_spool_release(sc->spool, body, to_fd, why) == -1) {
			evbuffer_free(body);
			return -1;
		}
		http_scan_head_go(t, dir, out);
		/* (as px_spool_release marks where its file goes) */
		if (fd)
			evbuffer_set_flags(out, EVBUFFER_FLAG_DRAINS_TO_FD);
		evbuffer_add_buffer(out, body);
		evbuffer_free(body);
	}
	px_spool_free(sc->spool);
	sc->spool = NULL;
	return 0;
}

/* Stops scanning dir: what is held goes on to out when release. */
static void
http_scan_stop(struct http_txn *t, enum px_dir dir)
{
	struct http_scan *sc = &t->scan[dir];

	if (sc->icap != NULL)
		px_icap_cancel(sc->icap);
	sc->icap = NULL;
	sc->on = false;
	sc->whole = false;
}

/* The server connection goes with a reset: it never takes a truncated
 * upload for a whole one. What was queued for it never goes: off the
 * session's count; returned. */
static uint64_t
http_scan_reset_server(struct http_txn *t)
{
	struct http_state *h = t->conn;
	struct linger lg = { 1, 0 };
	uint64_t queued = 0;

	if (t->srv.io != NULL && t->srv.io->fd >= 0)
		(void)setsockopt(t->srv.io->fd, SOL_SOCKET, SO_LINGER, &lg,
		    sizeof(lg));
	if (t->srv.io != NULL)
		queued = evbuffer_get_length(t->srv.io->out);
	px_session_unsent(h->s, PX_TO_SERVER, queued);
	t->srv.keep = false;
	http_server_drop(t, false);
	return queued;
}

/* The body in dir is refused (infected, over-size, or the scanner
 * failed with on-error="block"): status for the client when the
 * response head did not go out yet, else a reset. */
static void
http_scan_refuse(struct http_txn *t, enum px_dir dir, int status,
    const char *why)
{
	struct http_scan *sc = &t->scan[dir];
	bool head_out = dir == PX_TO_CLIENT && !sc->whole && !sc->head_held &&
	    sc->spool == NULL;
	uint64_t dropped;

	http_scan_stop(t, dir);
	free(sc->sniff);
	sc->sniff = NULL;
	dropped = http_scan_drop(t, dir);
	t->verdict = "deny";
	if (dir == PX_TO_SERVER) {
		t->req = HTTP_REQ_DONE;
		dropped += http_scan_reset_server(t);
		/* to-server: what the server was sent. */
		t->req_bytes -= dropped < t->req_bytes ? dropped : t->req_bytes;
	}
	if (head_out) {
		char end[200];

		http_txn_log(t, LOG_NOTICE, "http-error status=%d "
		    "reason=\"%s\" (after the response head: reset)", status,
		    why);
		snprintf(end, sizeof(end), "denied: http-scan: %s", why);
		http_txn_abort(t, PX_END_POLICY, end);
		return;
	}
	if (dir == PX_TO_CLIENT) {
		/* Nothing of this response went out (it was all held): a
		 * page in its place. */
		t->resp_bytes = t->interim_bytes;
		t->srv.keep = false;
	}
	http_error(t, status, why);
}

/* The threat for the log and the page: the scanner's name for it, or
 * what its answer said instead. */
static void
http_scan_threat(const struct px_icap_result *res, char *buf, size_t len)
{
	if (res->threat[0] != '\0')
		http_copy(buf, len, res->threat, strlen(res->threat));
	else if (res->verdict == PX_ICAP_MODIFIED)
		snprintf(buf, len, "unnamed (the scanner changed the message: "
		    "not relayed)");
	else
		snprintf(buf, len, "unnamed (the scanner answered HTTP %d)",
		    res->http_status);
}

/* The spool could not keep the body or give it back: refused as a
 * scanner's failure, whatever on-error says (it was not kept whole). */
static void
http_scan_spool_fail(struct http_txn *t, enum px_dir dir, const char *why)
{
	char msg[200];

	http_txn_log(t, LOG_WARNING, "http-scan verdict=error "
	    "reason=\"%s\" scanner=%s direction=%s", why,
	    http_scanner(t)->name, http_scan_dir_name(dir));
	http_scan_count(t, dir, "error");
	snprintf(msg, sizeof(msg), "the scan's spool failed: %s", why);
	http_scan_refuse(t, dir, 502, msg);
}

/* Verdict clean (or passed): what is held goes on, and the transfer
 * completes. */
void
http_scan_pass(struct http_txn *t, enum px_dir dir)
{
	struct http_state *h = t->conn;
	struct http_scan *sc = &t->scan[dir];
	bool ended = sc->ended;
	const char *why;

	http_scan_stop(t, dir);
	if (sc->sniff != NULL)
		return;		/* the start waits for its type */
	if (http_scan_unspool(t, dir, dir == PX_TO_CLIENT ? http_client_out(t) :
	    http_server_out(t), &why) == -1) {
		http_scan_spool_fail(t, dir, why);
		return;
	}
	if (dir == PX_TO_CLIENT) {
		http_scan_head_go(t, dir, http_client_out(t));
		evbuffer_add_buffer(http_client_out(t), sc->hold);
		/* An HTTP/2 stream's end waited behind the hold, which may
		 * have been empty. */
		if (t->h2w != NULL)
			http_h2w_released(t->h2w);
		if (ended && t->resp == HTTP_RESP_DONE)
			http_response_complete(t);
	} else if (http_server_out(t) != NULL) {
		evbuffer_add_buffer(http_server_out(t), sc->hold);
		/* To an HTTP/2 server: the DATA go, END_STREAM with them. */
		if (t->h2o != NULL)
			http_h2o_req_more(t);
	}
	h->progress++;
}

static void
http_scan_verdict(struct http_txn *t, enum px_dir dir,
    const struct px_icap_result *res)
{
	struct http_state *h = t->conn;
	const struct px_scanner *scn = http_scanner(t);
	struct http_scan *sc = &t->scan[dir];
	char threat[128], why[200];

	sc->icap = NULL;	/* freed after this callback */
	switch (res->verdict) {
	case PX_ICAP_CLEAN:
		/* error: why some of it was not scanned (a 204 to the
		 * preview, Transfer-Ignore), as the scanner decided. */
		http_txn_log(t, LOG_INFO, "http-scan verdict=clean "
		    "scanner=%s direction=%s size=%llu%s istag=\"%s\"%s%s%s",
		    scn->name, http_scan_dir_name(dir), (unsigned long long)
		    sc->size, sc->ended ? "" : "+", res->istag, res->error[0] ?
		    " note=\"" : "", res->error, res->error[0] ? "\"" : "");
		http_scan_count(t, dir, "clean");
		http_scan_pass(t, dir);
		return;
	case PX_ICAP_MODIFIED:
		if (http_scan_modified(t, dir, res))
			return;
		/* FALLTHROUGH */
	case PX_ICAP_INFECTED:
		http_scan_threat(res, threat, sizeof(threat));
		http_txn_log(t, LOG_NOTICE, "http-scan verdict=infected "
		    "threat=\"%s\" scanner=%s direction=%s size=%llu "
		    "istag=\"%s\"", threat, scn->name, http_scan_dir_name(dir),
		    (unsigned long long)sc->size, res->istag);
		http_scan_count(t, dir, "infected");
		if (sc->audit != NULL)
			snprintf(sc->audit->threat, sizeof(sc->audit->threat),
			    "%s", threat);
		px_session_count(h->s, HTTP_C_DENIED, 1);
		snprintf(why, sizeof(why), "virus found: %s", threat);
		http_scan_refuse(t, dir, 403, why);
		return;
	case PX_ICAP_ERROR:
		break;
	}
	http_txn_log(t, LOG_WARNING, "http-scan verdict=error "
	    "reason=\"%s\" scanner=%s direction=%s on-error=%s", res->error,
	    scn->name, http_scan_dir_name(dir), scn->on_error_allow ?
	    "allow" : "block");
	if (scn->on_error_allow) {
		http_scan_count(t, dir, "error-allowed");
		http_scan_pass(t, dir);
		return;
	}
	http_scan_count(t, dir, "error");
	snprintf(why, sizeof(why), "the scanner failed: %s", res->error);
	http_scan_refuse(t, dir, 502, why);
}

static void
http_scan_event(struct http_txn *t, enum px_dir dir,
    const struct px_icap_result *res)
{
	struct http_state *h = t->conn;

	if (h->gone)
		return;
	if (res != NULL)
		http_scan_verdict(t, dir, res);
	/* An upload's verdict: the server has its whole response-timeout
	 * from now (the wait for the scanner, in its queue too, is not
	 * the server's). */
	if (res != NULL && dir == PX_TO_SERVER && !h->gone &&
	    t->resp == HTTP_RESP_HEAD && t->resp_bytes == t->interim_bytes)
		http_txn_timer(t, h->pol->response_timeout_ms);
	if (!h->gone)
		http_txn_drive(t);
}

static void
http_scan_up_cb(void *arg, const struct px_icap_result *res)
{
	http_scan_event(arg, PX_TO_SERVER, res);
}

static void
http_scan_down_cb(void *arg, const struct px_icap_result *res)
{
	http_scan_event(arg, PX_TO_CLIENT, res);
}

/* The request head the scanner sees: what names the file. */
static void
http_scan_req_head(const struct http_txn *t, char *buf, size_t len)
{
	snprintf(buf, len, "%s %s HTTP/1.1\r\nHost: %s\r\n\r\n",
	    t->method[0] != '\0' ? t->method : "GET", t->path,
	    t->host[0] != '\0' ? t->host : "unknown");
}

/* A body of `size` bytes (-1: not known yet) is about to flow in dir:
 * whether it is scanned. 1 scanned, 0 not, -1 refused as over-size
 * (nothing sent yet: the caller answers). A response's: its head m, rs
 * (res_head, res_len: as the scanner is shown it); *hsize what m counts
 * once written, when that was needed here (SIZE_MAX: not known). */
static int
http_scan_begin(struct http_txn *t, enum px_dir dir, int64_t size,
    const char *res_head, size_t res_len, const struct http_head *m,
    const struct http_resp_ctx *rs, size_t *hsize)
{
	struct http_state *h = t->conn;
	const struct px_scan_policy *p = px_session_scan(h->s);
	struct http_scan *sc = &t->scan[dir];
	unsigned bit = dir == PX_TO_SERVER ? PX_SCAN_UPLOAD : PX_SCAN_DOWNLOAD;
	char rq[512];

	sc->size = 0;
	sc->on = sc->ended = sc->whole = false;
	sc->scanned = NULL;
	px_spool_free(sc->spool);
	sc->spool = NULL;
	if (!http_scan_on(t, bit))
		return 0;
	if (size >= 0 && (uint64_t)size > p->max_size) {
		http_txn_log(t, LOG_NOTICE, "http-scan verdict=over-size "
		    "size=%lld max-size=%llu scanner=%s direction=%s over-size=%s",
		    (long long)size, (unsigned long long)p->max_size,
		    p->scanner->name, http_scan_dir_name(dir),
		    p->over_size_allow ? "allow" : "block");
		http_scan_count(t, dir, p->over_size_allow ? "over-size-allowed" :
		    "over-size");
		return p->over_size_allow ? 0 : -1;
	}
	http_scan_req_head(t, rq, sizeof(rq));
	/* What is held goes with its head and chunk framing: room for
	 * those beyond max-size (a body framed in tiny chunks past it is
	 * refused as over the spool's bound). A response's head is held
	 * apart (kept parsed), in the memory and the room it takes. */
	if (!p->deliver_tail && (m == NULL ||
	    http_client(t)->head_size(t, m, rs, hsize) == 0)) {
		uint64_t bound = p->max_size + res_len + HTTP_SCAN_SPOOL_SLACK;
		size_t hs = m != NULL ? *hsize : 0;

		sc->spool = px_spool_new(p->spool_dir, h->buffer > hs ?
		    h->buffer - hs : 0, bound - (hs < bound ? hs : 0));
	}
	if ((!p->deliver_tail && sc->spool == NULL) ||
	    (sc->hold == NULL && (sc->hold = evbuffer_new()) == NULL))
		sc->icap = NULL;
	else
		sc->icap = px_icap_start(px_session_base(h->s), p->scanner,
	    dir == PX_TO_CLIENT, rq, strlen(rq), res_head, res_len,
	    dir == PX_TO_SERVER ? http_scan_up_cb : http_scan_down_cb, t);
	if (sc->icap == NULL) {
		struct px_icap_result res = { .verdict = PX_ICAP_ERROR };

		snprintf(res.error, sizeof(res.error), "out of memory");
		sc->on = true;
		http_scan_verdict(t, dir, &res);
		return http_scan_over(t) ? -1 : 0;
	}
	sc->on = true;
	return 1;
}

/* ---- <content>: the body's type ---------------------------------------- */

/* Gathers the first bytes of the body in dir, all of it held from its
 * start, when the service has <content> rules. 0, or -1 out of memory. */
static int
http_sniff_begin(struct http_txn *t, enum px_dir dir)
{
	struct http_state *h = t->conn;
	const struct px_content_policy *cp = &px_session_scan(h->s)->content;
	struct http_scan *sc = &t->scan[dir];

	free(sc->sniff);
	sc->sniff = NULL;
	sc->head_held = false;
	sc->type[0] = '\0';
	sc->content = NULL;
	if (cp->n == 0)
		return 0;
	if ((sc->hold == NULL && (sc->hold = evbuffer_new()) == NULL) ||
	    (sc->sniff = calloc(1, sizeof(*sc->sniff))) == NULL)
		return -1;
	/* Held with the head, it must leave the pumps room. */
	sc->sniff_want = h->buffer / 4 < PX_SNIFF_BYTES ? h->buffer / 4 :
	    PX_SNIFF_BYTES;
	if (sc->sniff_want == 0)
		sc->sniff_want = 1;
	return 0;
}

/* The start of the body in dir is all gathered (or the body ended):
 * libmagic names its type, the first <content> rule naming it decides.
 * 0 accepted (what is held goes on as a scan allows), -1 refused (the
 * transaction ended). */
static int
http_sniff_judge(struct http_txn *t, enum px_dir dir)
{
	struct http_state *h = t->conn;
	const struct px_content_policy *cp = &px_session_scan(h->s)->content;
	struct http_scan *sc = &t->scan[dir];
	struct px_content_verdict v;
	struct px_content_who who;
	size_t n = sc->sniff->n;
	char why[200];

	px_content_judge_for(cp, px_auth_content_who(http_auth_txn_id(t), &who),
	    sc->sniff->buf, n, &v);
	free(sc->sniff);
	sc->sniff = NULL;
	memcpy(sc->type, v.type, sizeof(sc->type));
	sc->content = v.deny ? "deny" : "accept";
	px_content_count(px_session_service(h->s), sc->content);
	http_txn_log(t, v.deny ? LOG_NOTICE : LOG_INFO, "http-content "
	    "type=%s action=%s rule=%s direction=%s sniffed=%zu%s%s%s", v.type,
	    sc->content, v.rule != NULL ? v.rule->ref : v.deny ? "libmagic" :
	    "-", http_scan_dir_name(dir), n, v.error[0] != '\0' ?
	    " reason=\"" : "", v.error, v.error[0] != '\0' ? "\"" : "");
	if (!v.deny) {
		/* Once released, the head may go before the body's end. */
		sc->head_held = false;
		return 0;
	}
	snprintf(t->rule, sizeof(t->rule), "%.*s", (int)sizeof(t->rule) - 1,
	    v.rule != NULL ? v.rule->ref : "libmagic");
	px_session_count(h->s, HTTP_C_DENIED, 1);
	snprintf(why, sizeof(why), "file type not allowed: %s", v.type);
	http_scan_refuse(t, dir, 403, why);
	return -1;
}

/* ---- audit records --------------------------------------------------- */

/* A body of size bytes (-1: not said) starts in dir: a record for it if
 * the service has <audit> and it may reach min-size. */
static void
http_audit_begin(struct http_txn *t, enum px_dir dir, int64_t size)
{
	struct http_state *h = t->conn;
	const struct px_scan_policy *p = px_session_scan(h->s);
	struct http_scan *sc = &t->scan[dir];

	px_audit_cancel(sc->audit);
	sc->audit = NULL;
	sc->unsent = NULL;
	sc->went = false;
	if (!p->audit || !px_audit_enabled() || (size >= 0 &&
	    (uint64_t)size < p->audit_min_size))
		return;
	if ((sc->audit = px_audit_begin(size)) == NULL)
		return;
	/* Taken now: the connections may be gone by the record. */
	(void)px_tls_peer_subject(t->srv.io, sc->audit->tls_server,
	    sizeof(sc->audit->tls_server));
	(void)px_tls_peer_subject(h->c, sc->audit->tls_client,
	    sizeof(sc->audit->tls_client));
}

void
http_audit_end(struct http_txn *t, enum px_dir dir)
{
	struct http_state *h = t->conn;
	struct http_scan *sc = &t->scan[dir];
	const char *verdict = t->verdict != NULL ? t->verdict : "accept";
	struct px_audit_info in;
	const struct px_auth_id *id = http_auth_txn_id(t);
	char file[sizeof(t->path)];
	bool done = sc->went || (dir == PX_TO_SERVER ?
	    t->req == HTTP_REQ_DONE : t->resp == HTTP_RESP_DONE);

	/* A body cut short (refused) counts by the size it announced. */
	if (sc->audit == NULL || px_audit_drop_below(&sc->audit,
	    px_session_scan(h->s)->audit_min_size))
		return;
	/* An upload may start before the server's handshake is done. */
	if (sc->audit->tls_server[0] == '\0')
		(void)px_tls_peer_subject(t->srv.io, sc->audit->tls_server,
		    sizeof(sc->audit->tls_server));
	/* The file is the path, not its query. */
	snprintf(file, sizeof(file), "%.*s", (int)strcspn(t->path, "?"),
	    t->path);
	in = (struct px_audit_info){
		.rule = t->rule[0] != '\0' ? t->rule : NULL,
		.file = file,
		.direction = http_scan_dir_name(dir),
		.scan_verdict = sc->scanned,
		.content_type = sc->type[0] != '\0' ? sc->type : NULL,
		.content_action = sc->content,
		.verdict = verdict,
		.complete = done && sc->unsent == NULL &&
		    strcmp(verdict, "accept") == 0,
		.reason = sc->unsent,
		.user = id != NULL ? id->user : NULL,
		.auth = id != NULL ? px_auth_method_name(id->method) : NULL,
	};
	px_session_audit_info(h->s, "http", t->srv.dst.ss_family != 0 ?
	    (const struct sockaddr *)&t->srv.dst : NULL, &in);
	px_audit_end(sc->audit, &in);
	sc->audit = NULL;
	sc->unsent = NULL;
	sc->went = false;
}

/* The proxy could not hold a body for its type: refused, not passed
 * unjudged. */
static void
http_sniff_nomem(struct http_txn *t)
{
	t->srv.keep = false;
	http_error(t, 500, "out of memory for the content type");
}

int
http_scan_request(struct http_txn *t, int64_t size)
{
	struct http_state *h = t->conn;

	if (t->req_body == HTTP_BODY_NONE)
		return 0;
	if (http_scan_begin(t, PX_TO_SERVER, size, NULL, 0, NULL, NULL,
	    NULL) != -1) {
		if (http_scan_over(t))
			return -1;
		if (http_sniff_begin(t, PX_TO_SERVER) == -1) {
			t->req = HTTP_REQ_DONE;
			http_sniff_nomem(t);
			return -1;
		}
		http_audit_begin(t, PX_TO_SERVER, size);
		return 0;
	}
	if (!http_scan_over(t)) {
		t->req = HTTP_REQ_DONE;
		px_session_count(h->s, HTTP_C_DENIED, 1);
		http_error(t, 413, "request body over the scanner's max-size");
	}
	return -1;
}

bool
http_scan_none(const struct http_state *h)
{
	const struct px_scan_policy *p = px_session_scan(h->s);

	return p->scanner == NULL && p->content.n == 0 && !p->audit;
}

bool
http_scan_downloads(const struct http_txn *t)
{
	return http_scan_on(t, PX_SCAN_DOWNLOAD);
}

int
http_scan_response(struct http_txn *t, const struct http_head *m,
    const struct http_resp_ctx *rs, const char *head, size_t len, size_t *n)
{
	struct http_state *h = t->conn;
	struct http_scan *sc = &t->scan[PX_TO_CLIENT];
	int64_t size = t->resp_body == HTTP_BODY_LENGTH ?
	    (int64_t)t->resp_left : -1;
	size_t whole = h->buffer / 2 < HTTP_SCAN_WHOLE ? h->buffer / 2 :
	    HTTP_SCAN_WHOLE;
	size_t hs = SIZE_MAX;
	bool keep;
	int rc;

	if (t->resp_body == HTTP_BODY_NONE)
		return 0;
	rc = http_scan_begin(t, PX_TO_CLIENT, size, head, len, m, rs, &hs);
	if (rc == -1) {
		if (!http_scan_over(t)) {
			px_session_count(h->s, HTTP_C_DENIED, 1);
			t->verdict = "deny";
			t->srv.keep = false;
			http_error(t, 502, "response body over the scanner's "
			    "max-size");
		}
		return -1;
	}
	if (http_sniff_begin(t, PX_TO_CLIENT) == -1) {
		http_sniff_nomem(t);
		return -1;
	}
	http_audit_begin(t, PX_TO_CLIENT, size);
	/* The head waits with the body's start: a refused type gets a
	 * page. A head too big for that goes, a refusal resets. */
	if (sc->sniff != NULL && len <= h->buffer / 2)
		sc->head_held = true;
	if (rc == 0)
		keep = sc->head_held;
	else if (size >= 0 && len + (uint64_t)size <= whole) {
		/* Small enough to keep whole, head included: an infected
		 * one gets a page rather than a reset. */
		sc->whole = true;
		/* A changed response from the scanner can take its place:
		 * one that fits where this one did. */
		px_icap_want_modified(sc->icap, h->buffer / 2);
		px_spool_free(sc->spool);	/* held whole in memory */
		sc->spool = NULL;
		keep = true;
	} else
		/* after-verdict: the head waits with the body (a refusal
		 * is then a page, never a cut body). */
		keep = sc->head_held || sc->spool != NULL;
	if (!keep)
		return 0;
	if ((hs == SIZE_MAX && http_client(t)->head_size(t, m, rs, &hs) == -1) ||
	    http_scan_keep(t, PX_TO_CLIENT, m, rs, hs) == -1) {
		http_txn_abort(t, PX_END_PROXY, "error: out of memory for the "
		    "held response head");
		return -1;
	}
	*n = hs;
	return 1;
}

struct evbuffer *
http_scan_to(struct http_txn *t, enum px_dir dir, struct evbuffer *out)
{
	return t->scan[dir].on || t->scan[dir].sniff != NULL ?
	    t->scan[dir].hold : out;
}

size_t
http_scan_queued(const struct http_txn *t, enum px_dir dir)
{
	const struct http_scan *sc = &t->scan[dir];

	return (sc->hold != NULL ? evbuffer_get_length(sc->hold) : 0) +
	    (sc->kept != NULL ? sc->kept->size : 0) +
	    (sc->icap != NULL ? px_icap_queued(sc->icap) : 0);
}

int
http_scan_feed(struct http_txn *t, enum px_dir dir, struct evbuffer *src,
    size_t n)
{
	struct http_state *h = t->conn;
	const struct px_scan_policy *p = px_session_scan(h->s);
	struct http_scan *sc = &t->scan[dir];

	px_audit_feed_evbuffer(sc->audit, src, n);
	if (sc->sniff != NULL && px_sniff_add(sc->sniff, src, n,
	    sc->sniff_want) && http_sniff_judge(t, dir) == -1)
		return -1;
	if (!sc->on || sc->icap == NULL)
		return 0;
	sc->size += n;
	if (sc->size > p->max_size) {
		/* A body of unknown length grew past max-size. */
		http_txn_log(t, LOG_NOTICE, "http-scan verdict=over-size "
		    "size=%llu+ max-size=%llu scanner=%s direction=%s "
		    "over-size=%s", (unsigned long long)sc->size,
		    (unsigned long long)p->max_size, p->scanner->name,
		    http_scan_dir_name(dir), p->over_size_allow ? "allow" :
		    "block");
		http_scan_count(t, dir, p->over_size_allow ? "over-size-allowed" :
		    "over-size");
		if (p->over_size_allow) {
			http_scan_stop(t, dir);	/* held bytes go at release */
			return 0;
		}
		px_session_count(h->s, HTTP_C_DENIED, 1);
		http_scan_refuse(t, dir, dir == PX_TO_SERVER ? 413 : 502,
		    "body over the scanner's max-size");
		return -1;
	}
	px_icap_body(sc->icap, src, n);
	return 0;
}

void
http_scan_release(struct http_txn *t, enum px_dir dir,
    struct evbuffer *out)
{
	struct http_scan *sc = &t->scan[dir];
	size_t len, rel, head, tail = http_scan_tail(t);
	const char *why;

	if (sc->sniff != NULL)
		return;		/* not judged yet */
	if (!sc->on && http_scan_unspool(t, dir, out, &why) == -1) {
		http_scan_spool_fail(t, dir, why);
		return;
	}
	if (!sc->on)
		http_scan_head_go(t, dir, out);
	if (sc->hold == NULL || (len = evbuffer_get_length(sc->hold)) == 0)
		return;
	if (!sc->on) {
		evbuffer_add_buffer(out, sc->hold);
		return;
	}
	if (sc->spool != NULL) {
		/* after-verdict: all of it, until the verdict (its head
		 * held apart). */
		if (px_spool_add(sc->spool, sc->hold, len, &why) == -1)
			http_scan_spool_fail(t, dir, why);
		return;
	}
	/* The tail: the last bytes of what would go on, head included;
	 * a held head goes whole once any of it would. */
	head = sc->kept != NULL ? sc->kept->size : 0;
	if (sc->whole || len + head <= tail)
		return;
	rel = len + head - tail;
	if (sc->kept != NULL) {
		http_scan_head_go(t, dir, out);
		rel -= rel < head ? rel : head;
	}
	if (rel != 0)
		evbuffer_remove_buffer(sc->hold, out, rel);
}

bool
http_scan_hold(struct http_txn *t, enum px_dir dir, struct evbuffer *out)
{
	struct http_scan *sc = &t->scan[dir];

	/* A body shorter than what is sniffed is judged at its end. */
	if (sc->sniff != NULL && http_sniff_judge(t, dir) == -1)
		return true;
	if (!sc->on) {
		const char *why;

		if (http_scan_unspool(t, dir, out, &why) == -1) {
			http_scan_spool_fail(t, dir, why);
			return true;
		}
		if (out != NULL)
			http_scan_head_go(t, dir, out);
		if (sc->hold != NULL && out != NULL)
			evbuffer_add_buffer(out, sc->hold);
		return false;
	}
	if (sc->spool != NULL) {
		/* The body's end: its last bytes to the spool too. */
		http_scan_release(t, dir, out);
		if (http_scan_over(t) || !sc->on)
			return true;
	}
	if (!sc->ended) {
		sc->ended = true;
		px_icap_end(sc->icap);
	}
	return true;
}

bool
http_scan_whole(const struct http_txn *t)
{
	const struct http_state *h = t->conn;

	return http_scan_on(t, PX_SCAN_DOWNLOAD) &&
	    !px_session_scan(h->s)->partial_allow;
}

bool
http_scan_pending(const struct http_txn *t, enum px_dir dir)
{
	return t->scan[dir].on && t->scan[dir].ended;
}

bool
http_scan_holding(const struct http_txn *t, enum px_dir dir)
{
	const struct http_scan *sc = &t->scan[dir];

	return sc->on || sc->sniff != NULL || sc->kept != NULL ||
	    (sc->hold != NULL && evbuffer_get_length(sc->hold) != 0);
}

size_t
http_scan_unsent(struct http_txn *t, enum px_dir dir, const char *reason)
{
	struct http_scan *sc = &t->scan[dir];
	bool held = http_scan_holding(t, dir);
	uint64_t n;

	sc->unsent = reason;
	if (!held)
		return 0;
	/* Its verdict would come for a body that never went, and could
	 * release the next one's before that one is judged. */
	http_scan_stop(t, dir);
	free(sc->sniff);
	sc->sniff = NULL;
	n = http_scan_drop(t, dir);
	if (dir == PX_TO_SERVER)
		(void)http_scan_reset_server(t);
	return (size_t)n;
}

void
http_scan_close(struct http_txn *t)
{
	int d;

	for (d = 0; d < 2; d++) {
		struct http_scan *sc = &t->scan[d];

		if (sc->icap != NULL)
			px_icap_cancel(sc->icap);
		sc->icap = NULL;
		sc->on = false;
		free(sc->sniff);
		sc->sniff = NULL;
		/* What was still held never went (the session's line, written
		 * after this, says what did). */
		if (sc->hold != NULL || sc->spool != NULL || sc->kept != NULL)
			(void)http_scan_drop(t, (enum px_dir)d);
		/* A transfer cut by the session's end: recorded as such. */
		http_audit_end(t, (enum px_dir)d);
		if (sc->hold != NULL)
			evbuffer_free(sc->hold);
		sc->hold = NULL;
	}
}

int
http_scan_partial(struct http_txn *t, const struct http_head *m,
    enum px_dir dir)
{
	struct http_state *h = t->conn;
	const struct px_scan_policy *p = px_session_scan(h->s);
	bool range = false;
	unsigned i;

	if (p->partial_allow || !http_scan_on(t, dir == PX_TO_SERVER ?
	    PX_SCAN_UPLOAD : PX_SCAN_DOWNLOAD))
		return 0;
	for (i = 0; i < m->nhdr && !range; i++)
		range = http_field_id(m->hdr[i].name, m->hdr[i].nlen) ==
		    HTTP_F_CONTENT_RANGE;
	/* A 416's Content-Range (bytes * / length) names no part. */
	if (dir == PX_TO_CLIENT)
		range = m->status == 206 || (range && m->status != 416);
	if (!range)
		return 0;
	px_session_count(h->s, HTTP_C_DENIED, 1);
	t->verdict = "deny";
	snprintf(t->rule, sizeof(t->rule), "scan/@partial");
	http_txn_log(t, LOG_NOTICE, "http-scan verdict=deny "
	    "reason=scan-partial direction=%s status=%d rule=scan/@partial",
	    dir == PX_TO_SERVER ? "upload" : "download",
	    dir == PX_TO_SERVER ? 400 : 502);
	if (dir == PX_TO_SERVER) {
		t->req = HTTP_REQ_DONE;
		http_error(t, 400, "partial upload (Content-Range) to a "
		    "scanned service");
	} else {
		t->srv.keep = false;
		http_error(t, 502, "partial response (206 or Content-Range) "
		    "from the server of a scanned service");
	}
	return -1;
}
