/* HTTP/2 towards servers (server-h2="yes", see http_h2_origin.h): a
 * transaction's stream, its request out and its response in, on a
 * connection of http_h2_origin.c's.
 *
 * The message seam: the request's header list is made from the parsed
 * request when its head is (http_h2o_prepare), by the writer of the head
 * an HTTP/1.1 server gets (http_head_request_fields: the request-header
 * rules, Host, X-Forwarded-For, Via applied, the hop-by-hop fields, and
 * Transfer-Encoding and Connection, left out), never from that text
 * parsed again: :method, :scheme, :authority (Host), :path (the canonical
 * target), the fields with lower-case names, "te: trailers" when the
 * client asked for trailers. Its trailer section the same way
 * (http_head_trailer_fields). The response comes back as header blocks
 * gathered from nghttp2's header callbacks (sized to their fields), made
 * a struct http_head when the engine reads one, never text parsed again,
 * and goes through http_judge_response as an HTTP/1.1 server's head
 * does; its body and end go through the client's writer (http_client,
 * http_txn.c): to an HTTP/1.1 client a response without content-length
 * gets chunked framing (its trailers go as chunked trailers when
 * trailers="pass"), to an HTTP/1.0 one it is close-delimited; a head that
 * ends the stream gets content-length: 0 (so a gRPC trailers-only
 * response reaches an HTTP/2 client as one HEADERS frame again).
 *
 * Bodies: a request body's bytes go as DATA (chunked framing removed; its
 * trailer section as a trailing HEADERS); the response's DATA feed the
 * engine until END_STREAM. Flow control end to end: a stream's window is
 * `buffer`, and what the server sent is given back (WINDOW_UPDATE) only
 * once the client side took it, so a slow client stops the server's
 * stream rather than anything growing; the request side is read from the
 * client only while the stream's queue is under `buffer`.
 *
 * Full duplex: a response that comes before the request's end is normal
 * (an h2 stream cannot desynchronise as an HTTP/1.1 connection would):
 * both directions go on until both end, though once the response is
 * whole, the request's rest has request-timeout at a time to go (a server
 * that keeps the stream's window shut: the stream cancelled, the
 * transaction ended as an early response). RST_STREAM from the server: 502
 * before the response head, else the client's transaction is aborted. A
 * connection that fails, or a stream the server refused, before any
 * response byte of a replayable request: the request goes once more on a
 * new connection; a stream refused unprocessed (REFUSED_STREAM, RFC 9113
 * 8.7) goes again whatever its method, with its body (a copy of what was
 * sent is kept, up to `buffer`, until a response comes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <syslog.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include "http_h2_origin.h"
#include "http_h2_origin_int.h"
#include "http_head.h"
#include "http_int.h"
#include "parse.h"

/* ---- header lists ------------------------------------------------------ */

struct http_h2o_req {
	struct h2o_list	 l;
};

static void
h2o_list_free(struct h2o_list *l)
{
	free(l->buf);
	free(l->f);
	free(l->nv);
	memset(l, 0, sizeof(*l));
}

/* Appends a field (name lower-cased when lower). -1: out of memory. */
static int
h2o_list_add(struct h2o_list *l, const char *name, size_t nlen,
    const char *val, size_t vlen, bool lower)
{
	size_t k;

	if (l->n == l->fcap) {
		unsigned fcap = l->fcap ? l->fcap * 2 : 16;
		struct h2o_field *nf = reallocarray(l->f, fcap, sizeof(*nf));

		if (nf == NULL)
			return -1;
		l->f = nf;
		l->fcap = fcap;
	}
	if (l->len + nlen + vlen > l->cap) {
		size_t cap = l->cap * 2 + nlen + vlen + 256;
		/* A value of the list itself (:authority, Host's) moves
		 * with it. */
		bool own = l->buf != NULL && val >= l->buf &&
		    val < l->buf + l->len;
		size_t vo = own ? (size_t)(val - l->buf) : 0;
		char *nb = realloc(l->buf, cap);

		if (nb == NULL)
			return -1;
		l->buf = nb;
		l->cap = cap;
		if (own)
			val = l->buf + vo;
	}
	for (k = 0; k < nlen; k++) {
		char ch = name[k];

		l->buf[l->len + k] = (char)(lower && ch >= 'A' && ch <= 'Z' ?
		    ch + 32 : ch);
	}
	l->f[l->n].no = (uint32_t)l->len;
	l->f[l->n].nl = (uint32_t)nlen;
	l->len += nlen;
	memcpy(l->buf + l->len, val, vlen);
	l->f[l->n].vo = (uint32_t)l->len;
	l->f[l->n].vl = (uint32_t)vlen;
	l->len += vlen;
	l->n++;
	return 0;
}

