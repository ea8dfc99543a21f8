/* Unit tests for plugins/http/http_h2_txn.c: the HTTP/2 stream's response
 * writer driven against an nghttp2 client session in memory (no socket):
 * what the client receives, frame by frame, for a server's response, an
 * interim one, trailers, proxyd's own trailers-only reply, a HEAD, a
 * CONNECT's 200, a reset, a body held by the client's window or by a
 * scan, and a writer freed or told its stream closed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <nghttp2/nghttp2.h>

#include "http/http_h2_txn.h"
#include "http/http_int.h"

static const struct http_limits lim = {
	.max_line = 1024, .max_header_lines = 32, .max_header_bytes = 4096,
	.max_url = 512,
};

/* A client and proxyd's server session, and what the client saw. */
struct pair {
	nghttp2_session	*cli, *srv;
	int32_t		 id;
	char		 log[4096];	/* frames and fields, in order */
	size_t		 len;
	struct http_h2w	 w;
	struct http_head m;
	struct http_policy p;
	unsigned	 wakes;		/* the writer asked to be sent */
};

static void
woken(void *arg)
{
	struct pair *x = arg;

	x->wakes++;
}

static void say(struct pair *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
say(struct pair *x, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(x->log + x->len, sizeof(x->log) - x->len, fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < sizeof(x->log) - x->len);
	x->len += (size_t)n;
}

static int
on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct pair *x = ud;
	bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

	(void)s;
	if (f->hd.stream_id == 0)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS)
		say(x, "HEADERS%s\n", end ? " end" : "");
	else if (f->hd.type == NGHTTP2_DATA)
		say(x, "DATA %zu%s\n", f->hd.length, end ? " end" : "");
	else if (f->hd.type == NGHTTP2_RST_STREAM)
		say(x, "RST %u\n", f->rst_stream.error_code);
	return 0;
}

static int
on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
    size_t nlen, const uint8_t *val, size_t vlen, uint8_t flags, void *ud)
{
	(void)s, (void)f, (void)flags;
	say(ud, " %.*s: %.*s\n", (int)nlen, name, (int)vlen, val);
	return 0;
}

static int
on_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d,
    size_t len, void *ud)
{
	(void)s, (void)flags, (void)id;
	say(ud, " [%.*s]\n", (int)len, d);
	return 0;
}

/* Both ways until neither has anything to send (bounded). */
static void
pump(struct pair *x)
{
	const uint8_t *d;
	ssize_t n, k;
	int i;

	for (i = 0; i < 64; i++) {
		bool moved = false;

		while ((n = nghttp2_session_mem_send(x->cli, &d)) > 0) {
			k = nghttp2_session_mem_recv(x->srv, d, (size_t)n);
			assert_int_equal(k, n);
			moved = true;
		}
		assert_true(n == 0);
		while ((n = nghttp2_session_mem_send(x->srv, &d)) > 0) {
			k = nghttp2_session_mem_recv(x->cli, d, (size_t)n);
			assert_int_equal(k, n);
			moved = true;
		}
		assert_true(n == 0);
		if (!moved)
			return;
	}
	fail_msg("pump: no end");
}

/* The next client passes on what it receives unchecked. */
static bool raw_client;

/* A client whose first request is method (window: its stream's initial
 * window, 0 for the default), and proxyd's writer on its stream. */
