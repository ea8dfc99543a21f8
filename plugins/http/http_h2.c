/* HTTP/2 towards clients (RFC 9113): h2 chosen in ALPN, or prior
 * knowledge h2c on a plain listener.
 *
 * The client's connection runs an nghttp2 server session: this file is
 * the HTTP/2 codec of the message layer. Each stream's pseudo-headers and
 * fields are gathered into a parsed request (http_h2_req.c: the same
 * struct http_head the HTTP/1.1 parser makes) and the stream becomes a
 * transaction of this session (http_h2_stream.c), judged by the one
 * policy engine there is (method, URL, header and body rules, limits,
 * the same 4xx/5xx pages, scanning, the server pool, the http-request
 * line tagged "proto=h2 stream=N", and the same metrics); nothing here
 * decides about a request. nghttp2 refuses connection-specific fields, a
 * te other than "trailers" and a Content-Length the DATA frames do not
 * match; a pseudo-header we cannot say is a stream error (RFC 9113
 * 8.1.1). A CONNECT (extended too, RFC 8441) is a transaction whose
 * tunnel runs in the engine once its server said 2xx (101).
 *
 * Bounded: a request body is read from the client no faster than its
 * transaction takes it (nghttp2's automatic WINDOW_UPDATE is off; bytes
 * are consumed once they leave), and a response no faster than the
 * client's stream takes it (the transaction stops reading its server:
 * one slow stream holds only itself). The connection's output is filled
 * up to `buffer`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <nghttp2/nghttp2.h>

#include "bucket.h"	/* px_clock_ms() */
#include "conn.h"
#include "http_int.h"

#include "http_h2_int.h"
#include "http_h2_mem.h"


/* Kinds of HTTP/2 protocol events (http_series HTTP_S_H2_ERRORS). */
static const char *const h2_kind_names[HTTP_H2_KINDS] = {
	"bad_preface", "flood", "hpack", "flow_control", "settings",
	"continuation", "frame", "malformed", "header_list",
	"refused_stream", "client_reset", "goaway", "other",
};

void
http_h2_kind_name(unsigned i, char *buf, size_t size)
{
	snprintf(buf, size, "%s", i < HTTP_H2_KINDS ? h2_kind_names[i] : "?");
}

/* http2-error lines one connection may write: a client that makes
 * errors by the thousand (refused streams, say) is counted, not
 * logged line by line. */
#define HTTP_H2_LOG_MAX	16

void
h2_event(struct http_h2 *c, enum http_h2_kind k, int32_t stream,
    const char *detail)
{
	px_session_series_add(c->h->s, HTTP_S_H2_ERRORS, k, 1);
	if (c->logged >= HTTP_H2_LOG_MAX)
		return;
	c->logged++;
	px_session_log(c->h->s, LOG_NOTICE, "http2-error kind=%s stream=%d "
	    "detail=\"%s\"%s", h2_kind_names[k], (int)stream, detail,
	    c->logged == HTTP_H2_LOG_MAX ? " (the connection's further "
	    "http2-error lines are not logged; proxyd_http2_errors_total "
	    "counts them)" : "");
}
/* An nghttp2 library error as one of our kinds. */
static enum http_h2_kind
h2_kind_of(int lib)
{
	switch (lib) {
	case NGHTTP2_ERR_BAD_CLIENT_MAGIC:
		return HTTP_H2_BAD_PREFACE;
	case NGHTTP2_ERR_FLOODED:
		return HTTP_H2_FLOOD;
	case NGHTTP2_ERR_HEADER_COMP:
		return HTTP_H2_HPACK;
	case NGHTTP2_ERR_FLOW_CONTROL:
		return HTTP_H2_FLOW_CONTROL;
	case NGHTTP2_ERR_TOO_MANY_SETTINGS:
	case NGHTTP2_ERR_SETTINGS_EXPECTED:
		return HTTP_H2_SETTINGS;
	case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
		return HTTP_H2_CONTINUATION;
	case NGHTTP2_ERR_FRAME_SIZE_ERROR:
	case NGHTTP2_ERR_PROTO:
	case NGHTTP2_ERR_INVALID_FRAME:
	case NGHTTP2_ERR_INVALID_HEADER_BLOCK:
	case NGHTTP2_ERR_STREAM_CLOSED:
	case NGHTTP2_ERR_INVALID_STREAM_ID:
	case NGHTTP2_ERR_INVALID_STREAM_STATE:
		return HTTP_H2_FRAME;
	case NGHTTP2_ERR_HTTP_HEADER:
	case NGHTTP2_ERR_HTTP_MESSAGING:
		return HTTP_H2_MALFORMED;
	case NGHTTP2_ERR_REFUSED_STREAM:
		return HTTP_H2_REFUSED;
	default:
		return HTTP_H2_OTHER;
	}
}

/* ---- streams ------------------------------------------------------------ */

static struct h2_stream *
h2_stream_get(struct http_h2 *c, int32_t id)
{
	return nghttp2_session_get_stream_user_data(c->ng, id);
}