/* http_head_request_fields' and http_head_trailer_fields' fn: a field of
 * the list; Host kept aside, the :authority. */
static void
h2o_list_field(void *arg, const char *name, size_t nlen, const char *val,
    size_t vlen)
{
	struct h2o_list *l = arg;

	if (l->failed)
		return;
	if (name == NULL) {
		l->failed = true;
		return;
	}
	if (nlen == 4 && http_token_eq(name, nlen, "host")) {
		if (l->authority != -1)
			return;
		l->authority = (int)l->n;
	}
	if (h2o_list_add(l, name, nlen, val, vlen, true) == -1)
		l->failed = true;
}

/* The nghttp2_nv array of l: the pseudo-fields (added last) first, then
 * the fields but Host. 0, or -1. */
static int
h2o_list_done(struct h2o_list *l)
{
	unsigned i, k = 0, nf = l->n - l->npseudo;

	if (l->failed || (l->nv = calloc(l->n + 1, sizeof(*l->nv))) == NULL)
		return -1;
	for (i = 0; i < l->n; i++) {
		unsigned j = i < l->npseudo ? nf + i : i - l->npseudo;

		if ((int)j == l->authority)
			continue;
		l->nv[k].name = (uint8_t *)l->buf + l->f[j].no;
		l->nv[k].namelen = l->f[j].nl;
		l->nv[k].value = (uint8_t *)l->buf + l->f[j].vo;
		l->nv[k].valuelen = l->f[j].vl;
		l->nv[k].flags = NGHTTP2_NV_FLAG_NONE;
		k++;
	}
	l->nnv = k;
	return 0;
}

void
http_h2o_prepare(struct http_txn *t, const struct http_head *m,
    const struct http_req_ctx *r)
{
	struct http_state *h = t->conn;
	struct http_h2o_req *rq = t->h2o_req;
	struct h2o_list *l;
	unsigned nf;
	bool ok;

	if (rq == NULL && (rq = t->h2o_req = calloc(1, sizeof(*rq))) == NULL)
		return;
	l = &rq->l;
	h2o_list_free(l);
	l->authority = -1;
	/* The fields as an HTTP/1.1 server gets them (the request-header
	 * rules, Host, X-Forwarded-For, Via), from the parsed request. */
	http_head_request_fields(m, h->pol, r, h2o_list_field, l);
	if (t->te_trailers && h2o_list_add(l, "te", 2, "trailers", 8,
	    false) == -1)
		l->failed = true;
	if (l->failed || l->authority == -1) {
		l->failed = true;
		return;
	}
	nf = l->n;
	/* :method, :scheme, :authority (Host), :path (the target sent
	 * on, "/" before a bare query, its query). */
	ok = h2o_list_add(l, ":method", 7, m->method, m->mlen, false) == 0 &&
	    (px_session_tls_originates(h->s) ?
	    h2o_list_add(l, ":scheme", 7, "https", 5, false) :
	    h2o_list_add(l, ":scheme", 7, "http", 4, false)) == 0 &&
	    h2o_list_add(l, ":authority", 10, l->buf +
	    l->f[l->authority].vo, l->f[l->authority].vl, false) == 0 &&
	    h2o_list_add(l, ":path", 5, "/", r->tlen > 0 &&
	    r->target[0] == '?' ? 1 : 0, false) == 0;
	if (ok && r->tlen != 0) {
		/* The value grows in place: it is the buffer's last bytes. */
		unsigned last = l->n - 1;

		ok = h2o_list_add(l, "", 0, r->target, r->tlen, false) == 0 &&
		    (r->query == NULL || (h2o_list_add(l, "", 0, "?", 1,
		    false) == 0 && h2o_list_add(l, "", 0, r->query, r->qlen,
		    false) == 0));
		while (ok && l->n > last + 1)
			l->f[last].vl += l->f[--l->n].vl;
	}
	l->npseudo = l->n - nf;
	if (!ok || h2o_list_done(l) == -1)
		l->failed = true;
}