static void
open_pair(struct pair *x, const char *method, uint32_t window)
{
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	nghttp2_settings_entry set = { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
	    window };
	nghttp2_nv get[] = {
		{ (uint8_t *)":method", (uint8_t *)(uintptr_t)method, 7,
		    strlen(method), 0 },
		{ (uint8_t *)":scheme", (uint8_t *)"https", 7, 5, 0 },
		{ (uint8_t *)":authority", (uint8_t *)"a.test", 10, 6, 0 },
		{ (uint8_t *)":path", (uint8_t *)"/", 5, 1, 0 },
	};
	nghttp2_nv con[] = {
		{ (uint8_t *)":method", (uint8_t *)"CONNECT", 7, 7, 0 },
		{ (uint8_t *)":authority", (uint8_t *)"a.test:443", 10, 10, 0 },
	};
	bool connect = strcmp(method, "CONNECT") == 0;

	memset(x, 0, sizeof(*x));
	x->p.keepalive_client = x->p.keepalive_server = true;
	x->p.xff = HTTP_XFF_NO;
	assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
	    on_chunk);
	assert_int_equal(nghttp2_option_new(&opt), 0);
	nghttp2_option_set_no_auto_window_update(opt, 1);
	/* What was sent as it is, not what nghttp2 would make of it. */
	nghttp2_option_set_no_http_messaging(opt, raw_client);
	assert_int_equal(nghttp2_session_client_new2(&x->cli, cb, x, opt), 0);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
	assert_int_equal(nghttp2_session_server_new(&x->srv, cb, x), 0);
	nghttp2_session_callbacks_del(cb);
	/* A server's first frame is its SETTINGS (http_h2.c sends its own). */
	assert_int_equal(nghttp2_submit_settings(x->srv, NGHTTP2_FLAG_NONE,
	    NULL, 0), 0);
	assert_int_equal(nghttp2_submit_settings(x->cli, NGHTTP2_FLAG_NONE,
	    &set, window != 0 ? 1 : 0), 0);
	x->id = connect ?
	    nghttp2_submit_request(x->cli, NULL, con, 2, NULL, NULL) :
	    nghttp2_submit_request(x->cli, NULL, get, 4, NULL, NULL);
	assert_int_equal(x->id, 1);
	pump(x);
	assert_int_equal(http_h2w_init(&x->w, x->srv, x->id,
	    strcmp(method, "HEAD") == 0, connect), 0);
	x->w.wake = woken;
	x->w.wake_arg = x;
}

static void
close_pair(struct pair *x)
{
	http_h2w_free(&x->w);
	nghttp2_session_del(x->cli);
	nghttp2_session_del(x->srv);
}

/* The response head s (a server's, or proxyd's own) written. */
static void
head(struct pair *x, const char *s, bool own)
{
	struct http_resp_ctx rs = { .client_keep = true, .own = own };
	size_t scanned = 0;
	ssize_t end = http_head_end(s, strlen(s), lim.max_header_bytes,
	    &scanned);
	const char *why = NULL;

	assert_true(end > 0);
	assert_int_equal(http_parse_head(s, (size_t)end, false, &lim, &x->m,
	    &why), 0);
	assert_int_equal(http_h2w_head(&x->w, &x->m, &x->p, &rs), 0);
}

static void
body(struct pair *x, const char *s)
{
	struct evbuffer *src = evbuffer_new();

	assert_non_null(src);
	evbuffer_add(src, s, strlen(s));
	http_h2w_data(&x->w, src, strlen(s), x->w.buf);
	assert_int_equal(evbuffer_get_length(src), 0);
	evbuffer_free(src);
}

static void
expect(struct pair *x, const char *want)
{
	if (strcmp(x->log, want) != 0)
		fail_msg("got:\n%s\nwanted:\n%s", x->log, want);
	x->len = 0;
	x->log[0] = '\0';
}

/* A stream's transaction (as test_grpc_reply makes it). */
static void
txn_on(struct pair *x, struct http_state *h, struct http_txn *t)
{
	memset(h, 0, sizeof(*h));
	memset(t, 0, sizeof(*t));
	h->pol = &x->p;
	t->conn = h;
	t->h2w = &x->w;
	t->eng = &http_engine_h2;
}

/* The response head s through the transaction's writer. */
static void
txn_head(struct pair *x, struct http_txn *t, const char *s, bool own)
{
	struct http_resp_ctx rs = { .client_keep = true, .own = own };
	size_t scanned = 0;
	ssize_t end = http_head_end(s, strlen(s), lim.max_header_bytes,
	    &scanned);
	const char *why = NULL;

	assert_true(end > 0);
	assert_int_equal(http_parse_head(s, (size_t)end, false, &lim, &x->m,
	    &why), 0);
	http_client_h2.head(t, &x->m, &rs, http_client_out(t));
}

/* A length body moved into the buffer by another (an HTTP/1.1 server's,
 * http_body.c) goes as DATA, its last byte with END_STREAM; field names
 * lower-cased, the hop-by-hop ones dropped. */
