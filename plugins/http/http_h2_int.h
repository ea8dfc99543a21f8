/* The HTTP/2 front's state (http_h2.c, the client side's codec), shared
 * with its streams, each a transaction of its session
 * (http_h2_stream.c). */
#ifndef HTTP_H2_INT_H
#define HTTP_H2_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <nghttp2/nghttp2.h>

#include "conn.h"
#include "http_h2_req.h"
#include "http_int.h"

/* Streams reset for a send window shut past idle-timeout that end the
 * connection. */
#define HTTP_H2_HELD_MAX	4
/* How often the held streams are looked for, ms. */
#define HTTP_H2_HELD_CHECK_MS	250
/* How often the streams' transactions' timers are looked at, ms. */
#define HTTP_H2_TICK_MS		100
/* Header lists over max-header-list that end the connection. */
#define HTTP_H2_HEADER_LIST_MAX	4
/* A header list this many times max-header-list is reset, not decoded. */
#define HTTP_H2_BOMB_FACTOR	4
/* The connection's reset budget (a token bucket): RST_STREAMs either way,
 * the client's and those proxyd or nghttp2 send (a stream the client made
 * proxyd reset, MadeYouReset, costs what one it reset itself does). Past
 * it the connection ends with GOAWAY ENHANCE_YOUR_CALM. Below nghttp2's
 * own limit on the client's resets (1000, 33 a second), which it
 * replaces. */
#define HTTP_H2_RESET_BURST	200
#define HTTP_H2_RESET_RATE	33	/* a second */
/* Stream ids proxyd reset that a late HEADERS may still name. */
#define HTTP_H2_RESET_IDS	64
/* Request body bytes read and dropped after a complete response (an
 * early 413) before RST_STREAM(NO_ERROR) stops the client (RFC 9113
 * 8.1). Not at once: curl 7.88 (Debian 12) then fails the transfer
 * ("(92) Stream error in the HTTP/2 framing layer") and shows no 413;
 * a body that much over is stopped, as the RFC means. */
#define HTTP_H2_DRAIN_MAX	(2 * 1024 * 1024)
#define HTTP_H2_PREFACE		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define HTTP_H2_PREFACE_LEN	24

struct h2_txn;

struct h2_stream {
	struct http_h2		*c;
	TAILQ_ENTRY(h2_stream)	 link;
	int32_t			 id;
	/* The stream as a transaction of the connection's session
	 * (http_h2_stream.c); NULL: none yet, or it ended. */
	struct h2_txn		*tx;
	/* The request as it arrives: its fields (http_h2_req.c). */
	struct http_h2_req	 req;
	char			 method[32];
	char			 scheme[16];
	struct evbuffer		*authority, *path;
	/* A chunked body's trailer section, as it comes. */
	struct evbuffer		*fields;
	/* The client's DATA until its transaction starts. */
	struct evbuffer		*early;
	bool			 pending;	/* complete head, not started */
	size_t			 hlist;		/* decoded header list bytes */
	bool			 too_big;	/* over max-header-list */
	bool			 bad;		/* a pseudo-header we cannot say */
	bool			 has_length;	/* a content-length field */
	bool			 chunked;	/* body in chunks */
	bool			 req_ended;	/* END_STREAM from the client */
	size_t			 unconsumed;	/* body bytes not yet consumed */
	bool			 is_head;
	/* CONNECT (RFC 9113 8.5): its DATA are tunnel bytes once its
	 * server said 2xx (tunnel_up; http_h2_stream.c). */
	bool			 tunnel;
	bool			 tunnel_up;	/* the 2xx came */
	char			 protocol[32];	/* :protocol (RFC 8441); "" */
	/* nghttp2 said the client's frame makes it reset the stream (its
	 * RST_STREAM goes out with the next write): no transaction starts. */
	bool			 doomed;
	uint64_t		 sent;		/* HEADERS and DATA sent */
	bool			 eof;		/* response complete */
	uint64_t		 held_since;	/* ms: data, send window 0 */
	bool			 reset;		/* RST_STREAM submitted */
	bool			 answered;	/* complete before its request */
	uint64_t		 dropped;	/* body bytes dropped since */
};