void
http_h2o_close(struct http_txn *t)
{
	if (t->h2o_req == NULL)
		return;
	h2o_list_free(&t->h2o_req->l);
	free(t->h2o_req);
	t->h2o_req = NULL;
}

void
http_h2o_req_trailers(struct http_txn *t, const struct http_head *tr)
{
	struct http_state *h = t->conn;
	struct http_h2o_stream *st = t->h2o;

	if (st == NULL || !h->pol->trailers_pass || tr->nhdr == 0 ||
	    st->tl != NULL || (st->tl = calloc(1, sizeof(*st->tl))) == NULL)
		return;
	/* Through the rules as an HTTP/1.1 server would get them. */
	st->tl->authority = -1;
	http_head_trailer_fields(tr, h->pol, true, h2o_list_field, st->tl);
	if (st->tl->n == 0 || h2o_list_done(st->tl) == -1) {
		h2o_list_free(st->tl);
		free(st->tl);
		st->tl = NULL;
	}
}

/* How a final head without content-length is framed to the client. */
enum h2o_framing {
	H2O_FRAMING_AS_IS = 0,	/* interim heads, trailers; HTTP/1.0 client */
	H2O_FRAMING_CHUNKED,	/* chunks, which end where the stream does */
	H2O_FRAMING_EMPTY,	/* it came with END_STREAM: no body */
};

/* The block gathered made a struct http_head (pointers into blk->buf). */
static void
h2o_block_head(struct h2o_block *b, struct http_head *m,
    enum h2o_framing framing)
{
	static char chunked[] = "transfer-encodingchunked";
	static char empty[] = "content-length0";
	struct http_hdr *f;
	unsigned i;

	memset(m, 0, offsetof(struct http_head, hdr));
	m->request = false;
	m->status = b->status;
	m->reason = "";
	m->rlen = 0;
	m->minor = 2;		/* Via: 2 (http_head_response) */
	m->content_length = -1;
	m->host = m->upgrade = -1;
	for (i = 0; i < b->l.n; i++) {
		f = &m->hdr[m->nhdr];
		f->name = b->l.buf + b->l.f[i].no;
		f->nlen = b->l.f[i].nl;
		f->val = b->l.buf + b->l.f[i].vo;
		f->vlen = b->l.f[i].vl;
		f->id = (unsigned char)http_field_id(f->name, f->nlen);
		if (memchr(f->name, '_', f->nlen) != NULL)
			m->underscore = true;
		if (f->id == HTTP_F_CONTENT_LENGTH) {
			uint64_t v = 0;
			size_t k;

			for (k = 0; k < f->vlen && v < (1ULL << 60); k++)
				v = v * 10 + (uint64_t)(f->val[k] - '0');
			m->content_length = (int64_t)v;
		}
		m->nhdr++;
	}
	if (framing == H2O_FRAMING_AS_IS || m->content_length >= 0 ||
	    m->nhdr >= HTTP_MAX_HEADERS)
		return;
	/* No length from the server. A head that ended the stream (a gRPC
	 * trailers-only response) says its body is empty, so that an HTTP/2
	 * client gets one HEADERS frame with END_STREAM again: HEADERS and
	 * an empty DATA are a call without status to a gRPC client
	 * ("Stream removed", UNKNOWN). Else the HTTP/1.1 client gets
	 * chunks, which end where the stream does. */
	f = &m->hdr[m->nhdr++];
	f->name = framing == H2O_FRAMING_EMPTY ? empty : chunked;
	f->nlen = framing == H2O_FRAMING_EMPTY ? 14 : 17;
	f->val = f->name + f->nlen;
	f->vlen = strlen(f->val);
	if (framing == H2O_FRAMING_EMPTY) {
		f->id = HTTP_F_CONTENT_LENGTH;
		m->content_length = 0;
	} else {
		f->id = HTTP_F_TRANSFER_ENCODING;
		m->chunked = m->has_te = true;
	}
}

static void
h2o_block_free(struct h2o_block *b)
{
	if (b == NULL)
		return;
	h2o_list_free(&b->l);
	free(b);
}

/* The worker's head the engine reads a stream's block through (judged,
 * or its trailers written, before anything else runs on the worker). */
static _Thread_local struct http_head h2o_head_tmp;

