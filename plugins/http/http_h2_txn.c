/* The HTTP/2 stream's response writer (http_h2_txn.h): heads as HEADERS,
 * the body as DATA from the stream's buffer, its end as END_STREAM or
 * trailers; and the http_client_ops of a transaction that is a stream
 * (http_client_h2), for when http_h2.c makes streams transactions. */
#include "http_h2_txn.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "http_int.h"

/* A header list as the *_fields writers give it, lower-cased, then made
 * nghttp2_nv (which nghttp2 copies when it is submitted). */
struct h2w_list {
	char		*mem;
	size_t		 len, cap;
	size_t		*off;		/* name, value offsets; lengths */
	size_t		 n, fcap;
	bool		 failed;
	bool		 no_length;	/* Content-Length does not go */
	/* An Upgrade's fields do not go (an extended CONNECT's 101, sent
	 * as its 200: RFC 9113 8.2.2, RFC 8441 5). */
	bool		 no_upgrade;
};

static bool
h2w_room(struct h2w_list *l, size_t len)
{
	size_t cap = l->cap != 0 ? l->cap : 512;
	char *nm;

	while (cap - l->len < len) {
		if (cap > SIZE_MAX / 2)
			return false;
		cap *= 2;
	}
	if (cap != l->cap) {
		if ((nm = realloc(l->mem, cap)) == NULL)
			return false;
		l->mem = nm;
		l->cap = cap;
	}
	return true;
}

static void
h2w_add(void *arg, const char *name, size_t nlen, const char *val,
    size_t vlen)
{
	struct h2w_list *l = arg;
	size_t i, *no;

	if (l->failed || (l->no_length && nlen == 14 &&
	    strncasecmp(name, "content-length", 14) == 0))
		return;
	if (l->no_upgrade && ((nlen == 7 && strncasecmp(name, "upgrade",
	    7) == 0) || (nlen == 20 && strncasecmp(name,
	    "sec-websocket-accept", 20) == 0)))
		return;
	if (name == NULL || nlen > SIZE_MAX / 2 || vlen > SIZE_MAX / 2 ||
	    !h2w_room(l, nlen + vlen)) {
		l->failed = true;
		return;
	}
	if (l->n == l->fcap) {
		size_t fcap = l->fcap != 0 ? l->fcap * 2 : 16;

		if ((no = realloc(l->off, fcap * 4 * sizeof(*no))) == NULL) {
			l->failed = true;
			return;
		}
		l->off = no;
		l->fcap = fcap;
	}
	/* RFC 9113 8.2.1: field names in lower case. */
	for (i = 0; i < nlen; i++)
		l->mem[l->len + i] = (name[i] >= 'A' && name[i] <= 'Z') ?
		    (char)(name[i] - 'A' + 'a') : name[i];
	memcpy(l->mem + l->len + nlen, val, vlen);
	no = l->off + l->n * 4;
	no[0] = l->len;
	no[1] = nlen;
	no[2] = l->len + nlen;
	no[3] = vlen;
	l->len += nlen + vlen;
	l->n++;
}

/* l as nghttp2_nv (pointing into l->mem); NULL out of memory. */
static nghttp2_nv *
h2w_nv(struct h2w_list *l)
{
	nghttp2_nv *nv;
	size_t i, *o;

	if (l->failed || (nv = calloc(l->n + 1, sizeof(*nv))) == NULL)
		return NULL;
	for (i = 0; i < l->n; i++) {
		o = l->off + i * 4;
		nv[i].name = (uint8_t *)l->mem + o[0];
		nv[i].namelen = o[1];
		nv[i].value = (uint8_t *)l->mem + o[2];
		nv[i].valuelen = o[3];
		nv[i].flags = NGHTTP2_NV_FLAG_NONE;
	}
	return nv;
}

static void
h2w_list_free(struct h2w_list *l)
{
	free(l->mem);
	free(l->off);
}