static void
h2_stream_free(struct h2_stream *st)
{
	struct evbuffer **b[] = { &st->authority, &st->path, &st->fields,
	    &st->early };
	size_t i;

	TAILQ_REMOVE(&st->c->list, st, link);
	if (st->pending)
		st->c->npending--;
	if (st->tx != NULL)
		h2_txn_end(st, NGHTTP2_CANCEL, true);
	http_h2_req_free(&st->req);
	for (i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		if (*b[i] != NULL)
			evbuffer_free(*b[i]);
	free(st);
}

/* "name: value\r\n" added to b. 0, or -1. */
static int
h2_add_field(struct evbuffer *b, const uint8_t *name, size_t nlen,
    const uint8_t *value, size_t vlen)
{
	return evbuffer_add(b, name, nlen) | evbuffer_add(b, ": ", 2) |
	    evbuffer_add(b, value, vlen) | evbuffer_add(b, "\r\n", 2);
}

/* :protocol's value (RFC 8441 4): an Upgrade token, with '/'. 0, or -1
 * (the stream is malformed). */
static int
h2_protocol(struct h2_stream *st, const uint8_t *v, size_t len)
{
	size_t i;

	if (len == 0 || len >= sizeof(st->protocol))
		return -1;
	for (i = 0; i < len; i++)
		if (!http_is_tchar(v[i]) && v[i] != '/')
			return -1;
	memcpy(st->protocol, v, len);
	st->protocol[len] = '\0';
	return 0;
}

/* Where the client's DATA for st go: its transaction's request body (or
 * its tunnel's bytes, http_h2_stream.c); before it starts, with its
 * HEADERS' read, kept for it. */
static struct evbuffer *
h2_stream_in(struct h2_stream *st)
{
	return st->tx != NULL ? h2_txn_in(st) : st->early;
}

/* The request head is complete: its transaction starts once the bytes
 * read with it are handled (h2_start_streams). */
static int
h2_stream_ready(struct h2_stream *st, bool end_stream)
{
	st->req_ended = end_stream;
	/* CONNECT's DATA are tunnel bytes, not a body (http_h2_stream.c):
	 * outside forward mode the engine refuses it (405). */
	st->tunnel = strcmp(st->method, "CONNECT") == 0;
	st->chunked = !end_stream && !st->has_length && !st->tunnel;
	st->is_head = strcmp(st->method, "HEAD") == 0;
	st->pending = true;
	st->c->npending++;
	/* max-requests-per-connection: the last one taken, then GOAWAY
	 * (the streams under way finish; the client opens another
	 * connection), as HTTP/1.1's Connection: close. */
	if (++st->c->requests == st->c->h->pol->max_requests)
		nghttp2_submit_goaway(st->c->ng, NGHTTP2_FLAG_NONE, st->id,
		    NGHTTP2_NO_ERROR, NULL, 0);
	return 0;
}

/* Transactions start after a read's frames are all handled, not as each
 * HEADERS comes: a stream the same read resets (the rapid-reset attack
 * sends HEADERS and RST_STREAM together) costs no server request. */
static void
h2_start_streams(struct http_h2 *c)
{
	struct h2_stream *st, *next;

	for (st = TAILQ_FIRST(&c->list); st != NULL && c->npending != 0;
	    st = next) {
		next = TAILQ_NEXT(st, link);
		if (!st->pending)
			continue;
		st->pending = false;
		c->npending--;
		/* nghttp2 resets it (its RST_STREAM still queued behind a
		 * full output): no server request for it. */
		if (st->doomed)
			continue;
		if (h2_txn_start(st) == 0)
			continue;
		char why[80];

		snprintf(why, sizeof(why), "no transaction: %s",
		    strerror(errno));
		h2_event(c, HTTP_H2_OTHER, st->id, why);
		h2_stream_reset(st, NGHTTP2_REFUSED_STREAM);
	}
}

void
h2_stream_reset(struct h2_stream *st, uint32_t code)
{
	nghttp2_submit_rst_stream(st->c->ng, NGHTTP2_FLAG_NONE, st->id, code);
	st->reset = true;
	st->eof = true;
	/* Whatever the reason, its server request stops now, not when the
	 * RST_STREAM is out (a client that does not read holds that). */
	if (st->tx != NULL)
		h2_txn_cut(st, code);
}


/* ---- nghttp2 callbacks ------------------------------------------------- */

/* Ends the connection: GOAWAY with code goes out, nothing more is read.
 * A callback returns what this returns, NGHTTP2_ERR_CALLBACK_FAILURE, so
 * that the rest of the read (the flood) is not decoded. The event is
 * logged here: http_h2_drive does not log that failure again. */
int
h2_end_connection(struct http_h2 *c, enum http_h2_kind k, int32_t stream,
    uint32_t code, const char *detail)
{
	h2_event(c, k, stream, detail);
	c->ended_by_us = true;
	nghttp2_session_terminate_session(c->ng, code);
	return NGHTTP2_ERR_CALLBACK_FAILURE;
}

/* One RST_STREAM more, either way, in the connection's reset budget
 * (HTTP_H2_RESET_BURST). false: spent, the connection is to end. */
static bool
h2_reset_spend(struct http_h2 *c)
{
	uint64_t now = px_clock_ms(), full = HTTP_H2_RESET_BURST * 1000ULL;

	c->reset_tokens += (now - c->reset_ms) * HTTP_H2_RESET_RATE;
	if (c->reset_tokens > full)
		c->reset_tokens = full;
	c->reset_ms = now;
	if (c->reset_tokens < 1000)
		return false;
	c->reset_tokens -= 1000;
	return true;
}

static const char h2_resets_detail[] = "too many streams reset (RST_STREAM "
    "from the client, or provoked by it)";

static bool
h2_was_reset(const struct http_h2 *c, int32_t id)
{
	unsigned i, n = c->nreset < HTTP_H2_RESET_IDS ? c->nreset :
	    HTTP_H2_RESET_IDS;

	for (i = 0; i < n; i++)
		if (c->reset_ids[i] == id)
			return true;
	return false;
}

/* A HEADERS on a client stream id at or below one already used, naming
 * no stream nghttp2 still knows (an idle one, or one long closed):
 * RFC 9113 5.1.1 wants a connection error, nghttp2 ignores it. Trailers
 * on a stream proxyd reset are let through (nghttp2 drops them). */
static bool
h2_id_reused(struct http_h2 *c, int32_t id)
{
	nghttp2_stream *ns;

	if ((id & 1) == 0)
		return false;	/* nghttp2 refuses even ids itself */
	if (id > c->last_peer_id) {
		c->last_peer_id = id;
		return false;
	}
	ns = nghttp2_session_find_stream(c->ng, id);
	if (ns != NULL && nghttp2_stream_get_state(ns) !=
	    NGHTTP2_STREAM_STATE_IDLE)
		return false;
	return !h2_was_reset(c, id);
}

static int
h2_on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *ud)
{
	struct http_h2 *c = ud;

	(void)ng;
	if (hd->type == NGHTTP2_HEADERS && h2_id_reused(c, hd->stream_id))
		return h2_end_connection(c, HTTP_H2_FRAME, hd->stream_id,
		    NGHTTP2_PROTOCOL_ERROR, "HEADERS on a stream id below "
		    "one already used");
	/* Each PRIORITY frame makes nghttp2 rework its priority tree, and
	 * does nothing for us (responses are sent as they come): the
	 * allowance nginx gives, max(max-concurrent-streams, 100) and as
	 * many more per request. */
	if (hd->type == NGHTTP2_PRIORITY && c->priority_left-- == 0)
		return h2_end_connection(c, HTTP_H2_FLOOD, hd->stream_id,
		    NGHTTP2_ENHANCE_YOUR_CALM, "too many PRIORITY frames");
	return 0;
}