/* ---- nghttp2 callbacks ------------------------------------------------- */

static struct http_h2o_stream *
h2o_stream_of(nghttp2_session *ng, int32_t id)
{
	return nghttp2_session_get_stream_user_data(ng, id);
}

static void
h2o_notify(struct http_h2o_stream *st)
{
	st->notify = true;
}

static int
h2o_on_begin_headers(nghttp2_session *ng, const nghttp2_frame *fr,
    void *arg)
{
	struct http_h2o_stream *st = h2o_stream_of(ng, fr->hd.stream_id);

	(void)arg;
	if (st == NULL)
		return 0;
	st->got_bytes = true;
	if (st->blk == NULL && (st->blk = calloc(1, sizeof(*st->blk))) ==
	    NULL)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	st->blk->l.len = 0;
	st->blk->l.n = 0;
	st->blk->status = 0;
	st->blk->bad = NULL;
	st->blk_trailers = st->got_head;
	return 0;
}

static int
h2o_on_header(nghttp2_session *ng, const nghttp2_frame *fr,
    const uint8_t *name, size_t nlen, const uint8_t *val, size_t vlen,
    uint8_t flags, void *arg)
{
	struct http_h2o_stream *st = h2o_stream_of(ng, fr->hd.stream_id);
	const struct http_limits *lim;
	struct h2o_block *b;

	(void)flags;
	(void)arg;
	if (st == NULL || st->t == NULL || (b = st->blk) == NULL ||
	    b->bad != NULL)
		return 0;
	lim = &st->t->conn->pol->lim;
	if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
		if (vlen != 3 || val[0] < '1' || val[0] > '5' ||
		    val[1] < '0' || val[1] > '9' || val[2] < '0' ||
		    val[2] > '9')
			b->bad = "malformed :status";
		else
			b->status = (val[0] - '0') * 100 + (val[1] - '0') * 10 +
			    (val[2] - '0');
		return 0;
	}
	if (nlen != 0 && name[0] == ':') {
		b->bad = "unknown pseudo-header in a response";
		return 0;
	}
	if (b->l.n >= lim->max_header_lines || b->l.n >= HTTP_MAX_HEADERS) {
		b->bad = "response head over max-header-lines";
		return 0;
	}
	if (nlen + vlen + 4 > lim->max_line) {
		b->bad = "header line too long";
		return 0;
	}
	if (memchr(name, '_', nlen) != NULL &&
	    http_name_is_framing((const char *)name, nlen)) {
		b->bad = "'_' in a framing header name";
		return 0;
	}
	if (b->l.len + nlen + vlen + 4 > lim->max_header_bytes) {
		b->bad = "response head over max-header-bytes";
		return 0;
	}
	if (h2o_list_add(&b->l, (const char *)name, nlen,
	    (const char *)val, vlen, false) == -1)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	return 0;
}

/* A header block is whole; ended: its frame had END_STREAM. */
static void
h2o_block_done(struct http_h2o_stream *st, bool ended)
{
	struct h2o_block *b = st->blk;

	if (b == NULL || st->t == NULL)
		return;
	if (b->bad == NULL && !st->blk_trailers && b->status == 0)
		b->bad = "response without :status";
	st->blk = NULL;
	if (b->bad != NULL) {
		st->failed = true;
		st->error = NGHTTP2_PROTOCOL_ERROR;
		h2o_block_free(st->hblk);
		st->hblk = b;
	} else if (st->blk_trailers) {
		h2o_block_free(st->tblk);
		st->tblk = b;
	} else if (b->status < 200) {
		struct h2o_block **tail = &st->iblk;

		/* Interim (100, 103): passed on as they come, each one
		 * (RFC 9110 15.2), also several in one read; past
		 * H2O_INTERIM_MAX waiting the oldest is dropped. */
		if (st->niblk == H2O_INTERIM_MAX) {
			struct h2o_block *old = st->iblk;

			st->iblk = old->next;
			h2o_block_free(old);
			st->niblk--;
		}
		while (*tail != NULL)
			tail = &(*tail)->next;
		*tail = b;
		st->niblk++;
	} else {
		h2o_block_free(st->hblk);
		st->hblk = b;
		st->got_head = true;
		st->head_ready = true;
		st->head_ended = ended;
	}
	h2o_notify(st);
}