struct http_h2 {
	struct http_state	*h;
	nghttp2_session		*ng;
	TAILQ_HEAD(, h2_stream)	 list;		/* every stream we hold */
	unsigned		 open;		/* streams */
	unsigned		 ntxn;		/* transactions under way */
	bool			 driving, again; /* http_h2_drive under way */
	/* The client's output is written once a loop pass, after every
	 * event of the pass added to it (h2_flush): made at the first. */
	struct event		*flush;
	bool			 flushing;	/* its callback's drive */
	/* The session timer: 0 off, 1 request-timeout (nothing under
	 * way), 2 the transactions' tick (HTTP_H2_TICK_MS). */
	uint8_t			 timer_kind;
	unsigned		 npending;	/* transactions to start */
	unsigned		 requests;	/* request heads taken */
	uint64_t		 streams;	/* so far */
	bool			 closing;	/* h2_finish() called */
	bool			 fatal;		/* nghttp2 gave up on the client */
	uint32_t		 goaway;	/* the error code we sent it */
	int			 last_lib_error;
	unsigned		 logged;	/* http2-error lines written */
	int32_t			 last_peer_id;	/* highest HEADERS stream id */
	/* Streams proxyd reset while the client's side was open: a HEADERS
	 * (trailers) may still come on them (RFC 9113 5.1, "closed"). The
	 * last few only; an older one's is taken as a reused id. */
	int32_t			 reset_ids[HTTP_H2_RESET_IDS];
	unsigned		 nreset;
	uint64_t		 priority_left;	/* PRIORITY frames still taken */
	unsigned		 header_lists_over; /* over max-header-list */
	bool			 ended_by_us;	/* a callback ended it (logged) */
	uint64_t		 next_held_check; /* ms */
	unsigned		 held_resets;	/* streams reset as held */
	uint64_t		 reset_tokens;	/* the reset budget, x 1000 */
	uint64_t		 reset_ms;	/* its last refill */
};


/* http_h2.c */
void	h2_stream_reset(struct h2_stream *st, uint32_t code);
/* An HTTP/2 protocol event: counted, and logged (an http2-error line)
 * up to the connection's HTTP_H2_LOG_MAX. */
void	h2_event(struct http_h2 *c, enum http_h2_kind k, int32_t stream,
	    const char *detail);
/* Ends the connection: GOAWAY with code, nothing more read; what a
 * callback returns (NGHTTP2_ERR_CALLBACK_FAILURE). */
int	h2_end_connection(struct http_h2 *c, enum http_h2_kind k,
	    int32_t stream, uint32_t code, const char *detail);
/* Sends what nghttp2 has for the client, reads on, ends the connection
 * when it is done. */
void	http_h2_drive(struct http_h2 *c);
/* http_h2_stream.c: st starts as a transaction: its head made from req and judged. 0, or
 * -1 out of memory. */
int	h2_txn_start(struct h2_stream *st);
/* Every transaction's step (after the client's frames, and after what
 * nghttp2 sent made room). */
void	h2_txn_step_all(struct http_h2 *c);
/* The transactions' timers and idle-timeout (HTTP_H2_TICK_MS). */
void	h2_txn_tick(struct http_h2 *c);
/* st was reset (code): its transaction ends cut, its server request
 * stopped. */
void	h2_txn_cut(struct h2_stream *st, uint32_t code);
/* st goes (its stream closed with code, or its connection: closed
 * true): its transaction's line written, its state freed. */
void	h2_txn_end(struct h2_stream *st, uint32_t code, bool closed);
/* A response the connection makes itself (status: "431"), without a
 * transaction (no request to judge: the head could not be read whole). */
void	h2_reply_bare(struct h2_stream *st, const char *status);
/* The http-request line (and counters) of such a stream. */
void	h2_log_refused(struct h2_stream *st, int status, const char *rule);
/* Streams whose client kept their window shut past idle-timeout are
 * reset, and the connection's HTTP_H2_HELD_MAX-th ends it. */
void	h2_reset_held(struct http_h2 *c);
/* Where st's transaction reads its request body (its DATA, in chunks
 * when it came without content-length). */
struct evbuffer *h2_txn_in(struct h2_stream *st);
/* st's transaction is over: its request's rest is dropped. */
bool	h2_txn_ended(const struct h2_stream *st);
/* Response bytes st's transaction holds that DATA have not taken. */
size_t	h2_txn_queued(const struct h2_stream *st);

#endif