static int
h2_on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct http_h2 *c = ud;
	struct h2_stream *st;

	if (f->hd.type != NGHTTP2_HEADERS ||
	    f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	st->c = c;
	st->id = f->hd.stream_id;
	http_h2_req_init(&st->req);
	TAILQ_INSERT_TAIL(&c->list, st, link);
	if ((st->authority = evbuffer_new()) == NULL ||
	    (st->path = evbuffer_new()) == NULL ||
	    (st->fields = evbuffer_new()) == NULL ||
	    (st->early = evbuffer_new()) == NULL) {
		h2_stream_free(st);
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	nghttp2_session_set_stream_user_data(ng, st->id, st);
	c->open++;
	c->priority_left += c->h->pol->h2_max_streams;
	return 0;
}

static int
h2_copy_small(char *dst, size_t size, const uint8_t *v, size_t len)
{
	if (len >= size)
		return -1;
	memcpy(dst, v, len);
	dst[len] = '\0';
	return 0;
}

/* st's header list went over max-header-list: 431 for it, and the
 * connection's HTTP_H2_HEADER_LIST_MAX-th such list ends the connection
 * (each costs decoding all of it: the HPACK bomb sent again and again;
 * nginx and HAProxy end it at the first). 0, or the callback's error. */
static int
h2_header_list_over(struct http_h2 *c, struct h2_stream *st)
{
	st->too_big = true;
	if (++c->header_lists_over >= HTTP_H2_HEADER_LIST_MAX)
		return h2_end_connection(c, HTTP_H2_HEADER_LIST, st->id,
		    NGHTTP2_ENHANCE_YOUR_CALM, "too many header lists over "
		    "max-header-list");
	h2_event(c, HTTP_H2_HEADER_LIST, st->id,
	    "header list over max-header-list");
	return 0;
}

static int
h2_on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
    size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
	struct http_h2 *c = ud;
	struct h2_stream *st = h2_stream_get(c, f->hd.stream_id);
	int rc = 0;

	(void)ng, (void)flags;
	if (st == NULL || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	/* As SETTINGS_MAX_HEADER_LIST_SIZE counts (RFC 9113 6.5.2). */
	st->hlist += nlen + vlen + 32;
	if (st->hlist > c->h->pol->h2_max_header_list && !st->too_big &&
	    (rc = h2_header_list_over(c, st)) != 0)
		return rc;
	/* Far over the limit: an HPACK bomb, not a big cookie. nghttp2
	 * checks every field it decodes (the bomb's cost: 64 MB of them
	 * from 16 KB); a stream error makes it decode the rest unchecked
	 * and unseen. The stream is reset, not answered 431. */
	if (st->hlist > HTTP_H2_BOMB_FACTOR * c->h->pol->h2_max_header_list &&
	    !st->eof) {
		h2_stream_reset(st, NGHTTP2_ENHANCE_YOUR_CALM);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	if (f->headers.cat != NGHTTP2_HCAT_REQUEST) {
		/* Trailers: in the chunked body's trailer section, where
		 * the engine's trailers= policy decides; a body sent with
		 * its length has none, and they are dropped. */
		if (st->chunked && !st->too_big &&
		    h2_add_field(st->fields, name, nlen, value, vlen) != 0)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		return 0;
	}
	if (st->too_big || st->bad)
		return 0;
	if (http_h2_req_add(&st->req, (const char *)name, nlen,
	    (const char *)value, vlen) == -1)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	if (nlen != 0 && name[0] == ':') {
		if (nlen == 7 && memcmp(name, ":method", 7) == 0)
			rc = h2_copy_small(st->method, sizeof(st->method), value,
			    vlen);
		else if (nlen == 7 && memcmp(name, ":scheme", 7) == 0)
			rc = h2_copy_small(st->scheme, sizeof(st->scheme), value,
			    vlen);
		else if (nlen == 10 && memcmp(name, ":authority", 10) == 0)
			rc = evbuffer_add(st->authority, value, vlen);
		else if (nlen == 5 && memcmp(name, ":path", 5) == 0)
			rc = evbuffer_add(st->path, value, vlen);
		else if (nlen == 9 && memcmp(name, ":protocol", 9) == 0)
			rc = h2_protocol(st, value, vlen);
		else
			rc = -1;
		if (rc == -1)
			st->bad = true;
		return 0;
	}
	if (nlen == 14 && memcmp(name, "content-length", 14) == 0)
		st->has_length = true;
	/* The pseudo-headers came first (RFC 9113 8.3, nghttp2 checks):
	 * the fields are in req alone. */
	return 0;
}

static int
h2_on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct http_h2 *c = ud;
	struct h2_stream *st;
	bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

	(void)ng;
	if (f->hd.type == NGHTTP2_RST_STREAM) {
		/* Counted: a burst of them is the rapid-reset attack
		 * (nghttp2 itself limits their rate). */
		px_session_series_add(c->h->s, HTTP_S_H2_ERRORS,
		    HTTP_H2_CLIENT_RESET, 1);
		if (!h2_reset_spend(c))
			return h2_end_connection(c, HTTP_H2_FLOOD,
			    f->hd.stream_id, NGHTTP2_ENHANCE_YOUR_CALM,
			    h2_resets_detail);
		return 0;
	}
	if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
		return 0;
	if ((st = h2_stream_get(c, f->hd.stream_id)) == NULL)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS &&
	    f->headers.cat == NGHTTP2_HCAT_REQUEST) {
		if (st->too_big) {
			if (!st->eof)
				h2_reply_bare(st, "431");
			h2_log_refused(st, 431, "h2/@max-header-list");
			return 0;
		}
		/* A pseudo-header we cannot say, unknown or repeated: the
		 * request is malformed, a stream error (RFC 9113 8.1.1). */
		if (st->bad || st->req.bad) {
			h2_event(c, HTTP_H2_MALFORMED, st->id,
			    "pseudo-header not supported or too long");
			h2_stream_reset(st, NGHTTP2_PROTOCOL_ERROR);
			return 0;
		}
		if (h2_stream_ready(st, end) == -1)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		return 0;
	}
	if (end && (st->pending || st->tx != NULL) &&
	    !st->req_ended) {
		/* The request's end (DATA, or trailers). */
		st->req_ended = true;
		if (st->chunked) {
			struct evbuffer *out = h2_stream_in(st);

			evbuffer_add(out, "0\r\n", 3);
			evbuffer_add_buffer(out, st->fields);
			evbuffer_add(out, "\r\n", 2);
		}
	}
	return 0;
}