static int
h2o_on_frame_recv(nghttp2_session *ng, const nghttp2_frame *fr, void *arg)
{
	struct h2o_conn *c = arg;
	struct http_h2o_stream *st;

	if (fr->hd.type == NGHTTP2_GOAWAY) {
		c->goaway = true;
		return 0;
	}
	if (fr->hd.stream_id == 0 ||
	    (st = h2o_stream_of(ng, fr->hd.stream_id)) == NULL)
		return 0;
	st->got_bytes = true;
	if (fr->hd.type == NGHTTP2_HEADERS)
		h2o_block_done(st, fr->hd.flags & NGHTTP2_FLAG_END_STREAM);
	if ((fr->hd.type == NGHTTP2_HEADERS || fr->hd.type == NGHTTP2_DATA) &&
	    (fr->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
		st->ended = true;
		h2o_notify(st);
	}
	return 0;
}

static int
h2o_on_data(nghttp2_session *ng, uint8_t flags, int32_t id,
    const uint8_t *data, size_t len, void *arg)
{
	struct http_h2o_stream *st = h2o_stream_of(ng, id);

	(void)flags;
	(void)arg;
	if (st == NULL || st->t == NULL || !st->got_head) {
		/* Nobody takes them: the connection's window comes back. */
		nghttp2_session_consume(ng, id, len);
		return 0;
	}
	st->got_bytes = true;
	if (evbuffer_add(st->body, data, len) == -1)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	h2o_notify(st);
	return 0;
}

static int
h2o_on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code,
    void *arg)
{
	struct http_h2o_stream *st = h2o_stream_of(ng, id);

	(void)arg;
	if (st == NULL)
		return 0;
	st->closed = true;
	if (code != NGHTTP2_NO_ERROR && !(st->ended && st->req_done)) {
		st->failed = true;
		st->error = code;
		st->refused = code == NGHTTP2_REFUSED_STREAM;
		st->unprocessed = code == NGHTTP2_REFUSED_STREAM;
	}
	h2o_notify(st);
	return 0;
}

static ssize_t
h2o_data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct http_h2o_stream *st = src->ptr;
	size_t n;

	(void)arg;
	if (st == NULL)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	n = evbuffer_get_length(st->req);
	if (n > len)
		n = len;
	if (n != 0) {
		evbuffer_remove(st->req, buf, n);
		st->req_sent += n;
		if (st->replay != NULL && (st->got_bytes ||
		    st->req_sent > st->replay_max ||
		    evbuffer_add(st->replay, buf, n) == -1)) {
			evbuffer_free(st->replay);
			st->replay = NULL;
		}
		h2o_notify(st);	/* room: more of the client's body */
	}
	if (evbuffer_get_length(st->req) == 0 && st->req_end) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		st->req_done = true;
		if (st->tl != NULL && nghttp2_submit_trailer(ng, id,
		    st->tl->nv, st->tl->nnv) == 0)
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
		h2o_notify(st);
		return (ssize_t)n;
	}
	if (n == 0) {
		st->req_deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	return (ssize_t)n;
}

void
http_h2o_callbacks(nghttp2_session_callbacks *cb)
{
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb,
	    h2o_on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, h2o_on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb,
	    h2o_on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
	    h2o_on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
	    h2o_on_stream_close);
}

/* ---- streams ----------------------------------------------------------- */

static void
h2o_stream_free(struct http_h2o_stream *st)
{
	h2o_block_free(st->blk);
	h2o_block_free(st->hblk);
	h2o_block_free(st->tblk);
	while (st->iblk != NULL) {
		struct h2o_block *b = st->iblk;

		st->iblk = b->next;
		h2o_block_free(b);
	}
	h2o_block_free(st->ipassed);
	if (st->tl != NULL)
		h2o_list_free(st->tl);
	free(st->tl);
	if (st->req != NULL)
		evbuffer_free(st->req);
	if (st->replay != NULL)
		evbuffer_free(st->replay);
	if (st->body != NULL)
		evbuffer_free(st->body);
	free(st);
}

/* The request on a stream of conn c. 0, or -1. */
static int
h2o_submit(struct http_txn *t, struct http_h2o_stream *st,
    struct h2o_conn *c)
{
	struct http_state *h = t->conn;

	nghttp2_data_provider dp = { .source.ptr = st,
	    .read_callback = h2o_data_read };

