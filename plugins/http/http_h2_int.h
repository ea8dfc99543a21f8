/* The HTTP/2 front's state (http_h2.c), shared with its streams that are
 * transactions of its session (http_h2_stream.c), its legs (the bytes
 * to and from each, those kept for the next stream: http_h2_leg.c), the
 * translation of each leg's HTTP/1.1 response into HEADERS and DATA
 * (http_h2_resp.c) and CONNECT streams' tunnels on legs
 * (http_h2_tunnel.c; a transaction's tunnel is in http_h2_stream.c). */
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
/* Response bytes one stream may hold here (raw and decoded). */
#define HTTP_H2_STREAM_BUF	(64 * 1024)
/* Request body bytes read and dropped after a complete response (an
 * early 413) before RST_STREAM(NO_ERROR) stops the client (RFC 9113
 * 8.1). Not at once: curl 7.88 (Debian 12) then fails the transfer
 * ("(92) Stream error in the HTTP/2 framing layer") and shows no 413;
 * a body that much over is stopped, as the RFC means. */
#define HTTP_H2_DRAIN_MAX	(2 * 1024 * 1024)
#define HTTP_H2_PREFACE		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define HTTP_H2_PREFACE_LEN	24

enum h2_resp {
	H2_RESP_HEAD = 0,
	H2_RESP_BODY,
	H2_RESP_DONE,
};

struct h2_txn;