static int
h2_on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id,
    const uint8_t *data, size_t len, void *ud)
{
	struct http_h2 *c = ud;
	struct h2_stream *st = h2_stream_get(c, id);

	struct evbuffer *out;

	(void)flags;
	if (st == NULL || (!st->pending && st->tx == NULL) ||
	    h2_txn_ended(st)) {
		/* Nobody takes it: the window opens again at once. */
		nghttp2_session_consume(ng, id, len);
		if (st != NULL && st->answered && !st->reset &&
		    (st->dropped += len) > HTTP_H2_DRAIN_MAX)
			h2_stream_reset(st, NGHTTP2_NO_ERROR);
		return 0;
	}
	/* Bounded by the stream's window until its transaction takes it. */
	out = h2_stream_in(st);
	if (st->chunked)
		evbuffer_add_printf(out, "%zx\r\n", len);
	evbuffer_add(out, data, len);
	if (st->chunked)
		evbuffer_add(out, "\r\n", 2);
	st->unconsumed += len;
	return 0;
}

static int
h2_on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
	struct http_h2 *c = ud;
	struct h2_stream *st = h2_stream_get(c, id);

	if (st == NULL)
		return 0;
	if (st->tx != NULL)
		h2_txn_end(st, code, false);
	nghttp2_session_set_stream_user_data(ng, id, NULL);
	c->open--;
	h2_stream_free(st);
	return 0;
}