	st->conn = c;
	/* nghttp2 copies the list: the transaction's serves each try. */
	st->id = nghttp2_submit_request(c->ng, NULL, t->h2o_req->l.nv,
	    t->h2o_req->l.nnv,
	    st->req_body ? &dp : NULL, st);
	if (st->id < 0) {
		st->conn = NULL;
		return -1;
	}
	if (!st->req_body)
		st->req_done = true;
	TAILQ_INSERT_TAIL(&c->streams, st, link);
	c->nstreams++;
	evtimer_del(c->idle);
	px_session_count(h->s, HTTP_C_H2_SERVER_STREAMS, 1);
	http_h2o_conn_flush(c);
	return 0;
}

static int
h2o_dispatch(struct http_txn *t, const struct sockaddr *dst, bool fresh)
{
	struct http_state *h = t->conn;
	struct http_h2o_stream *st;
	struct h2o_conn *c;
	bool reused;

	if ((st = calloc(1, sizeof(*st))) == NULL)
		return -1;
	st->t = t;
	st->req_body = t->req_body != HTTP_BODY_NONE;
	st->replay_max = h->buffer;
	if ((st->req = evbuffer_new()) == NULL ||
	    (st->req_body && (st->replay = evbuffer_new()) == NULL) ||
	    (st->body = evbuffer_new()) == NULL ||
	    t->h2o_req == NULL || t->h2o_req->l.failed ||
	    (c = http_h2o_conn_pick(t, dst, fresh, &reused)) == NULL ||
	    h2o_submit(t, st, c) == -1) {
		h2o_stream_free(st);
		return -1;
	}
	t->h2o = st;
	t->srv_h2 = true;
	memcpy(&t->srv.dst, dst, px_sockaddr_len(dst));
	t->srv.reused = reused;
	t->srv.kept = false;
	t->srv.keep = false;
	px_session_set_server(h->s, dst);
	return 0;
}

int
http_h2o_dispatch(struct http_txn *t, const struct sockaddr *dst)
{
	/* A request's own HTTP/1.1 connection, kept from a request before,
	 * is not the way this one goes. */
	if (t->srv.io != NULL)
		http_server_drop(t, true);
	http_h2o_drop(t);	/* (none: each ends with its transaction) */
	return h2o_dispatch(t, dst, false);
}

bool
http_h2o_ready(const struct http_txn *t)
{
	return t->h2o == NULL || (t->h2o->conn != NULL &&
	    t->h2o->conn->ready);
}

struct evbuffer *
http_h2o_req_buf(struct http_txn *t)
{
	return t->h2o->req;
}

void
http_h2o_req_more(struct http_txn *t)
{
	struct http_h2o_stream *st = t->h2o;

	if (st == NULL || st->conn == NULL || st->req_done)
		return;
	if (t->req == HTTP_REQ_DONE && !http_scan_holding(t, PX_TO_SERVER))
		st->req_end = true;
	if (st->req_deferred && (st->req_end ||
	    evbuffer_get_length(st->req) != 0)) {
		st->req_deferred = false;
		(void)nghttp2_session_resume_data(st->conn->ng, st->id);
	}
	if (st->conn->busy == 0)
		http_h2o_conn_flush(st->conn);
}

bool
http_h2o_request_sent(const struct http_txn *t)
{
	const struct http_h2o_stream *st = t->h2o;

	return st == NULL || st->req_done || st->closed;
}

/* Moves response DATA to the client: chunked (no length, HTTP/1.1
 * client), by length, or as it comes (HTTP/1.0: the close ends it). */
