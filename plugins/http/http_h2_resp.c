/* HTTP/2 towards clients: a leg's HTTP/1.1 response read back into
 * HEADERS, DATA and trailers (RFC 9113 8.1), without the fields that mean
 * something to one HTTP/1.1 connection only. The stream's state and why
 * legs exist: http_h2.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "http_h2_int.h"

/* ---- the response from the leg ----------------------------------------- */

/* Names that mean something to one HTTP/1.1 connection only (RFC 9113
 * 8.2.2): never sent in HTTP/2. */
static bool
h2_conn_specific(const char *n, size_t len)
{
	return http_token_eq(n, len, "connection") ||
	    http_token_eq(n, len, "keep-alive") ||
	    http_token_eq(n, len, "proxy-connection") ||
	    http_token_eq(n, len, "transfer-encoding") ||
	    http_token_eq(n, len, "upgrade") || http_token_eq(n, len, "te") ||
	    /* The HTTP/1.1 WebSocket handshake's proof: not used over h2
	     * (RFC 8441 5), where the 101 becomes a 200. */
	    http_token_eq(n, len, "sec-websocket-accept");
}

/* m's fields as nghttp2_nv after nva[n], without connection-specific
 * ones, names lower case (RFC 9113 8.2.1) in names (as long as m's
 * head). The new count. */
static size_t
h2_nv_fields(const struct http_head *m, nghttp2_nv *nva, size_t n,
    char *names)
{
	size_t i, k, off = 0;

	for (i = 0; i < m->nhdr; i++) {
		const struct http_hdr *f = &m->hdr[i];

		if (h2_conn_specific(f->name, f->nlen))
			continue;
		for (k = 0; k < f->nlen; k++)
			names[off + k] = (char)(f->name[k] >= 'A' &&
			    f->name[k] <= 'Z' ? f->name[k] + 32 : f->name[k]);
		nva[n++] = (nghttp2_nv){ (uint8_t *)names + off,
		    (uint8_t *)f->val, f->nlen, f->vlen, NGHTTP2_NV_FLAG_NONE };
		off += f->nlen;
	}
	return n;
}

/* The trailer section the leg sent (the policy let it through) as a
 * trailing HEADERS frame. 0, or -1. */
static int
h2_submit_trailers(struct h2_stream *st)
{
	static _Thread_local struct http_head t;
	static _Thread_local nghttp2_nv nva[HTTP_MAX_HEADERS];
	struct http_limits lim = st->c->h->pol->lim;
	size_t len = evbuffer_get_length(st->trailers), n;
	const char *buf = (const char *)evbuffer_pullup(st->trailers, -1);
	const char *why;
	char *names;
	int rc;

	lim.max_header_bytes = len + 1;
	lim.max_line = len + 1;
	lim.max_header_lines = HTTP_MAX_HEADERS - 1;
	if (buf == NULL || http_parse_trailers(buf, len, &lim, &t, &why) <= 0 ||
	    (names = malloc(len)) == NULL)
		return -1;
	n = h2_nv_fields(&t, nva, 0, names);
	rc = nghttp2_submit_trailer(st->c->ng, st->id, nva, n);
	free(names);
	return rc == 0 ? 0 : -1;
}

/* nghttp2 asks for DATA: what the leg's body gave so far. */
static ssize_t
h2_read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
    uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct h2_stream *st = src->ptr;
	size_t n = evbuffer_get_length(st->body);

	(void)ng, (void)id, (void)ud;
	if (n == 0 && !st->eof) {
		st->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	if (n > len)
		n = len;
	evbuffer_remove(st->body, buf, n);
	if (st->eof && evbuffer_get_length(st->body) == 0) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		/* Trailers end the stream instead. */
		if (evbuffer_get_length(st->trailers) != 0 &&
		    h2_submit_trailers(st) == 0)
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
	}
	/* Room again: the leg may be read. */
	if (st->leg_open && !st->leg.eof)
		px_conn_read_enable(&st->leg, h2_leg_room(st) > 0);
	return (ssize_t)n;
}

/* A response head from the leg (always well formed: our own analyser
 * wrote it) as HEADERS. 0, or -1. */