/* The RST_STREAM code nghttp2 sends for a library error, as a number. */
static uint32_t
h2_lib_rst(int lib)
{
	switch (lib) {
	case NGHTTP2_ERR_FLOW_CONTROL:
		return NGHTTP2_FLOW_CONTROL_ERROR;
	case NGHTTP2_ERR_REFUSED_STREAM:
		return NGHTTP2_REFUSED_STREAM;
	case NGHTTP2_ERR_STREAM_CLOSED:
		return NGHTTP2_STREAM_CLOSED;
	case NGHTTP2_ERR_HEADER_COMP:
		return NGHTTP2_COMPRESSION_ERROR;
	default:
		return NGHTTP2_PROTOCOL_ERROR;
	}
}

/* A stream nghttp2 reset without telling (on_invalid_frame_recv): what
 * it refused, for the http2-error line. */
static void
h2_library_reset(struct http_h2 *c, struct h2_stream *st, uint32_t code)
{
	enum http_h2_kind k;
	char detail[96];

	switch (code) {
	case NGHTTP2_FLOW_CONTROL_ERROR:
		k = HTTP_H2_FLOW_CONTROL;
		break;
	case NGHTTP2_REFUSED_STREAM:
		k = HTTP_H2_REFUSED;
		break;
	case NGHTTP2_COMPRESSION_ERROR:
		k = HTTP_H2_HPACK;
		break;
	case NGHTTP2_PROTOCOL_ERROR:
		k = HTTP_H2_MALFORMED;
		break;
	default:
		k = HTTP_H2_OTHER;
	}
	/* nghttp2 checks the DATA against content-length (RFC 9113
	 * 8.1.1) and says nothing but this RST_STREAM. */
	snprintf(detail, sizeof(detail), "%s (RST_STREAM %s)",
	    code == NGHTTP2_PROTOCOL_ERROR && st->has_length ?
	    "content-length disagrees with the DATA frames" :
	    "stream refused by the HTTP/2 library",
	    nghttp2_http2_strerror(code));
	h2_event(c, k, st->id, detail);
}

static int
h2_on_invalid_frame(nghttp2_session *ng, const nghttp2_frame *f, int lib,
    void *ud)
{
	struct http_h2 *c = ud;

	enum http_h2_kind k = h2_kind_of(lib);
	struct h2_stream *st;

	(void)ng;
	c->last_lib_error = lib;
	/* nghttp2 resets the stream (or ends the connection) for this
	 * frame: the stream gets no transaction, or its server request
	 * stops now, not when the RST_STREAM is out (MadeYouReset: a
	 * WINDOW_UPDATE that overflows the stream's window). */
	if (f->hd.stream_id != 0 &&
	    (st = h2_stream_get(c, f->hd.stream_id)) != NULL) {
		st->doomed = true;
		if (st->tx != NULL)
			h2_txn_cut(st, h2_lib_rst(lib));
	}
	/* A new stream over max-concurrent-streams: nghttp2 refuses it
	 * (REFUSED_STREAM before our SETTINGS are acknowledged, a
	 * PROTOCOL_ERROR GOAWAY after, as RFC 9113 5.1.2 allows). */
	if (f->hd.type == NGHTTP2_HEADERS && (lib == NGHTTP2_ERR_PROTO ||
	    lib == NGHTTP2_ERR_REFUSED_STREAM) &&
	    c->open >= c->h->pol->h2_max_streams)
		k = HTTP_H2_REFUSED;
	h2_event(c, k, f->hd.stream_id, nghttp2_strerror(lib));
	return 0;
}

static int
h2_on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct http_h2 *c = ud;
	struct h2_stream *st;

	st = h2_stream_get(c, f->hd.stream_id);
	if (st != NULL && f->hd.type == NGHTTP2_DATA) {
		st->sent += f->hd.length - f->data.padlen;
		/* Its window opens, however slowly: not held. */
		st->held_since = 0;
	} else if (st != NULL && f->hd.type == NGHTTP2_HEADERS &&
	    st->tx != NULL)
		st->sent += f->hd.length;	/* what the client got */
	if (f->hd.type == NGHTTP2_RST_STREAM) {
		c->reset_ids[c->nreset++ % HTTP_H2_RESET_IDS] = f->hd.stream_id;
		/* One nghttp2 sent on its own (its transaction ends as
		 * the stream closes: h2_on_stream_close). */
		if (st != NULL && !st->reset) {
			st->reset = true;
			if (!st->doomed)
				h2_library_reset(c, st,
				    f->rst_stream.error_code);
		}
		/* The client provoked it as surely as it sends its own. */
		if (!c->ended_by_us && c->goaway == 0 && !h2_reset_spend(c))
			(void)h2_end_connection(c, HTTP_H2_FLOOD,
			    f->hd.stream_id, NGHTTP2_ENHANCE_YOUR_CALM,
			    h2_resets_detail);
	}
	/* A response complete before its request (an early 413):
	 * h2_on_data_chunk drops the rest of the body, and past
	 * HTTP_H2_DRAIN_MAX tells the client to stop (RFC 9113 8.1). A
	 * refused CONNECT's client has nothing more to say: stopped at
	 * once. Not a tunnel's end: the client's half stays open. */
	if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
	    (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 &&
	    (st = h2_stream_get(c, f->hd.stream_id)) != NULL &&
	    !st->tunnel_up && !st->reset &&
	    nghttp2_session_get_stream_remote_close(ng, st->id) == 0) {
		st->answered = true;
		if (st->tunnel)
			h2_stream_reset(st, NGHTTP2_NO_ERROR);
	}
	if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != 0) {
		c->goaway = f->goaway.error_code;
		px_session_series_add(c->h->s, HTTP_S_H2_ERRORS, HTTP_H2_GOAWAY,
		    1);
		px_session_log(c->h->s, LOG_NOTICE, "http2-goaway error=%s "
		    "last-stream=%d", nghttp2_http2_strerror(
		    f->goaway.error_code), (int)f->goaway.last_stream_id);
	}
	return 0;
}