static void
h2w_wake(struct http_h2w *w)
{
	if (w->wake != NULL)
		w->wake(w->wake_arg);
}

/* Bytes came into the body buffer: a DATA waiting for them goes on. */
static void
h2w_grew(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
	struct http_h2w *w = arg;

	(void)b;
	if (info->n_added != 0)
		http_h2w_released(w);
}

void
http_h2w_released(struct http_h2w *w)
{
	if (!w->deferred || w->done)
		return;
	w->deferred = false;
	if (nghttp2_session_resume_data(w->ng, w->id) != 0)
		w->failed = true;
	else
		h2w_wake(w);
}

static void
h2w_trl_free(struct http_h2w *w)
{
	free(w->trl);
	free(w->trl_mem);
	w->trl = NULL;
	w->trl_mem = NULL;
	w->ntrl = 0;
}

int
http_h2w_init(struct http_h2w *w, nghttp2_session *ng, int32_t id,
    bool is_head, bool connect)
{
	memset(w, 0, sizeof(*w));
	w->ng = ng;
	w->id = id;
	w->is_head = is_head;
	w->connect = connect;
	w->left = -1;
	if ((w->buf = evbuffer_new()) == NULL ||
	    (w->in = evbuffer_new()) == NULL ||
	    evbuffer_add_cb(w->buf, h2w_grew, w) == NULL) {
		http_h2w_free(w);
		return -1;
	}
	return 0;
}

void
http_h2w_closed(struct http_h2w *w)
{
	w->done = true;
	w->deferred = false;
	w->ng = NULL;
}

void
http_h2w_free(struct http_h2w *w)
{
	/* nghttp2 holds w as the source of the stream's DATA until the
	 * stream closes: reset first (the RST_STREAM goes ahead of any
	 * DATA, and closing the stream drops its source unread). */
	if (w->ng != NULL && w->streaming && !w->done)
		(void)nghttp2_submit_rst_stream(w->ng, NGHTTP2_FLAG_NONE, w->id,
		    NGHTTP2_CANCEL);
	w->done = true;
	if (w->buf != NULL)
		evbuffer_free(w->buf);
	if (w->in != NULL)
		evbuffer_free(w->in);
	w->buf = w->in = NULL;
	h2w_trl_free(w);
}

/* nghttp2 takes DATA: what the buffer has, up to len; the end once the
 * body is whole and taken (the trailers then, if any). */
