/* The response writer of a transaction that is an HTTP/2 client stream
 * (issue 36): a judged response head becomes HEADERS (:status, its fields
 * lower-cased), its body DATA read by nghttp2 from the stream's output
 * buffer as the client's window lets it, its end END_STREAM or a trailing
 * HEADERS. No session and no socket here: the nghttp2 server session is
 * the caller's, and so is sending what it queues (nghttp2_session_send),
 * so tests/unit/http_h2_txn_test.c drives it against an nghttp2 client
 * session in memory. A CONNECT's (or an extended CONNECT's) 2xx opens a
 * tunnel: HEADERS without END_STREAM, then the server's bytes as DATA
 * until their end (http_h2_stream.c moves them). */
#ifndef HTTP_H2_TXN_H
#define HTTP_H2_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "http_head.h"
#include "http_parse.h"

struct evbuffer;

/* One stream's response as it is written. */
struct http_h2w {
	nghttp2_session	*ng;
	int32_t		 id;
	/* The body bytes DATA frames take (the transaction's `out`: what is
	 * in it counts against `buffer`, and stays until the client's
	 * window lets it go). Bytes added to it by anyone wake a deferred
	 * DATA (an evbuffer callback), so a body moved in without the
	 * writer (an HTTP/1.1 server's Content-Length body) goes too. */
	struct evbuffer	*buf;
	/* The request's body as its DATA come (the transaction's `in`). */
	struct evbuffer	*in;
	bool		 is_head;	/* a HEAD request: no body ever */
	bool		 connect;	/* a CONNECT: a 2xx opens a tunnel */
	/* An extended CONNECT (RFC 8441), sent to its server as an
	 * HTTP/1.1 Upgrade (connect set too): the 101 opens the tunnel, as
	 * a 200 without the Upgrade's own fields; a 2xx says the server did
	 * not upgrade, and no status the client would take for the tunnel
	 * goes (the head is refused: the stream is reset). */
	bool		 ext;
	bool		 tunnel;	/* ...which it did */
	bool		 submitted;	/* the final HEADERS queued */
	bool		 streaming;	/* ...with DATA to follow */
	bool		 deferred;	/* nghttp2 waits for body bytes */
	bool		 eof;		/* the body is whole */
	/* Its length ends it (an HTTP/1.1 server's or proxyd's response,
	 * which has no trailers and whose end may never be said); an
	 * HTTP/2 server's waits for the end, which may bring trailers. */
	bool		 length_ends;
	bool		 done;		/* END_STREAM queued (or reset) */
	bool		 failed;	/* out of memory or nghttp2 refused */
	size_t		 head_bytes;	/* the last head's field bytes */
	uint32_t	 rst_after;	/* RST_STREAM once buf is sent; 0 */
	/* The stream's transaction in its session (http_h2_stream.c),
	 * which a failure ends with the stream; NULL: a writer alone (its
	 * unit test), whose reset only resets. */
	void		*owner;
	int64_t		 left;		/* body bytes the head says; -1 */
	uint64_t	 sent;		/* body bytes given to DATA */
	/* Called when frames were queued for the client (HEADERS, DATA
	 * woken, RST_STREAM): the owner sends them (http_h2_drive), once
	 * back in its event, as this may run inside one of nghttp2's
	 * callbacks, where sending is not allowed. NULL: the caller
	 * sends. */
	void		(*wake)(void *arg);
	void		*wake_arg;
	/* Whether body bytes are still held on their way to buf (a scan
	 * awaiting its verdict): the end waits behind them, as an HTTP/1.1
	 * writer's last chunk waits in the hold behind the data. NULL:
	 * nothing is ever held. */
	bool		(*held)(void *arg);
	void		*held_arg;
	/* The trailer fields to send after the last DATA; NULL none. */
	nghttp2_nv	*trl;
	size_t		 ntrl;
	void		*trl_mem;
};

/* w writes stream id of ng's responses. 0, or -1 out of memory. */
int	http_h2w_init(struct http_h2w *w, nghttp2_session *ng, int32_t id,
	    bool is_head, bool connect);
/* An unfinished response is reset (CANCEL): nghttp2 must never read w
 * again. */
void	http_h2w_free(struct http_h2w *w);
/* The stream closed (nghttp2's on_stream_close), or its session is to
 * be deleted: w asks nothing more of nghttp2, its body is dropped. The
 * owner calls it before nghttp2_session_del, as w->ng then dangles. */
void	http_h2w_closed(struct http_h2w *w);
/* The judged response head m (through p's response-header rules, rs:
 * proxyd's own when rs->own): an interim one (1xx) as HEADERS, a final
 * one as HEADERS with END_STREAM when no body can follow (HEAD, 204,
 * 304, a length of 0 and not a CONNECT's 2xx: a gRPC trailers-only reply
 * is one frame), else HEADERS with DATA to follow from w->buf. 0, or -1
 * (out of memory, nghttp2 refused: the stream is to be reset). */
int	http_h2w_head(struct http_h2w *w, const struct http_head *m,
	    const struct http_policy *p, const struct http_resp_ctx *rs);
/* n bytes at the front of src go to the body (to out: w->buf, or a scan
 * holding them, with the head or not); dropped once the head says there
 * is no body. */
void	http_h2w_data(struct http_h2w *w, struct evbuffer *src, size_t n,
	    struct evbuffer *out);
/* The body ends (trailer section tr through p's rules when trailers
 * ="pass"; NULL none): END_STREAM on the last DATA, or a trailing
 * HEADERS after it, once nothing is held (w->held); before the head
 * (a head a scan holds), kept for the head that follows, unless that is
 * proxyd's own reply in its place. 0 or -1 as head. */
int	http_h2w_end(struct http_h2w *w, const struct http_head *tr,
	    const struct http_policy *p);
/* What was held went to buf (a scan's verdict): a DATA waiting for it
 * goes on, or the end that waited behind it. */
void	http_h2w_released(struct http_h2w *w);
/* The response fails (its server did) after part of it was given to the
 * writer: what is in buf goes first, then RST_STREAM code, as the client
 * would have seen it from the server itself. */
void	http_h2w_reset_after(struct http_h2w *w, uint32_t code);
/* The response fails after part of it went: RST_STREAM code. */
void	http_h2w_reset(struct http_h2w *w, uint32_t code);

#endif