/* ---- the connection ---------------------------------------------------- */

/* Ends the client connection once what is queued for it is written. */
static void
h2_finish(struct http_h2 *c, enum px_end_by by, const char *reason)
{
	if (c->closing)
		return;
	c->closing = true;
	http_close_when_flushed(c->h, by, reason);
}

/* What nghttp2 has to send, into the client's output up to `buffer`. */
static void
h2_send(struct http_h2 *c)
{
	struct http_state *h = c->h;
	const uint8_t *data;
	ssize_t n;

	while (evbuffer_get_length(h->c->out) < h->buffer) {
		if ((n = nghttp2_session_mem_send(c->ng, &data)) <= 0)
			break;
		evbuffer_add(h->c->out, data, (size_t)n);
	}
}

/* The client's output goes once a loop pass, after the pass's other
 * events (the servers' reads whose responses go out here too): one write
 * of full records, not one per response. h2_flush_cb drives and writes. */
static void
h2_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_h2 *c = arg;
	struct http_state *h = c->h;

	(void)fd, (void)what;
	c->flushing = true;
	http_h2_drive(c);
	if (!h->gone && h->h2 == c)
		c->flushing = false;
}

static int
h2_flush(struct http_h2 *c)
{
	if (!c->flushing && (c->flush != NULL || (c->flush = event_new(
	    px_session_base(c->h->s), -1, 0, h2_flush_cb, c)) != NULL)) {
		if ((c->flush->ev_evcallback.evcb_flags & EVLIST_ACTIVE) == 0)
			event_active(c->flush, 0, 0);
		return 0;
	}
	return px_conn_send(c->h->c);
}

/* Feeds the client's bytes to nghttp2, writes what it has to send (up to
 * `buffer` queued), and reads the client again while it wants to. */
static void
h2_drive_once(struct http_h2 *c)
{
	struct http_state *h = c->h;
	struct evbuffer *in = h->c->in;
	ssize_t n;

	if (h->gone)
		return;
	while (!c->closing && !c->fatal && evbuffer_get_length(in) != 0) {
		struct evbuffer_iovec v;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		n = nghttp2_session_mem_recv(c->ng, v.iov_base, v.iov_len);
		if (n < 0) {
			c->last_lib_error = (int)n;
			if (!c->ended_by_us)
				h2_event(c, h2_kind_of((int)n), 0,
				    nghttp2_strerror((int)n));
			/* Its GOAWAY, if it queued one, goes out first. */
			evbuffer_drain(in, evbuffer_get_length(in));
			c->fatal = true;
			break;
		}
		evbuffer_drain(in, (size_t)n);
	}
	h2_reset_held(c);
	/* What nghttp2 queued while reading goes out before the
	 * transactions start: a stream it resets for a frame of the same read (a
	 * WINDOW_UPDATE overflowing its window: MadeYouReset) is closed
	 * then, and costs no server request. */
	h2_send(c);
	if (c->npending != 0)
		h2_start_streams(c);
	/* The transactions' steps, and again once nghttp2's DATA made
	 * room for more of their responses. */
	for (n = 0; n < 4; n++) {
		uint64_t before = h->progress;

		if (c->ntxn != 0)
			h2_txn_step_all(c);
		h2_send(c);
		if (h->gone)
			return;
		if (c->ntxn == 0 || h->progress == before)
			break;
	}
	if (evbuffer_get_length(h->c->out) != 0 &&
	    !px_conn_write_blocked(h->c) && h2_flush(c) == -1) {
		int err = errno;

		px_session_endf(h->s, PX_END_CLIENT_FAIL, "client-error: %s",
		    px_conn_strerror(h->c, err));
		return;
	}
	if (h->closing) {
		if (evbuffer_get_length(h->c->out) == 0)
			px_session_finish(h->s, h->end_by, h->end_reason);
		return;
	}
	if (c->fatal || (!nghttp2_session_want_read(c->ng) &&
	    !nghttp2_session_want_write(c->ng))) {
		char why[80];

		snprintf(why, sizeof(why), "client-error: http2: %s",
		    c->goaway != 0 ? nghttp2_http2_strerror(c->goaway) :
		    nghttp2_strerror(c->last_lib_error));
		if (c->fatal || c->goaway != 0)
			h2_finish(c, PX_END_CLIENT_FAIL, why);
		else
			h2_finish(c, PX_END_CLIENT, "client-closed");
		if (evbuffer_get_length(h->c->out) == 0)
			px_session_finish(h->s, h->end_by, h->end_reason);
		return;
	}
	px_conn_read_enable(h->c, !h->client_eof &&
	    evbuffer_get_length(h->c->out) < h->buffer);
	/* No request under way (idle, or only heads still arriving):
	 * request-timeout closes it, as it closes an idle HTTP/1.1
	 * keep-alive connection or one whose head does not come. With
	 * transactions, their tick. */
	n = c->ntxn == 0 ? 1 : 2;
	if (n != c->timer_kind) {
		c->timer_kind = (uint8_t)n;
		px_session_timer(h->s, n == 1 ? h->pol->request_timeout_ms :
		    n == 2 ? HTTP_H2_TICK_MS : 0);
	}
}