static ssize_t
h2w_read(nghttp2_session *ng, int32_t id, uint8_t *out, size_t len,
    uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct http_h2w *w = src->ptr;
	size_t have = evbuffer_get_length(w->buf);
	int n;

	(void)ud;
	if (w->rst_after != 0 && have == 0) {
		/* What the server sent before it failed went: now the
		 * reset (http_h2w_reset_after). */
		w->done = true;
		if (nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id,
		    w->rst_after) != 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		return NGHTTP2_ERR_DEFERRED;
	}
	if (w->left >= 0 && (uint64_t)w->left < len)
		len = (size_t)w->left;
	if (have < len)
		len = have;
	if (len > 0 && (n = evbuffer_remove(w->buf, out, len)) != (int)len)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	w->sent += len;
	if (w->left >= 0) {
		w->left -= (int64_t)len;
		if (w->left == 0 && w->length_ends)
			w->eof = true;
	}
	/* The end waits behind bytes still held (w->held). */
	if (!w->eof || (w->left != 0 && (evbuffer_get_length(w->buf) != 0 ||
	    (w->held != NULL && w->held(w->held_arg))))) {
		if (len > 0)
			return (ssize_t)len;
		w->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	w->done = true;
	if (w->trl != NULL) {
		*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
		if (nghttp2_submit_trailer(ng, id, w->trl, w->ntrl) != 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	return (ssize_t)len;
}

int
http_h2w_head(struct http_h2w *w, const struct http_head *m,
    const struct http_policy *p, const struct http_resp_ctx *rs)
{
	struct h2w_list l = { 0 };
	nghttp2_data_provider dp = { .source.ptr = w, .read_callback =
	    h2w_read };
	nghttp2_nv *nv;
	char st[4];
	int rc, s = m->status;
	bool interim, tunnel;

	if (w->submitted || w->done || s < 100 || s > 999 ||
	    (s == 101 && !w->ext) || (w->ext && s >= 200 && s < 300))
		return -1;
	/* An extended CONNECT's 101 is its 200 (RFC 8441 5). */
	l.no_upgrade = s == 101;
	if (s == 101)
		s = 200;
	interim = s >= 100 && s < 200;
	tunnel = w->connect && s >= 200 && s < 300;
	if (!interim && rs->own && w->eof) {
		/* proxyd's reply in place of a held response: the end kept
		 * was that response's (its trailers with it). */
		w->eof = false;
		h2w_trl_free(w);
	}
	st[0] = (char)('0' + s / 100);
	st[1] = (char)('0' + s / 10 % 10);
	st[2] = (char)('0' + s % 10);
	st[3] = '\0';
	h2w_add(&l, ":status", 7, st, 3);
	/* RFC 9110 8.6: never in a 1xx or a 204, though an HTTP/1.1 server
	 * may send one there; an HTTP/2 client resets the stream for it.
	 * Nor in a 2xx to CONNECT (9.3.6): a tunnel has no length. */
	l.no_length = interim || s == 204 || tunnel;
	http_head_response_fields(m, p, rs, h2w_add, &l);
	if ((nv = h2w_nv(&l)) == NULL) {
		h2w_list_free(&l);
		w->failed = true;
		return -1;
	}
	if (interim)
		rc = nghttp2_submit_headers(w->ng, NGHTTP2_FLAG_NONE, w->id,
		    NULL, nv, l.n, NULL);
	else if (!tunnel && (w->is_head || s == 204 || s == 304 ||
	    (m->content_length == 0 && !m->chunked))) {
		rc = nghttp2_submit_response(w->ng, w->id, nv, l.n, NULL);
		w->eof = w->done = true;
	} else {
		if (!tunnel && !m->chunked && m->content_length > 0)
			w->left = m->content_length;
		/* minor 2: an HTTP/2 server's (http_h2o), ended by end(). */
		w->length_ends = m->minor != 2 || rs->own;
		rc = nghttp2_submit_response(w->ng, w->id, nv, l.n, &dp);
		w->streaming = true;
		w->tunnel = tunnel;
	}
	free(nv);
	w->head_bytes = l.len;
	h2w_list_free(&l);
	if (rc != 0) {
		w->failed = true;
		return -1;
	}
	if (!interim)
		w->submitted = true;
	h2w_wake(w);
	return 0;
}

void
http_h2w_data(struct http_h2w *w, struct evbuffer *src, size_t n,
    struct evbuffer *out)
{
	/* Before the head (a scan holds it, out is its hold), the body
	 * goes with it. */
	if ((w->submitted && !w->streaming) || w->done) {
		evbuffer_drain(src, n);	/* no body on this response */
		return;
	}
	evbuffer_remove_buffer(src, out, n);
}

int
http_h2w_end(struct http_h2w *w, const struct http_head *tr,
    const struct http_policy *p)
{
	struct h2w_list l = { 0 };

	/* Before the head (a scan holds it): kept for it. */
	if ((w->submitted && !w->streaming) || w->done || w->eof)
		return 0;
	if (tr != NULL)
		http_head_trailer_fields(tr, p, false, h2w_add, &l);
	if (l.failed) {
		h2w_list_free(&l);
		w->failed = true;
		return -1;
	}
	if (l.n > 0) {
		if ((w->trl = h2w_nv(&l)) == NULL) {
			h2w_list_free(&l);
			w->failed = true;
			return -1;
		}
		w->ntrl = l.n;
		w->trl_mem = l.mem;
		l.mem = NULL;
	}
	h2w_list_free(&l);
	w->eof = true;
	if (w->deferred) {
		w->deferred = false;
		if (nghttp2_session_resume_data(w->ng, w->id) != 0) {
			w->failed = true;
			return -1;
		}
		h2w_wake(w);
	}
	return 0;
}

void
http_h2w_reset(struct http_h2w *w, uint32_t code)
{
	if (w->done)
		return;		/* END_STREAM already queued */
	w->done = true;
	if (nghttp2_submit_rst_stream(w->ng, NGHTTP2_FLAG_NONE, w->id,
	    code) != 0)
		w->failed = true;
	else
		h2w_wake(w);
}

void
http_h2w_reset_after(struct http_h2w *w, uint32_t code)
{
	if (!w->streaming || w->done) {
		http_h2w_reset(w, code);
		return;
	}
	w->rst_after = code;
	if (w->deferred) {
		w->deferred = false;
		if (nghttp2_session_resume_data(w->ng, w->id) != 0) {
			w->failed = true;
			return;
		}
	}
	h2w_wake(w);
}

/* The code of a stream the server side failed: CONNECT_ERROR for a
 * tunnel (RFC 9113 8.5: its TCP connection reset or failed), else
 * INTERNAL_ERROR. */
static uint32_t
http_h2t_fail_code(const struct http_h2w *w)
{
	return w->tunnel ? NGHTTP2_CONNECT_ERROR : NGHTTP2_INTERNAL_ERROR;
}

/* ---- a transaction that is a stream: its client side ------------------- */

size_t
http_h2w_head_bytes(const struct http_h2w *w)
{
	return w->head_bytes;
}

int32_t
http_h2w_stream(const struct http_h2w *w)
{
	return w->id;
}

static void
http_h2t_head(struct http_txn *t, const struct http_head *m,
    const struct http_resp_ctx *rs, struct evbuffer *out)
{
	(void)out;	/* HEADERS go to nghttp2, held or not */
	if (http_h2w_head(t->h2w, m, t->conn->pol, rs) == -1)
		http_h2w_reset(t->h2w, NGHTTP2_INTERNAL_ERROR);
}

/* A head adds no bytes to out: HEADERS are nghttp2's. */
static int
http_h2t_head_size(struct http_txn *t, const struct http_head *m,
    const struct http_resp_ctx *rs, size_t *n)
{
	(void)t, (void)m, (void)rs;
	*n = 0;
	return 0;
}

static void
http_h2t_data(struct http_txn *t, struct evbuffer *src, size_t n,
    struct evbuffer *out)
{
	http_h2w_data(t->h2w, src, n, out);
}

/* A scan holding part of the response toward the client: its end waits. */
static bool
http_h2t_held(void *arg)
{
	return http_scan_holding(arg, PX_TO_CLIENT);
}

static void
http_h2t_end(struct http_txn *t, const struct http_head *tr,
    struct evbuffer *out)
{
	(void)out;	/* the end goes behind what a scan holds: held */
	t->h2w->held = http_h2t_held;
	t->h2w->held_arg = t;
	if (http_h2w_end(t->h2w, tr, t->conn->pol) == -1)
		http_h2w_reset(t->h2w, NGHTTP2_INTERNAL_ERROR);
}

/* The stream ends cut (its transaction with it), not the connection. */
static void
http_h2t_reset(struct http_txn *t, const char *why)
{
	http_txn_cut(t, PX_END_SERVER_FAIL, http_h2t_fail_code(t->h2w), why);
}

static struct evbuffer *
http_h2t_in(struct http_txn *t)
{
	return t->h2w->in;
}

static struct evbuffer *
http_h2t_out(struct http_txn *t)
{
	return t->h2w->buf;
}

const struct http_client_ops http_client_h2 = {
	.name = "h2",
	.head = http_h2t_head,
	.head_size = http_h2t_head_size,
	.data = http_h2t_data,
	.end = http_h2t_end,
	.reset = http_h2t_reset,
	.in = http_h2t_in,
	.out = http_h2t_out,
};