static void
test_length(void **state)
{
	struct pair x;

	(void)state;
	open_pair(&x, "GET", 0);
	head(&x, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
	    "Content-Length: 10\r\nConnection: keep-alive\r\nX-A: b\r\n\r\n",
	    false);
	pump(&x);
	expect(&x, " :status: 200\n content-type: text/plain\n"
	    " content-length: 10\n x-a: b\nHEADERS\n");
	assert_int_equal(x.wakes, 1);
	evbuffer_add(x.w.buf, "hello", 5);
	/* The deferred DATA woken: its owner is asked to send. */
	assert_int_equal(x.wakes, 2);
	pump(&x);
	expect(&x, " [hello]\nDATA 5\n");
	evbuffer_add(x.w.buf, "world", 5);
	pump(&x);
	expect(&x, " [world]\nDATA 5 end\n");
	assert_true(x.w.done);
	close_pair(&x);
}

/* An interim head, then a body of unknown length through data, ended
 * with trailers (trailers="pass"): a trailing HEADERS ends the stream. */
static void
test_interim_trailers(void **state)
{
	struct pair x;
	struct http_head tr;
	const char *t = "Grpc-Status: 0\r\nGrpc-Message: ok\r\n\r\n";
	const char *why = NULL;

	(void)state;
	open_pair(&x, "GET", 0);
	x.p.trailers_pass = true;
	head(&x, "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n", false);
	head(&x, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
	    false);
	body(&x, "abc");
	pump(&x);
	expect(&x, " :status: 103\n link: </s.css>\nHEADERS\n"
	    " :status: 200\nHEADERS\n [abc]\nDATA 3\n");
	body(&x, "de");
	assert_int_equal(http_parse_trailers(t, strlen(t), &lim, &tr, &why),
	    (ssize_t)strlen(t));
	assert_int_equal(http_h2w_end(&x.w, &tr, &x.p), 0);
	pump(&x);
	expect(&x, " [de]\nDATA 2\n grpc-status: 0\n grpc-message: ok\n"
	    "HEADERS end\n");
	close_pair(&x);
}

/* A body of unknown length ended without trailers: END_STREAM on an
 * empty DATA once the buffer is empty. */
static void
test_end_no_trailers(void **state)
{
	struct pair x;

	(void)state;
	open_pair(&x, "GET", 0);
	head(&x, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
	    false);
	pump(&x);
	expect(&x, " :status: 200\nHEADERS\n");
	assert_int_equal(http_h2w_end(&x.w, NULL, &x.p), 0);
	pump(&x);
	expect(&x, "DATA 0 end\n");
	close_pair(&x);
}

/* proxyd's own gRPC trailers-only reply (length 0) is one HEADERS with
 * END_STREAM; a HEAD's response too, whatever its length says. */