/* Not re-entered: a transaction's step or timer that drives its
 * connection (http_h2o_timer, a reply) makes the drive under way run
 * again instead, so that no stream is freed (nghttp2's send and receive
 * close them) under a walk of the list. */
void
http_h2_drive(struct http_h2 *c)
{
	struct http_state *h = c->h;
	int n = 0;

	if (c->driving) {
		c->again = true;
		return;
	}
	c->driving = true;
	do {
		c->again = false;
		h2_drive_once(c);
	} while (!h->gone && h->h2 == c && c->again && ++n < 8);
	if (!h->gone && h->h2 == c)
		c->driving = false;
}

void
http_h2_drive_conn(struct http_state *h)
{
	http_h2_drive(h->h2);
}

int
http_h2_start(struct http_state *h)
{
	const struct http_policy *p = h->pol;
	nghttp2_session_callbacks *cb = NULL;
	nghttp2_option *opt = NULL;
	struct http_h2 *c;
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, p->h2_max_streams },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, p->h2_window },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, p->h2_max_header_list },
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1 },
	};
	/* Extended CONNECT (RFC 8441) only where a WebSocket Upgrade would
	 * be let through: nghttp2 refuses :protocol without it. */
	size_t niv = sizeof(iv) / sizeof(iv[0]) -
	    !http_policy_upgrade(p, "websocket", 9);
	uint64_t conn_window = (uint64_t)p->h2_window * p->h2_max_streams;
	int rc = -1;

	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    nghttp2_session_callbacks_new(&cb) != 0 ||
	    nghttp2_option_new(&opt) != 0)
		goto out;
	c->h = h;
	TAILQ_INIT(&c->list);
	c->priority_left = p->h2_max_streams > 100 ? p->h2_max_streams : 100;
	c->reset_tokens = HTTP_H2_RESET_BURST * 1000ULL;
	c->reset_ms = px_clock_ms();
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb,
	    h2_on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb,
	    h2_on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
	    h2_on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
	    h2_on_stream_close);
	nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb,
	    h2_on_invalid_frame);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb,
	    h2_on_frame_send);
	nghttp2_session_callbacks_set_on_begin_frame_callback(cb,
	    h2_on_begin_frame);
	/* Windows open as the transactions take the bytes, not as they arrive. The
	 * library's defences (rapid reset, CONTINUATION, SETTINGS and
	 * outbound-queue floods, HPACK bounds) stay at their defaults. */
	nghttp2_option_set_no_auto_window_update(opt, 1);
	/* Its frame buffer and stream map take memory as they are written
	 * (http_h2_mem.c): an idle connection holds a page of their 20 KiB. */
	if (nghttp2_session_server_new3(&c->ng, cb, c, opt,
	    http_h2_mem()) != 0)
		goto out;
	if (conn_window > 0x7fffffff)
		conn_window = 0x7fffffff;
	if (nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, niv) != 0 ||
	    nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0,
	    (int32_t)conn_window) != 0)
		goto out;
	h->h2 = c;
	c = NULL;
	px_session_count(h->s, HTTP_C_H2_CONNECTIONS, 1);
	rc = 0;
out:
	if (c != NULL) {
		if (c->ng != NULL)
			nghttp2_session_del(c->ng);
		free(c);
	}
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (rc == 0)
		http_h2_drive(h->h2);
	return rc;
}

int
http_h2_preface(struct http_state *h)
{
	struct evbuffer *in = h->c->in;
	size_t len = evbuffer_get_length(in);
	const char *buf;

	if (h->h2 != NULL)
		return 1;
	if (h->nreq != 0 || !h->pol->h2c || px_session_client_via_tls(h->s))
		return 0;
	if (len > HTTP_H2_PREFACE_LEN)
		len = HTTP_H2_PREFACE_LEN;
	if ((buf = (const char *)evbuffer_pullup(in, (ssize_t)len)) == NULL ||
	    memcmp(buf, HTTP_H2_PREFACE, len) != 0)
		return 0;
	if (len < HTTP_H2_PREFACE_LEN)
		return h->client_eof ? 0 : 1;	/* maybe: wait for the rest */
	if (http_h2_start(h) == -1) {
		http_abort(h, PX_END_PROXY, "error: out of memory");
		return 1;
	}
	return 1;
}