static int
h2_response_head(struct h2_stream *st, const char *buf, size_t len)
{
	static _Thread_local struct http_head m;
	struct http_state *h = st->c->h;
	struct http_limits lim = h->pol->lim;
	nghttp2_nv nva[HTTP_MAX_HEADERS + 1];
	char status[4], *names;
	nghttp2_data_provider prd;
	const char *why;
	size_t n = 0;
	int rc, code;

	/* The leg already held it to the limits, and added Via. */
	lim.max_header_bytes = len + 1;
	lim.max_line = len + 1;
	lim.max_header_lines = HTTP_MAX_HEADERS - 1;
	if (http_parse_head(buf, len, false, &lim, &m, &why) != 0 ||
	    (code = h2_tunnel_status(st, m.status)) == -1 ||
	    (names = malloc(len)) == NULL)
		return -1;
	snprintf(status, sizeof(status), "%03d", code);
	nva[n++] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)status, 7,
	    3, NGHTTP2_NV_FLAG_NONE };
	n = h2_nv_fields(&m, nva, n, names);
	if (code < 200) {
		/* Interim (100, 103): the final one follows. */
		rc = nghttp2_submit_headers(st->c->ng, NGHTTP2_FLAG_NONE, st->id,
		    NULL, nva, n, NULL);
		free(names);
		return rc == 0 ? 0 : -1;
	}
	st->body_kind = HTTP_BODY_CLOSE;
	if (st->is_head || m.status == 204 || m.status == 304)
		st->body_kind = HTTP_BODY_NONE;
	else if (m.chunked) {
		st->body_kind = HTTP_BODY_CHUNKED;
		memset(&st->chunk, 0, sizeof(st->chunk));
		st->chunk.step = true;
	} else if (m.content_length >= 0) {
		st->body_kind = m.content_length > 0 ? HTTP_BODY_LENGTH :
		    HTTP_BODY_NONE;
		st->left = (uint64_t)m.content_length;
	}
	/* The leg stays open for another request after this one. */
	st->leg_keeps = !m.conn_close && m.minor == 1 &&
	    st->body_kind != HTTP_BODY_CLOSE;
	if (st->tunnel)
		h2_tunnel_response(st, code);
	st->resp = st->body_kind == HTTP_BODY_NONE ? H2_RESP_DONE :
	    H2_RESP_BODY;
	st->eof = st->resp == H2_RESP_DONE;
	st->status = code;
	st->head_len = len;
	prd.source.ptr = st;
	prd.read_callback = h2_read_body;
	rc = nghttp2_submit_response(st->c->ng, st->id, nva, n,
	    st->eof ? NULL : &prd);
	free(names);
	st->submitted = rc == 0;
	return rc == 0 ? 0 : -1;
}

/* Moves body bytes from the leg's input to st->body. 0, or -1 (bad
 * framing: cannot be from our own leg, but never trusted). */
static int
h2_response_body(struct h2_stream *st)
{
	struct evbuffer *in = st->leg.in;
	const struct http_limits *lim = &st->c->h->pol->lim;

	while (st->resp == H2_RESP_BODY && evbuffer_get_length(in) != 0) {
		struct evbuffer_iovec v;
		const char *why;
		ssize_t k;

		if (st->body_kind == HTTP_BODY_CLOSE) {
			evbuffer_add_buffer(st->body, in);
			break;
		}
		if (st->body_kind == HTTP_BODY_LENGTH) {
			size_t n = evbuffer_get_length(in);

			if (n > st->left)
				n = (size_t)st->left;
			evbuffer_remove_buffer(in, st->body, n);
			if ((st->left -= n) == 0)
				st->resp = H2_RESP_DONE;
			continue;
		}
		if (st->chunk.state == HTTP_CHUNK_TRAILER) {
			/* Trailers the policy let through (trailers=
			 * "pass"): kept for h2_submit_trailers. */
			const char *buf = (const char *)evbuffer_pullup(in, -1);
			static _Thread_local struct http_head t;

			k = http_parse_trailers(buf, evbuffer_get_length(in), lim,
			    &t, &why);
			if (k == 0)
				return 0;
			if (k < 0)
				return -1;
			if (t.nhdr != 0)
				evbuffer_remove_buffer(in, st->trailers,
				    (size_t)k);
			else
				evbuffer_drain(in, (size_t)k);
			st->resp = H2_RESP_DONE;
			continue;
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			return 0;
		{
			enum http_chunk_state was = st->chunk.state;

			if ((k = http_chunk_feed(&st->chunk, v.iov_base,
			    v.iov_len, lim, &why)) < 0)
				return -1;
			if (was == HTTP_CHUNK_DATA)
				evbuffer_remove_buffer(in, st->body, (size_t)k);
			else
				evbuffer_drain(in, (size_t)k);
			if (st->chunk.state == HTTP_CHUNK_DONE)
				st->resp = H2_RESP_DONE;
			if (k == 0)
				return 0;
		}
	}
	return 0;
}

/* What the leg sent: heads, then body. 0, or -1 (the stream is reset). */
int
h2_leg_input(struct h2_stream *st)
{
	struct evbuffer *in = st->leg.in;

	while (st->resp == H2_RESP_HEAD && evbuffer_get_length(in) != 0) {
		size_t len = evbuffer_get_length(in);
		const char *buf = (const char *)evbuffer_pullup(in, -1);
		ssize_t end;

		if (buf == NULL)
			return -1;
		end = http_head_end(buf, len, HTTP_H2_STREAM_BUF,
		    &st->head_scan);
		if (end == 0)
			return 0;
		if (end < 0 || h2_response_head(st, buf, (size_t)end) == -1)
			return -1;
		st->head_scan = 0;
		evbuffer_drain(in, (size_t)end);
	}
	if (st->resp == H2_RESP_BODY && h2_response_body(st) == -1)
		return -1;
	if (st->resp == H2_RESP_DONE) {
		st->eof = true;
		/* Whatever follows answers nothing. */
		evbuffer_drain(in, evbuffer_get_length(in));
	}
	return 0;
}