static void
test_one_frame(void **state)
{
	struct pair x;

	(void)state;
	open_pair(&x, "POST", 0);
	head(&x, "HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\n"
	    "Grpc-Status: 14\r\nGrpc-Message: no server\r\n"
	    "Content-Length: 0\r\n\r\n", true);
	assert_int_equal(http_h2w_end(&x.w, NULL, &x.p), 0);
	pump(&x);
	expect(&x, " :status: 200\n content-type: application/grpc\n"
	    " grpc-status: 14\n grpc-message: no server\n"
	    " content-length: 0\nHEADERS end\n");
	close_pair(&x);
	open_pair(&x, "HEAD", 0);
	head(&x, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", false);
	body(&x, "ignored");
	pump(&x);
	expect(&x, " :status: 200\n content-length: 10\nHEADERS end\n");
	close_pair(&x);
}

/* The same reply as proxyd makes it (http_grpc_reply, through the
 * transaction's writer, http_client_h2): one HEADERS with END_STREAM,
 * without its HTTP/1.1 Connection field. */
static void
test_grpc_reply(void **state)
{
	static struct http_state h;
	static struct http_txn t;
	struct pair x;

	(void)state;
	open_pair(&x, "POST", 0);
	memset(&h, 0, sizeof(h));
	memset(&t, 0, sizeof(t));
	h.pol = &x.p;
	t.conn = &h;
	t.h2w = &x.w;
	t.eng = &http_engine_h2;
	assert_ptr_equal(http_client(&t), &http_client_h2);
	assert_ptr_equal(http_client_out(&t), x.w.buf);
	http_grpc_reply(&t, http_client_out(&t), 503, "no server: 100%",
	    true);
	assert_int_equal(t.grpc_status, 14);
	pump(&x);
	expect(&x, " :status: 200\n content-type: application/grpc\n"
	    " grpc-status: 14\n grpc-message: no server: 100%25\n"
	    " content-length: 0\n cache-control: no-store\nHEADERS end\n");
	close_pair(&x);
}

/* A CONNECT's 200 leaves the stream open: the tunnel's bytes follow. */
static void
test_connect(void **state)
{
	struct pair x;

	(void)state;
	open_pair(&x, "CONNECT", 0);
	head(&x, "HTTP/1.1 200 Connection established\r\n\r\n", true);
	pump(&x);
	expect(&x, " :status: 200\nHEADERS\n");
	body(&x, "raw");
	pump(&x);
	expect(&x, " [raw]\nDATA 3\n");
	assert_int_equal(nghttp2_session_get_stream_remote_close(x.cli, x.id),
	    0);
	close_pair(&x);
}

/* RFC 9110 9.3.6: no Content-Length in a 2xx to CONNECT (a server may
 * still say one): the tunnel has no length. */
static void
test_connect_no_length(void **state)
{
	struct pair x;

	(void)state;
	raw_client = true;
	open_pair(&x, "CONNECT", 0);
	raw_client = false;
	head(&x, "HTTP/1.1 200 Connection established\r\n"
	    "Content-Length: 0\r\n\r\n", false);
	pump(&x);
	expect(&x, " :status: 200\nHEADERS\n");
	close_pair(&x);
}

/* RFC 8441: an extended CONNECT's 101 (its server's answer to the
 * HTTP/1.1 Upgrade) is the stream's 200, without the Upgrade's fields;
 * a 2xx says the server did not upgrade: no status the client would
 * take for the tunnel. */
static void
test_ext_connect(void **state)
{
	struct http_resp_ctx rs = { .client_keep = true };
	const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
	size_t scanned = 0;
	const char *why = NULL;
	struct pair x;

	(void)state;
	raw_client = true;
	open_pair(&x, "CONNECT", 0);
	x.w.ext = true;
	head(&x, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Accept: abc=\r\n"
	    "X-Other: 1\r\n\r\n", false);
	pump(&x);
	expect(&x, " :status: 200\n x-other: 1\nHEADERS\n");
	assert_true(x.w.tunnel);
	body(&x, "ws");
	pump(&x);
	expect(&x, " [ws]\nDATA 2\n");
	close_pair(&x);

	open_pair(&x, "CONNECT", 0);
	raw_client = false;
	x.w.ext = true;
	assert_true(http_head_end(ok, strlen(ok), lim.max_header_bytes,
	    &scanned) > 0);
	assert_int_equal(http_parse_head(ok, strlen(ok), false, &lim, &x.m,
	    &why), 0);
	assert_int_equal(http_h2w_head(&x.w, &x.m, &x.p, &rs), -1);
	assert_false(x.w.submitted);
	close_pair(&x);
}

/* A tunnel whose TCP connection to the server fails: RST_STREAM with
 * CONNECT_ERROR (RFC 9113 8.5), not a generic INTERNAL_ERROR; a
 * CONNECT refused (its own body) is an ordinary response. */
static void
test_connect_error(void **state)
{
	static struct http_state h;
	static struct http_txn t;
	struct pair x;

	(void)state;
	open_pair(&x, "CONNECT", 0);
	txn_on(&x, &h, &t);
	txn_head(&x, &t, "HTTP/1.1 200 Connection established\r\n\r\n",
	    true);
	body(&x, "raw");
	pump(&x);
	expect(&x, " :status: 200\nHEADERS\n [raw]\nDATA 3\n");
	http_client_h2.reset(&t, "server-error: connection reset");
	pump(&x);
	expect(&x, "RST 10\n");
	close_pair(&x);
	open_pair(&x, "CONNECT", 0);
	txn_on(&x, &h, &t);
	txn_head(&x, &t, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 100"
	    "\r\n\r\n", false);
	body(&x, "part");
	pump(&x);
	expect(&x, " :status: 502\n content-length: 100\nHEADERS\n"
	    " [part]\nDATA 4\n");
	http_client_h2.reset(&t, "server-error: connection reset");
	pump(&x);
	expect(&x, "RST 2\n");
	close_pair(&x);
}

/* A server failing mid-body: RST_STREAM INTERNAL_ERROR, nothing after. */
static void
test_reset(void **state)
{
	struct pair x;

	(void)state;
	open_pair(&x, "GET", 0);
	head(&x, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", false);
	body(&x, "part");
	pump(&x);
	expect(&x, " :status: 200\n content-length: 100\nHEADERS\n"
	    " [part]\nDATA 4\n");
	x.wakes = 0;
	http_h2w_reset(&x.w, NGHTTP2_INTERNAL_ERROR);
	assert_int_equal(x.wakes, 1);
	body(&x, "more");
	pump(&x);
	expect(&x, "RST 2\n");
	close_pair(&x);
}

/* The client's window shut: the body stays in the buffer (what counts
 * against `buffer`) until the client makes room. */
static void
test_window(void **state)
{
	struct pair x;

	(void)state;
	open_pair(&x, "GET", 4);
	head(&x, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", false);
	body(&x, "0123456789");
	pump(&x);
	expect(&x, " :status: 200\n content-length: 10\nHEADERS\n"
	    " [0123]\nDATA 4\n");
	assert_int_equal(evbuffer_get_length(x.w.buf), 6);
	assert_int_equal(nghttp2_submit_window_update(x.cli,
	    NGHTTP2_FLAG_NONE, x.id, 6), 0);
	pump(&x);
	expect(&x, " [456789]\nDATA 6 end\n");
	assert_int_equal(evbuffer_get_length(x.w.buf), 0);
	close_pair(&x);
}

/* RFC 9110 8.6: no Content-Length in a 1xx or a 204, which an HTTP/1.1
 * server may still send: an HTTP/2 client takes such a head as malformed
 * and resets the stream (nghttp2 does), so the field does not go. */
static void
test_no_length_field(void **state)
{
	struct pair x;

	(void)state;
	open_pair(&x, "GET", 0);
	head(&x, "HTTP/1.1 103 Early Hints\r\nContent-Length: 0\r\n"
	    "Link: </s.css>\r\n\r\n", false);
	head(&x, "HTTP/1.1 204 No Content\r\nContent-Length: 12\r\n"
	    "X-A: b\r\n\r\n", false);
	pump(&x);
	expect(&x, " :status: 103\n link: </s.css>\nHEADERS\n"
	    " :status: 204\n x-a: b\nHEADERS end\n");
	close_pair(&x);
}

/* A response whose body a scan holds for its verdict (the writer is
 * given the scan's hold as out, http_scan_to): its end comes before the
 * body reaches the stream's buffer, and must not go ahead of it (the
 * client would take an empty body for the whole one); nor be lost when
 * the head is held too (the stream would never end); nor end proxyd's
 * own reply when the held response is refused. */
static void
test_held(void **state)
{
	static struct http_state h;
	static struct http_txn t;
	struct evbuffer *src = evbuffer_new(), *hold = evbuffer_new();
	struct pair x;

	(void)state;
	assert_non_null(src);
	assert_non_null(hold);
	/* The head went; the body and its end are held. */
	open_pair(&x, "GET", 0);
	txn_on(&x, &h, &t);
	t.scan[PX_TO_CLIENT].hold = hold;
	txn_head(&x, &t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	    "\r\n", false);
	evbuffer_add(src, "held", 4);
	http_client_h2.data(&t, src, 4, hold);
	http_client_h2.end(&t, NULL, hold);
	pump(&x);
	expect(&x, " :status: 200\nHEADERS\n");
	evbuffer_add_buffer(x.w.buf, hold);	/* the verdict: it goes */
	pump(&x);
	expect(&x, " [held]\nDATA 4 end\n");
	close_pair(&x);
	/* The head held too: the end comes first, then the head. */
	open_pair(&x, "GET", 0);
	txn_on(&x, &h, &t);
	t.scan[PX_TO_CLIENT].hold = hold;
	evbuffer_add(src, "held", 4);
	http_client_h2.data(&t, src, 4, hold);
	assert_int_equal(evbuffer_get_length(hold), 4);
	http_client_h2.end(&t, NULL, hold);
	txn_head(&x, &t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	    "\r\n", false);
	evbuffer_add_buffer(x.w.buf, hold);
	pump(&x);
	expect(&x, " :status: 200\nHEADERS\n [held]\nDATA 4 end\n");
	close_pair(&x);
	/* The held response refused: proxyd's page in its place is ended
	 * by its own end, not by the refused one's. */
	open_pair(&x, "GET", 0);
	txn_on(&x, &h, &t);
	t.scan[PX_TO_CLIENT].hold = hold;
	evbuffer_add(hold, "virus", 5);
	http_client_h2.end(&t, NULL, hold);
	evbuffer_drain(hold, 5);
	txn_head(&x, &t, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain"
	    "\r\n\r\n", true);
	body(&x, "no");
	pump(&x);
	expect(&x, " :status: 403\n content-type: text/plain\nHEADERS\n"
	    " [no]\nDATA 2\n");
	http_client_h2.end(&t, NULL, x.w.buf);
	pump(&x);
	expect(&x, "DATA 0 end\n");
	close_pair(&x);
	evbuffer_free(hold);
	evbuffer_free(src);
}

/* The writer freed while its DATA still waits for the client's window
 * (the transaction ended without a reset: its client went, its server
 * failed): nghttp2 keeps the stream's DATA source, the writer, and
 * would read it when the window opens. The stream is reset instead
 * (CANCEL) and nghttp2 never reads the freed writer. */
static void
test_free_unfinished(void **state)
{
	struct pair x;

	(void)state;
	open_pair(&x, "GET", 4);
	head(&x, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", false);
	body(&x, "0123456789");
	pump(&x);
	expect(&x, " :status: 200\n content-length: 10\nHEADERS\n"
	    " [0123]\nDATA 4\n");
	http_h2w_free(&x.w);
	assert_int_equal(nghttp2_submit_window_update(x.cli,
	    NGHTTP2_FLAG_NONE, x.id, 6), 0);
	pump(&x);
	expect(&x, "RST 8\n");
	close_pair(&x);
	/* The client cancels while DATA waits for bytes; its session goes
	 * before the writer (the connection closing): told, the writer
	 * asks nghttp2 nothing more. */
	open_pair(&x, "GET", 0);
	head(&x, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
	    false);
	pump(&x);
	assert_int_equal(nghttp2_submit_rst_stream(x.cli, NGHTTP2_FLAG_NONE,
	    x.id, NGHTTP2_CANCEL), 0);
	pump(&x);
	http_h2w_closed(&x.w);
	nghttp2_session_del(x.srv);
	x.srv = NULL;
	x.wakes = 0;
	body(&x, "late");
	assert_int_equal(evbuffer_get_length(x.w.buf), 0);
	assert_int_equal(http_h2w_end(&x.w, NULL, &x.p), 0);
	http_h2w_reset(&x.w, NGHTTP2_INTERNAL_ERROR);
	evbuffer_add(x.w.buf, "direct", 6);	/* a chunked body's way */
	assert_int_equal(x.wakes, 0);
	close_pair(&x);
}

/* An HTTP/2 server's response with a content-length and trailers (legal
 * in HTTP/2, RFC 9113 8.1): its end (http_h2o: the server's stream
 * ended, trailers or not) comes after the last byte, and the trailers
 * go whenever the client's window let that byte go. */
static void
test_length_trailers(void **state)
{
	const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
	const char *t = "Server-Timing: db;dur=53\r\n\r\n";
	struct http_resp_ctx rs = { .client_keep = true };
	struct http_head tr;
	struct pair x;
	const char *why = NULL;

	(void)state;
	open_pair(&x, "GET", 0);
	x.p.trailers_pass = true;
	assert_int_equal(http_parse_head(s, strlen(s), false, &lim, &x.m,
	    &why), 0);
	x.m.minor = 2;		/* as http_h2o makes an HTTP/2 server's */
	assert_int_equal(http_h2w_head(&x.w, &x.m, &x.p, &rs), 0);
	body(&x, "abc");
	pump(&x);
	expect(&x, " :status: 200\n content-length: 3\nHEADERS\n"
	    " [abc]\nDATA 3\n");
	assert_int_equal(http_parse_trailers(t, strlen(t), &lim, &tr, &why),
	    (ssize_t)strlen(t));
	assert_int_equal(http_h2w_end(&x.w, &tr, &x.p), 0);
	pump(&x);
	expect(&x, " server-timing: db;dur=53\nHEADERS end\n");
	close_pair(&x);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_length),
		cmocka_unit_test(test_interim_trailers),
		cmocka_unit_test(test_end_no_trailers),
		cmocka_unit_test(test_one_frame),
		cmocka_unit_test(test_grpc_reply),
		cmocka_unit_test(test_connect),
		cmocka_unit_test(test_connect_no_length),
		cmocka_unit_test(test_ext_connect),
		cmocka_unit_test(test_connect_error),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_window),
		cmocka_unit_test(test_no_length_field),
		cmocka_unit_test(test_held),
		cmocka_unit_test(test_free_unfinished),
		cmocka_unit_test(test_length_trailers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