struct h2_stream {
	struct http_h2		*c;
	TAILQ_ENTRY(h2_stream)	 link;
	int32_t			 id;
	/* The stream as a transaction of the connection's session
	 * (http_h2_stream.c); NULL: a leg's, or none yet. as_txn: its
	 * HEADERS ended it on a service that lets it be one: its fields
	 * are gathered in req too; txn_ready: it is to start as one.
	 * in_req: its fields (not the pseudo-headers) went to req only,
	 * the leg's text not made (h2_on_header). */
	struct h2_txn		*tx;
	bool			 as_txn, txn_ready, in_req;
	struct http_h2_req	 req;
	int			 fd;		/* our end of the leg; -1 */
	struct px_conn		 leg;
	bool			 leg_open;
	/* The leg's session (NULL: unknown, or gone): a leg whose request
	 * and response leave it idle in keep-alive serves a later stream
	 * (http_h2_leg.c). keep_leg: the request lets it (no body, no
	 * tunnel: not shut after it); leg_keeps: the response does. */
	struct http_state	*peer;
	bool			 keep_leg, leg_keeps;
	/* The request as it arrives. */
	char			 method[32];
	char			 scheme[16];
	/* host and cookie (and held, trailers): a leg's only (h2_leg_bufs),
	 * NULL on a transaction's stream. */
	struct evbuffer		*authority, *path, *host, *fields, *cookie;
	/* The translated request until its leg starts (h2_start_legs). */
	struct evbuffer		*early;
	bool			 pending;	/* complete head, no leg yet */
	size_t			 hlist;		/* decoded header list bytes */
	bool			 too_big;	/* over max-header-list */
	bool			 bad;		/* a pseudo-header we cannot say */
	bool			 has_length;	/* a content-length field */
	bool			 chunked;	/* body to the leg in chunks */
	bool			 req_ended;	/* END_STREAM from the client */
	bool			 shut;		/* leg: our FIN sent */
	size_t			 unconsumed;	/* body bytes not yet consumed */
	bool			 is_head;
	/* CONNECT (RFC 9113 8.5): the client's DATA waits in held until a
	 * 2xx comes from the leg (none of it is ever read there as HTTP),
	 * then both ways are raw bytes (http_h2_tunnel.c). */
	bool			 tunnel;
	bool			 tunnel_up;	/* the 2xx came */
	struct evbuffer		*held;
	char			 protocol[32];	/* :protocol (RFC 8441); "" */
	uint64_t		 leg_id;	/* its session's; 0 */
	bool			 leg_failed;	/* relay cut: not the FIN */
	/* The stream ended before its leg's exchange did (a reset either
	 * way, the connection gone): the leg's session was ended at once,
	 * as its client's reset would (h2_leg_abort). */
	bool			 leg_aborted;
	/* The RST_STREAM code the leg asked for when it cut the response
	 * (http_h2_leg_reset_code); 0: INTERNAL_ERROR. */
	uint32_t		 leg_code;
	/* nghttp2 said the client's frame makes it reset the stream (its
	 * RST_STREAM goes out with the next write): no leg starts. */
	bool			 doomed;
	/* The response. */
	enum h2_resp		 resp;
	enum http_body		 body_kind;
	uint64_t		 left;
	struct http_chunk	 chunk;
	size_t			 head_scan;
	struct evbuffer		*body;		/* decoded, for DATA frames */
	struct evbuffer		*trailers;	/* the leg's trailer section */
	bool			 deferred;	/* nghttp2 waits for body */
	bool			 submitted;	/* final HEADERS submitted */
	int			 status;	/* of the final HEADERS */
	size_t			 head_len;	/* the leg's head for it */
	uint64_t		 sent;		/* head_len once sent, DATA sent */
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
	unsigned		 legs;		/* streams with a request under way */
	unsigned		 ntxn;		/* ...of them transactions */
	bool			 driving, again; /* http_h2_drive under way */
	/* The client's output is written once a loop pass, after every
	 * event of the pass added to it (h2_flush): made at the first. */
	struct event		*flush;
	bool			 flushing;	/* its callback's drive */
	/* The session timer: 0 off, 1 request-timeout (nothing under
	 * way), 2 the transactions' tick (HTTP_H2_TICK_MS). */
	uint8_t			 timer_kind;
	unsigned		 npending;	/* streams whose leg is to start */
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
	TAILQ_HEAD(, h2_idle_leg) idle;		/* legs kept for new streams */
	unsigned		 nidle;
	uint64_t		 legs_spawned;	/* leg sessions started */
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
/* http_h2_leg.c: the request line, Host and fields of st for its leg, as
 * HTTP/1.1 (RFC 9113 8.3.1). 0, or -1 out of memory. */
int	h2_request_head(struct h2_stream *st, struct evbuffer *out);
/* "name: value\r\n" added to b. 0, or -1. */
int	h2_add_field(struct evbuffer *b, const uint8_t *name, size_t nlen,
	    const uint8_t *value, size_t vlen);
/* The buffers only a leg's stream uses (host, cookie, held, trailers),
 * made at its first field or when it is known a leg's (h2_stream_ready):
 * a transaction's stream has none. 0, or -1. */
int	h2_leg_bufs(struct h2_stream *st);
/* A request field (not a pseudo-header) into st's leg text; all of
 * req's (st->in_req: they went there alone). 0, or -1. */
int	h2_leg_field(struct h2_stream *st, const uint8_t *name, size_t nlen,
	    const uint8_t *value, size_t vlen);
int	h2_leg_fields_from_req(struct h2_stream *st);
/* Whether st, its pseudo-headers in, would start as a transaction (with
 * as_txn): neither a CONNECT nor an extended one, nor malformed. */
bool	h2_txn_bound(const struct h2_stream *st);
/* How many response bytes the leg may still give st; what is queued for
 * the leg written (its FIN once the request ended). */
size_t	h2_leg_room(const struct h2_stream *st);
void	h2_leg_flush(struct h2_stream *st);
/* The leg's px_conn callbacks (arg: the stream). */
void	h2_leg_readable(struct px_conn *lc, void *arg);
void	h2_leg_writable(struct px_conn *lc, void *arg);
/* http_h2_leg.c: a leg for st (a kept one, or a new session). 0, or -1
 * (errno). */
int	h2_leg_start(struct h2_stream *st);
/* st goes: its leg is kept for a later stream when it may be, else
 * closed (its session sees the end). */
void	h2_leg_end(struct h2_stream *st);
/* st's stream ends before its leg's exchange did (reset with code, a
 * name for the log: "FLOW_CONTROL_ERROR"; why for the leg's end line):
 * the leg's session ends at once as its client's reset would, so that
 * its server request stops, and logs the request as reset. Once. */
void	h2_leg_abort(struct h2_stream *st, const char *code, const char *why);
/* st's leg's session ends as its client's reset would (why: for its end
 * line): directly while st holds its state, else looked up by id. */
void	h2_leg_reset(struct h2_stream *st, const char *why);
/* Closes the kept legs (the connection ends, or a reload). */
void	h2_legs_idle_close(struct http_h2 *c);
/* The connection's state goes: st's links to its leg's session too. */
void	h2_leg_unlink(struct http_state **ref);
/* http_h2_tunnel.c */
struct evbuffer *h2_tunnel_out(struct h2_stream *st);
bool	h2_tunnel_may_shut(const struct h2_stream *st);
int	h2_tunnel_protocol(struct h2_stream *st, const uint8_t *v, size_t len);
int	h2_tunnel_upgrade_fields(struct h2_stream *st);
int	h2_tunnel_status(const struct h2_stream *st, int status);
void	h2_tunnel_response(struct h2_stream *st, int status);
bool	h2_tunnel_failed(const struct h2_stream *st, ssize_t n);
void	h2_tunnel_client_reset(struct http_h2 *c, int32_t id, uint32_t code);
bool	h2_tunnel_drops(const struct h2_stream *st, const uint8_t *name,
	    size_t nlen);
/* http_h2_resp.c: the leg's bytes in; -1: the stream was reset. */
int	h2_leg_input(struct h2_stream *st);
/* http_h2_stream.c: whether the connection's service lets a stream be a
 * transaction (no <scan>, <content>, <audit>: those stay legs for now). */
bool	h2_txn_eligible(const struct http_h2 *c);
/* st starts as a transaction: its head made from req and judged. 0, or
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
