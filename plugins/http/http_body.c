/* Message bodies as they stream: Content-Length and chunked (framing
 * parsed, re-sent canonical; trailers parsed whole), each direction up to
 * `buffer`, a scanned one through http_scan's hold; a response's bytes
 * (its chunks apart) and its trailers through the client's writer
 * (http_client, http_txn.c). A request body to an HTTP/2 server goes
 * without its chunked framing (its trailers apart) to the stream's queue
 * (http_h2_origin.c), which pumps the response side itself. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <syslog.h>
#include <event2/buffer.h>
#include <event2/dns.h>
#include "conn.h"
#include "http_h2_origin.h"
#include "http_head.h"
#include "http_int.h"
#include "parse.h"

/* A bad chunked body: a request is refused (400; the server connection,
 * which has part of the body, is closed with it), a response cut off. */
static void
http_chunked_bad(struct http_txn *t, bool request, const char *why)
{
	struct http_state *h = t->conn;

	if (request) {
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		t->req = HTTP_REQ_DONE;
		http_error(t, 400, why);
		return;
	}
	px_session_count(h->s, HTTP_C_BAD_RESPONSE, 1);
	px_session_log(h->s, LOG_NOTICE, "http-bad-response reason=\"%s\"", why);
	t->verdict = "error";
	http_client(t)->reset(t, "error: malformed chunked response");
}

/* One step of a chunked body from in to out (NULL: dechunked, only the
 * data goes on), at most about room bytes: data moves as it is, framing
 * is parsed and its canonical form sent in its place (http_chunk_feed's
 * step mode), the trailer section is parsed whole and sent as
 * http_head_trailers writes it. 1 when it moved something, 0 when it
 * needs more input, -1 when the transaction ended (refused). */
static int
http_pump_chunked(struct http_txn *t, bool request, struct evbuffer *in,
    struct evbuffer *out, size_t room)
{
	struct http_state *h = t->conn;
	static _Thread_local struct http_head tr;
	static _Thread_local char detail[96];
	struct http_chunk *c = request ? &t->req_chunk : &t->resp_chunk;
	enum px_dir dir = request ? PX_TO_SERVER : PX_TO_CLIENT;
	/* out NULL: the data alone goes on (to an HTTP/1.0 client, or as
	 * an HTTP/2 server's DATA). */
	struct evbuffer *to = out != NULL ? out : request ?
	    http_scan_to(t, PX_TO_SERVER, http_h2o_req_buf(t)) :
	    http_scan_to(t, PX_TO_CLIENT, http_client_out(t));
	const struct http_limits *lim = &h->pol->lim;
	enum http_chunk_state st = c->state;
	struct evbuffer_iovec v;
	size_t len = evbuffer_get_length(in), before = evbuffer_get_length(to);
	size_t n;
	const char *why, *buf;
	ssize_t k;

	if (st == HTTP_CHUNK_TRAILER) {
		n = len < lim->max_header_bytes + 1 ? len :
		    lim->max_header_bytes + 1;
		if ((buf = (const char *)evbuffer_pullup(in, (ssize_t)n)) == NULL)
			k = -1, why = "out of memory";
		else
			k = http_parse_trailers(buf, n, lim, &tr, &why);
		if (k == 0)
			return 0;
		if (k < 0) {
			snprintf(detail, sizeof(detail), "malformed trailer "
			    "section: %s", why);
			http_chunked_bad(t, request, detail);
			return -1;
		}
		if (!request)
			http_client(t)->end(t, &tr, out);
		else if (out != NULL)
			http_head_trailers(out, &tr, h->pol, true);
		else
			http_h2o_req_trailers(t, &tr);
		evbuffer_drain(in, (size_t)k);
		c->state = HTTP_CHUNK_DONE;
	} else {
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			return 0;
		n = v.iov_len < room ? v.iov_len : room;
		if ((k = http_chunk_feed(c, v.iov_base, n, lim, &why)) < 0) {
			http_chunked_bad(t, request, why);
			return -1;
		}
		if (request && h->pol->max_body != 0 &&
		    c->body > h->pol->max_body) {
			px_session_count(h->s, HTTP_C_DENIED, 1);
			t->req = HTTP_REQ_DONE;
			http_error(t, 413, "request body over max-body");
			return -1;
		}
		if (st == HTTP_CHUNK_DATA) {
			if (http_scan_feed(t, dir, in, (size_t)k) == -1)
				return -1;
			evbuffer_remove_buffer(in, to, (size_t)k);
		} else {
			evbuffer_drain(in, (size_t)k);
			if (out != NULL)
				evbuffer_add(out, c->out, c->outlen);
		}
	}
	h->progress++;
	n = evbuffer_get_length(to) - before;
	if (request) {
		t->req_bytes += n;
		px_session_account(h->s, PX_TO_SERVER, n);
		if (c->state == HTTP_CHUNK_DONE)
			t->req = HTTP_REQ_DONE;
	} else {
		t->resp_bytes += n;
		px_session_account(h->s, PX_TO_CLIENT, n);
		if (c->state == HTTP_CHUNK_DONE)
			t->resp = HTTP_RESP_DONE;
	}
	return 1;
}