static void
h2o_pump_response(struct http_txn *t, struct http_h2o_stream *st)
{
	struct http_state *h = t->conn;
	struct evbuffer *cout = http_client_out(t);
	struct evbuffer *to = http_scan_to(t, PX_TO_CLIENT, cout);
	size_t taken = 0;

	while (t->resp == HTTP_RESP_BODY) {
		size_t avail = evbuffer_get_length(st->body), room, n;
		size_t queued = evbuffer_get_length(cout) +
		    http_scan_queued(t, PX_TO_CLIENT);

		if (avail == 0)
			break;
		if (queued >= h->buffer)
			break;
		room = h->buffer - queued;
		n = avail < room ? avail : room;
		if (t->resp_body == HTTP_BODY_LENGTH) {
			if (n > t->resp_left) {
				t->verdict = "error";
				px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
				http_client(t)->reset(t, "error: h2 response "
				    "body over its content-length");
				return;
			}
			t->resp_left -= n;
		}
		if (http_scan_feed(t, PX_TO_CLIENT, st->body, n) == -1)
			return;
		http_client(t)->data(t, st->body, n, to);
		taken += n;
		h->progress++;
		t->resp_bytes += n;
		px_session_account(h->s, PX_TO_CLIENT, n);
	}
	if (taken != 0 && st->conn != NULL && !st->conn->dead) {
		(void)nghttp2_session_consume(st->conn->ng, st->id, taken);
		/* The window goes back now: a client draining its output
		 * is the only event a stalled stream may see. */
		if (st->conn->busy == 0)
			http_h2o_conn_flush(st->conn);
	}
	if (t->resp == HTTP_RESP_BODY && st->ended &&
	    evbuffer_get_length(st->body) == 0) {
		size_t before = evbuffer_get_length(to);

		if (t->resp_body == HTTP_BODY_LENGTH && t->resp_left != 0) {
			t->verdict = "error";
			px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
			http_client(t)->reset(t, "error: h2 response body "
			    "shorter than its content-length");
			return;
		}
		if (st->tblk != NULL)
			h2o_block_head(st->tblk, &h2o_head_tmp,
			    H2O_FRAMING_AS_IS);
		http_client(t)->end(t, st->tblk != NULL ? &h2o_head_tmp :
		    NULL, to);
		t->resp_bytes += evbuffer_get_length(to) - before;
		px_session_account(h->s, PX_TO_CLIENT,
		    evbuffer_get_length(to) - before);
		t->resp = HTTP_RESP_DONE;
		h->progress++;
	}
	http_scan_release(t, PX_TO_CLIENT, cout);
	px_session_active(h->s);
}