/* The client closed its side (a FIN). A stream whose request it ended
 * (END_STREAM) is still owed its response; one it cannot finish now is
 * reset (its server request stops). GOAWAY says no other stream comes: once the owed
 * responses are out nghttp2 wants neither read nor write, and the
 * connection ends (http_h2_drive). With none owed it ends as soon as what
 * is queued is written. */
static void
h2_client_closed(struct http_h2 *c)
{
	struct h2_stream *st, *next;
	bool owed = false;

	for (st = TAILQ_FIRST(&c->list); st != NULL; st = next) {
		next = TAILQ_NEXT(st, link);
		if (st->reset || st->doomed)
			continue;
		if (st->req_ended)
			owed = true;
		else
			h2_stream_reset(st, NGHTTP2_CANCEL);
	}
	if (!owed) {
		h2_finish(c, PX_END_CLIENT, "client-closed");
		return;
	}
	nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE,
	    nghttp2_session_get_last_proc_stream_id(c->ng), NGHTTP2_NO_ERROR,
	    NULL, 0);
}

void
http_h2_readable(struct http_state *h)
{
	struct http_h2 *c = h->h2;
	ssize_t n;

	px_session_active(h->s);
	n = px_conn_recv(h->c, h->buffer > evbuffer_get_length(h->c->in) ?
	    h->buffer - evbuffer_get_length(h->c->in) : 0);
	if (n == 0) {
		h->client_eof = true;
		px_conn_read_enable(h->c, false);
		h2_client_closed(c);
	} else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != EINTR) {
		int err = errno;

		px_session_endf(h->s, PX_END_CLIENT_FAIL, "client-error: %s",
		    px_conn_strerror(h->c, err));
		return;
	}
	http_h2_drive(c);
}

void
http_h2_writable(struct http_state *h)
{
	px_session_active(h->s);
	if (px_conn_send(h->c) == -1) {
		int err = errno;

		px_session_endf(h->s, PX_END_CLIENT_FAIL, "client-error: %s",
		    px_conn_strerror(h->c, err));
		return;
	}
	http_h2_drive(h->h2);
}

void
http_h2_timer(struct http_state *h)
{
	struct http_h2 *c = h->h2;

	if (h->closing) {
		px_session_end(h->s, PX_END_TIMEOUT,
		    "error: client does not read the reply");
		return;
	}
	if (c->timer_kind == 2) {
		c->timer_kind = 0;
		c->driving = true;	/* the tick walks the streams */
		h2_txn_tick(c);
		if (h->gone || h->h2 != c)
			return;
		c->driving = false;
		http_h2_drive(c);
		return;
	}
	c->timer_kind = 0;
	if (c->ntxn != 0)
		return;
	px_session_count(h->s, HTTP_C_TIMEOUTS, 1);
	nghttp2_session_terminate_session(c->ng, NGHTTP2_NO_ERROR);
	h2_finish(c, PX_END_TIMEOUT, c->open == 0 ?
	    "client-idle: request-timeout" :
	    "client-error: http2: no complete request head within "
	    "request-timeout");
	http_h2_drive(c);
}

/* A reload: no new stream under the old policy (GOAWAY naming the last
 * one taken); those open finish, then the connection closes (nghttp2
 * wants nothing more: http_h2_drive). What the client sent before it and
 * the loop has not read yet (in the socket, or in the TLS layer's buffer,
 * which FIONREAD does not see) is read first: its streams are taken, the
 * GOAWAY names them and they are served, under the policy the connection
 * was accepted with, as an HTTP/1.1 connection's first request is
 * (http_on_config). Else a connection that had taken no stream yet got
 * GOAWAY(0) and closed with its request unread: a reset, which may also
 * take the GOAWAY from the client before it reads it. */
void
http_h2_config(struct http_state *h)
{
	int i;

	for (i = 0; i < 16 && !h->client_eof && !h->h2->fatal &&
	    evbuffer_get_length(h->c->out) < h->buffer &&
	    px_conn_unread(h->c); i++) {
		http_h2_readable(h);
		if (h->gone || h->closing || h->h2 == NULL || h->h2->closing)
			return;
	}
	nghttp2_submit_goaway(h->h2->ng, NGHTTP2_FLAG_NONE,
	    nghttp2_session_get_last_proc_stream_id(h->h2->ng),
	    NGHTTP2_NO_ERROR, NULL, 0);
	http_h2_drive(h->h2);
}

void
http_h2_close(struct http_state *h)
{
	struct http_h2 *c = h->h2;

	if (c == NULL)
		return;
	/* nghttp2_session_del calls no callback: each stream's transaction
	 * is cut as it goes (h2_stream_free). */
	while (!TAILQ_EMPTY(&c->list))
		h2_stream_free(TAILQ_FIRST(&c->list));
	nghttp2_session_del(c->ng);
	if (c->flush != NULL)
		event_free(c->flush);
	free(c);
	h->h2 = NULL;
}

void
http_h2_describe(const struct http_state *h, char *buf, size_t len)
{
	snprintf(buf, len, "HTTP/2: %u stream%s open (%u transaction%s), "
	    "%llu so far", h->h2->open, h->h2->open == 1 ? "" : "s",
	    h->h2->ntxn, h->h2->ntxn == 1 ? "" : "s",
	    (unsigned long long)h->h2->streams);
}