/* Moves request body bytes from the client to the server, up to the
 * server output's limit. */
void
http_pump_request(struct http_txn *t)
{
	struct http_state *h = t->conn;
	struct evbuffer *cin = http_client_in(t);
	struct evbuffer *sout, *to;

	if (t->req != HTTP_REQ_BODY || (t->srv.io == NULL && t->h2o == NULL) ||
	    !http_h2o_ready(t))
		return;
	sout = t->h2o != NULL ? http_h2o_req_buf(t) : t->srv.io->out;
	to = http_scan_to(t, PX_TO_SERVER, sout);
	while (t->req == HTTP_REQ_BODY) {
		size_t avail = evbuffer_get_length(cin), room, n;
		size_t queued = evbuffer_get_length(sout) +
		    http_scan_queued(t, PX_TO_SERVER);

		if (avail == 0 || queued >= h->buffer)
			break;
		room = h->buffer - queued;
		if (t->req_body == HTTP_BODY_LENGTH) {
			n = avail < room ? avail : room;
			if (n > t->req_left)
				n = (size_t)t->req_left;
			t->req_left -= n;
			if (t->req_left == 0)
				t->req = HTTP_REQ_DONE;
		} else {
			int r = http_pump_chunked(t, true, cin,
			    t->h2o != NULL ? NULL : to, room);

			if (r < 0)
				return;
			if (r == 0)
				break;
			continue;
		}
		if (http_scan_feed(t, PX_TO_SERVER, cin, n) == -1)
			return;
		evbuffer_remove_buffer(cin, to, n);
		h->progress++;
		t->req_bytes += n;
		px_session_account(h->s, PX_TO_SERVER, n);
	}
	http_scan_release(t, PX_TO_SERVER, sout);
	/* The request's end waits for its verdict in the hold. */
	if (t->req == HTTP_REQ_DONE)
		(void)http_scan_hold(t, PX_TO_SERVER, sout);
	if (t->h2o != NULL)
		http_h2o_req_more(t);
	px_session_active(h->s);
}

/* Moves response body bytes to the client, up to its output's limit. */
void
http_pump_response(struct http_txn *t)
{
	struct http_state *h = t->conn;
	struct evbuffer *sin = t->srv.io->in;
	struct evbuffer *cout = http_client_out(t);
	struct evbuffer *to = http_scan_to(t, PX_TO_CLIENT, cout);

	while (t->resp == HTTP_RESP_BODY) {
		size_t avail = evbuffer_get_length(sin), room, n;
		size_t queued = evbuffer_get_length(cout) +
		    http_scan_queued(t, PX_TO_CLIENT);

		if (avail == 0 || queued >= h->buffer)
			break;
		room = h->buffer - queued;
		n = avail < room ? avail : room;
		if (t->resp_body == HTTP_BODY_LENGTH) {
			if (n > t->resp_left)
				n = (size_t)t->resp_left;
			t->resp_left -= n;
			if (t->resp_left == 0)
				t->resp = HTTP_RESP_DONE;
		} else if (t->resp_body == HTTP_BODY_CHUNKED) {
			/* Dechunked for an HTTP/1.0 client and for an
			 * HTTP/2 stream (DATA frame the data alone). */
			int r = http_pump_chunked(t, false, sin, t->dechunk ||
			    t->h2w != NULL ? NULL : to, room);

			if (r < 0)
				return;
			if (r == 0)
				break;
			continue;
		}
		if (http_scan_feed(t, PX_TO_CLIENT, sin, n) == -1)
			return;
		http_client(t)->data(t, sin, n, to);
		h->progress++;
		t->resp_bytes += n;
		px_session_account(h->s, PX_TO_CLIENT, n);
	}
	http_scan_release(t, PX_TO_CLIENT, cout);
	px_session_active(h->s);
}