void
http_h2o_input(struct http_txn *t)
{
	struct http_state *h = t->conn;
	struct http_h2o_stream *st = t->h2o;
	enum h2o_framing framing;
	char why[160];

	if (st == NULL || http_scan_pending(t, PX_TO_SERVER))
		return;
	while (t->resp == HTTP_RESP_HEAD && st->iblk != NULL) {
		/* 101 cannot come over h2 (nghttp2 refuses it). Passed on:
		 * kept while the head written from it may point into it. */
		h2o_block_free(st->ipassed);
		st->ipassed = st->iblk;
		st->iblk = st->ipassed->next;
		st->niblk--;
		h->progress++;
		h2o_block_head(st->ipassed, &h2o_head_tmp, H2O_FRAMING_AS_IS);
		if (!http_judge_response(t, &h2o_head_tmp, NULL, 0))
			return;
		if (h->gone || h->closing || t->h2o != st)
			return;
	}
	if (t->resp == HTTP_RESP_HEAD && st->head_ready) {
		st->head_ready = false;
		h->progress++;
		/* An HTTP/1.0 client gets a body without length by the
		 * close; no framing is said where no body may be (RFC
		 * 9110 8.6, RFC 9112 6.1: never Transfer-Encoding on a
		 * 204), whether or not the head ended the stream. */
		framing = h->client_10 ? H2O_FRAMING_AS_IS :
		    H2O_FRAMING_CHUNKED;
		if (t->is_head || st->hblk->status == 204 ||
		    st->hblk->status == 304)
			framing = H2O_FRAMING_AS_IS;
		else if (st->head_ended)
			framing = H2O_FRAMING_EMPTY;
		h2o_block_head(st->hblk, &h2o_head_tmp, framing);
		if (!http_judge_response(t, &h2o_head_tmp, NULL, 0))
			return;
	}
	if (h->gone || h->closing || t->h2o != st)
		return;
	if (t->resp == HTTP_RESP_BODY)
		h2o_pump_response(t, st);
	if (h->gone || h->closing || t->h2o != st)
		return;
	if (t->resp == HTTP_RESP_HEAD && st->failed) {
		struct sockaddr_storage dst;

		/* Never answered, replayable: once more, on a new
		 * connection (as the HTTP/1.1 pool's retry). */
		/* Unprocessed, it may go more than once: a server over its
		 * concurrent streams refuses those past them, and a stream
		 * sent before its SETTINGS came may meet that again. */
		if ((!t->retried && st->refused && t->replayable) ||
		    (st->unprocessed && st->refusals < H2O_REFUSALS &&
		    (st->req_sent == 0 || st->replay != NULL))) {
			struct http_h2o_stream *nst;

			memcpy(&dst, &t->srv.dst, sizeof(dst));
			/* The old stream's body queue and trailers go to the
			 * new one. */
			t->h2o = NULL;
			st->t = NULL;
			http_h2o_stream_detach(st);
			if (!st->unprocessed)
				t->retried = true;
			px_session_count(h->s, HTTP_C_RETRIED, 1);
			/* A connection that died: a fresh one (its siblings
			 * may be gone too). A stream refused: any with a free
			 * slot, within server-pool (a server over its
			 * concurrent streams refuses those past them). */
			if (h2o_dispatch(t, (struct sockaddr *)&dst,
			    !st->unprocessed) == -1) {
				h2o_stream_free(st);
				http_error(t, 502, "cannot connect to the server");
				return;
			}
			nst = t->h2o;
			nst->refusals = st->refusals + st->unprocessed;
			if (st->replay != NULL)
				evbuffer_add_buffer(nst->req, st->replay);
			evbuffer_add_buffer(nst->req, st->req);
			nst->tl = st->tl;
			st->tl = NULL;
			h2o_stream_free(st);
			http_h2o_req_more(t);
			return;
		}
		px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
		if (st->hblk != NULL && st->hblk->bad != NULL) {
			px_session_log(h->s, LOG_NOTICE, "http-bad-response "
			    "reason=\"%s\"", st->hblk->bad);
			http_error(t, 502, st->hblk->bad);
			return;
		}
		if (st->error == NGHTTP2_CONNECT_ERROR)
			snprintf(why, sizeof(why), "server connection failed: "
			    "%s", st->conn != NULL && st->conn->why[0] != '\0' ?
			    st->conn->why : "closed");
		else
			snprintf(why, sizeof(why), "server reset the stream "
			    "(%s)", nghttp2_http2_strerror(st->error));
		http_error(t, 502, why);
		return;
	}
	if (t->resp == HTTP_RESP_BODY && st->failed) {
		snprintf(why, sizeof(why), "server-reset: %s",
		    nghttp2_http2_strerror(st->error));
		t->verdict = "reset";
		px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
		px_session_log(h->s, LOG_NOTICE, "http-server-reset stream=%d "
		    "code=%s (inside the response)", st->id,
		    nghttp2_http2_strerror(st->error));
		/* An HTTP/2 client sees the server's code (a gRPC server
		 * cancelling: CANCEL), not INTERNAL_ERROR. */
		http_txn_cut(t, PX_END_SERVER_FAIL, st->error, why);
		return;
	}
	/* Full duplex: the transaction is over once both ways are; a
	 * request whose rest the server does not take (its window shut)
	 * has request-timeout at a time to go (http_h2o_timer). */
	if (t->resp != HTTP_RESP_DONE ||
	    http_scan_hold(t, PX_TO_CLIENT, http_client_out(t)))
		return;
	if (http_h2o_request_sent(t))
		http_response_complete(t);
	else if (!st->waiting) {
		st->waiting = true;
		st->wait_sent = st->req_sent;
		http_txn_timer(t, http_grpc_bound(t,
		    h->pol->request_timeout_ms));
	}
}

bool
http_h2o_timer(struct http_txn *t)
{
	struct http_state *h = t->conn;
	struct http_h2o_stream *st = t->h2o;

	if (st == NULL || !st->waiting || t->resp != HTTP_RESP_DONE ||
	    http_grpc_expired(t))
		return false;
	if (st->req_sent != st->wait_sent) {
		st->wait_sent = st->req_sent;
		http_txn_timer(t, http_grpc_bound(t,
		    h->pol->request_timeout_ms));
		return true;
	}
	px_session_count(h->s, HTTP_C_TIMEOUTS, 1);
	/* The stream is reset (CANCEL) as the transaction leaves it. */
	http_response_complete(t);
	if (!h->gone)
		http_txn_drive(t);
	return true;
}

void
http_h2o_drop(struct http_txn *t)
{
	struct http_h2o_stream *st = t->h2o;

	if (st == NULL)
		return;
	t->h2o = NULL;
	st->t = NULL;
	http_h2o_stream_detach(st);
	h2o_stream_free(st);
}
