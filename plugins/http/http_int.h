/* The http analyser's session side, shared by its files and by nothing
 * else: the per-session state (struct http_state), the transaction in
 * flight on it (struct http_txn) and the calls the files make into each
 * other, one way down their layers (docs/CORE.md, "The http analyser's
 * layers", held by layering.http): the transaction's files reach the
 * engine that runs it (http.c, http_h2*.c) only through
 * struct http_engine_ops.
 *   http.c		the state machine: the transaction flow, tunnels,
 *			the px_driver callbacks
 *   http_txn.c		a transaction's own: its http-request line
 *   http_judge.c	a parsed head judged (request and response): the
 *			one policy path of both codecs
 *   http_body.c	bodies as they stream (Content-Length, chunked)
 *   http_upstream.c	which server: authority, dispatch, DNS, server
 *			connection open/drop, the one retry; its events
 *			(the response read, its end)
 *   http_reply.c	the proxy's own replies (error pages, CONNECT's 200),
 *			parsed heads sent through the client's writer
 *   http_grpc.c	gRPC calls: grpc-timeout, trailers-only refusals
 *   http_head.c	the heads sent on (pure: http_head.h)
 *   http_scan.c	bodies through the service's scanner (<scan>)
 *   http_scan_mod.c	the scanner's changed response in place of one held
 *   http_h2*.c		HTTP/2 towards clients (http_h2_int.h): a stream
 *			a transaction of the session (http_h2_stream.c,
 *			its head from its fields: http_h2_req.c, pure; its
 *			response writer: http_h2_txn.c; a CONNECT's tunnel
 *			there too)
 *   http_h2_origin*.c	HTTP/2 towards servers: the worker's shared
 *			connections, a stream per transaction
 *			(http_h2_origin.h; the messages on a stream and
 *			nghttp2's callbacks: http_h2_origin_frames.c)
 *   http_policy.c	the <http> section and the decisions it makes (http.h)
 *   http_auth.c	the service's <auth>: challenges, credentials checked
 *			off the worker (one check for the streams that
 *			bring the same ones), the connection's identity
 *   http_parse.c	framing (pure: http_parse.h)
 *   http_target.c	the request target canonical (pure: http_parse.h) */
#ifndef HTTP_INT_H
#define HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "analyser.h"
#include "http.h"

struct evbuffer;
struct evdns_getaddrinfo_request;
struct px_conn;

/* RST_STREAM's CANCEL (RFC 9113 7), for files without nghttp2.h. */
#define HTTP_H2_CANCEL	0x8

/* Indexes into http_analyser.counters. */
enum http_counter {
	HTTP_C_REQUESTS = 0,
	HTTP_C_DENIED,
	HTTP_C_BAD_REQUEST,
	HTTP_C_BAD_RESPONSE,
	HTTP_C_RETRIED,
	HTTP_C_TUNNELS,
	HTTP_C_TIMEOUTS,
	HTTP_C_H2_CONNECTIONS,	/* clients that spoke HTTP/2 */
	HTTP_C_H2_STREAMS,	/* their streams that became requests */
	HTTP_C_H2_SERVER_CONNECTIONS,	/* HTTP/2 connections to servers */
	HTTP_C_H2_SERVER_STREAMS,	/* requests sent on them */
};

/* Indexes into http_analyser.series. */
enum http_series {
	HTTP_S_RESPONSES = 0,	/* by status code */
	HTTP_S_DURATION,	/* by status class */
	HTTP_S_H2_ERRORS,	/* HTTP/2 protocol events, by kind */
	HTTP_S_PROTO,		/* requests by the client's protocol */
};

/* Values of HTTP_S_H2_ERRORS (names: http_h2.c). */
enum http_h2_kind {
	HTTP_H2_BAD_PREFACE = 0,
	HTTP_H2_FLOOD,		/* outbound queue: PING/SETTINGS floods */
	HTTP_H2_HPACK,
	HTTP_H2_FLOW_CONTROL,
	HTTP_H2_SETTINGS,
	HTTP_H2_CONTINUATION,
	HTTP_H2_FRAME,		/* other connection errors */
	HTTP_H2_MALFORMED,	/* a malformed request: RST_STREAM */
	HTTP_H2_HEADER_LIST,	/* over max-header-list: 431 */
	HTTP_H2_REFUSED,	/* over max-concurrent-streams */
	HTTP_H2_CLIENT_RESET,	/* RST_STREAM from the client */
	HTTP_H2_GOAWAY,		/* GOAWAY sent with an error code */
	HTTP_H2_OTHER,
	HTTP_H2_KINDS
};

enum http_body {
	HTTP_BODY_NONE = 0,
	HTTP_BODY_LENGTH,
	HTTP_BODY_CHUNKED,
	HTTP_BODY_CLOSE,	/* response only: until the server closes */
};

enum http_req_state {
	HTTP_REQ_HEAD = 0,	/* waiting for a request head */
	HTTP_REQ_WAIT,		/* head parsed, no server yet (resolving) */
	HTTP_REQ_AUTH,		/* head kept: its credentials are checked */
	HTTP_REQ_BODY,
	HTTP_REQ_DONE,
};

enum http_resp_state {
	HTTP_RESP_NONE = 0,	/* no request sent yet */
	HTTP_RESP_HEAD,		/* waiting for the (final) response head */
	HTTP_RESP_BODY,
	HTTP_RESP_DONE,
};

struct http_server {
	struct px_conn		*io;		/* the core's; NULL: none */
	struct sockaddr_storage	 dst;
	bool			 reused;
	bool			 connected;
	bool			 got_bytes;	/* any response byte on it */
	bool			 keep;		/* reusable after this response */
	bool			 kept;		/* from this client's last request */
	/* No message under way on it either way: the server took the
	 * whole request and sent the whole response (or none was sent
	 * yet). The only state it may go to the pool in. */
	bool			 boundary;
};

struct http_scan_head;

/* A body through the scanner (http_scan.c), one per direction. */
struct http_scan {
	struct px_icap_req	*icap;		/* the scan under way; NULL */
	struct evbuffer		*hold;		/* what is held back */
	bool			 on;		/* this body is being scanned */
	bool			 ended;		/* all sent: verdict awaited */
	bool			 whole;		/* head and body held whole */
	/* deliver="after-verdict": the body as it will be sent (with its
	 * chunk framing; a response's head is kept apart, below) moved
	 * from hold into this spool (spool.h) until the verdict; NULL
	 * otherwise. */
	struct px_spool		*spool;
	/* The judged response head while it is held (sniffing, held
	 * whole, spooled), apart from the body: sent through the client's
	 * writer (http_client) when what is held is released, so that a
	 * writer is only ever given a parsed head; NULL: none held. */
	struct http_scan_head	*kept;
	uint64_t		 size;		/* body bytes so far */
	/* <content>: the body's first bytes, gathered while everything
	 * from its start on is held (with the response head when
	 * head_held), until judged; NULL when not sniffed or judged. */
	struct px_sniff		*sniff;
	size_t			 sniff_want;	/* judged once it has this */
	bool			 head_held;
	char			 type[96];	/* as sniffed; "" none */
	const char		*content;	/* accept, deny; NULL none */
	const char		*scanned;	/* the scan's verdict; NULL none */
	struct px_audit		*audit;		/* its record; NULL: none */
	/* Why the body did not all go on though nothing refused it (its
	 * record's reason): "early-response". NULL: it did, or was
	 * refused. */
	const char		*unsent;
	/* The transfer ended whole (http_transaction_done) though its
	 * record waits for the end of its HTTP/2 stream: by then req and
	 * resp may say another state. */
	bool			 went;
};

struct http_h2;
struct http_auth;
struct http_head;
struct http_resp_ctx;
struct px_auth_id;
struct http_h2o_stream;
struct http_h2o_req;
struct http_h2w;
struct http_who;
struct http_engine_ops;

/* One request and its response (a transaction): what they own, from the
 * request head to the response's end (the server side, body framing,
 * scans, the http-request line's fields). Functions that work on one
 * take a struct http_txn *; conn is the client connection it belongs to.
 * An HTTP/1.1 connection has one in flight (struct http_state.tx); an
 * HTTP/2 connection one per stream (http_h2_stream.c). */
struct http_txn {
	struct http_state	*conn;		/* its client connection */
	const struct http_engine_ops *eng;	/* what runs it (http_txn.c) */
	bool			 connecting;	/* srv.io.fd: connect under way */
	bool			 grpc;		/* content-type application/grpc */
	struct http_server	 srv;
	/* The transaction's stream to an HTTP/2 server (http_h2_origin.c);
	 * NULL: none (srv.io is the server's HTTP/1.1 connection). */
	struct http_h2o_stream	*h2o;
	/* Its request's header list, made from the parsed request when the
	 * service may speak HTTP/2 to servers (http_h2o_prepare); NULL. */
	struct http_h2o_req	*h2o_req;
	/* The transaction is an HTTP/2 client stream: its response writer
	 * (http_h2_txn.c); NULL: the client connection is HTTP/1.1. */
	struct http_h2w		*h2w;
	size_t			 resp_scan;	/* http_head_end() resume point */
	struct http_head_scan	 resp_judge;	/* the response head arriving */
	uint16_t		 port;		/* the request's, for Allow */

	enum http_req_state	 req;
	enum http_resp_state	 resp;
	enum http_body		 req_body, resp_body;
	uint64_t		 req_left, resp_left;
	struct http_chunk	 req_chunk, resp_chunk;
	bool			 dechunk;	/* 1.0 client, chunked response */
	bool			 is_head, is_connect, upgrade_ok;
	/* The request says it has a body (Content-Length, chunked): the
	 * client may still be sending it when proxyd answers. */
	bool			 body_said;
	bool			 retried;
	bool			 srv_h2;	/* this request went over h2 */
	bool			 te_trailers;	/* the client sent TE: trailers */
	bool			 replayable;	/* idempotent and bodiless */
	/* The request head's bytes at the front of the client input (the
	 * HTTP/1.1 codec's), drained once it is judged or refused. */
	size_t			 head_len;
	/* The head being sent; once sent on a reused connection, still
	 * held (the server's output references it) for one retry. */
	struct evbuffer		*head_out;
	bool			 req_kept;	/* head_out holds the head sent */
	struct evdns_getaddrinfo_request *dns;	/* forward mode: resolving */
	int			 status;
	int			 grpc_status;	/* of proxyd's own answer, or -1 */
	/* grpc-timeout's end (http_grpc_now_ms), 0 none */
	uint64_t		 grpc_deadline_ms;
	uint64_t		 req_bytes, resp_bytes;
	uint64_t		 interim_bytes;	/* of resp_bytes: 1xx heads */
	struct timeval		 t_start;
	char			 method[24];
	char			 host[128];
	char			 path[256];	/* for the log: cut, escaped */
	/* The request target as judged and sent on (http_target_canon);
	 * grown to the longest target of the session, freed at its close. */
	char			*canon;
	size_t			 canon_size;
	const char		*verdict;
	/* rule= of this request's refusal ("": not known yet, see
	 * http_error) */
	char			 rule[128];
	struct http_scan	 scan[2];	/* [PX_TO_SERVER]: upload */
	/* An HTTP/2 stream reset under its transaction: the code ("" none),
	 * for its http-request line (h2_txn_end). */
	char			 rst_code[24];
	/* An HTTP/2 stream's transaction is over (done, refused or cut):
	 * the engine takes no more step on it (http_h2_stream.c). */
	bool			 ended;
	/* An HTTP/2 stream's tunnel is up (CONNECT's 2xx, an extended
	 * CONNECT's 101): raw bytes both ways (http_h2s_tunnel). */
	bool			 tunnel;
	/* Who its request was judged as (<auth>, http_auth_bind); NULL. */
	struct http_who		*who;
};

/* A client connection (the analyser's per-session state): what is the
 * connection's, and the transaction in flight on it. */
struct http_state {
	struct px_session	*s;
	struct http_h2		*h2;		/* the client speaks HTTP/2 */
	const struct http_policy *pol;
	struct px_conn		*c;		/* the client: the core's */
	bool			 gone;		/* session closed: touch nothing */
	bool			 client_eof;
	bool			 closing;	/* flushing a last reply */
	/* Closing cut (http_abort): what is queued for the client goes,
	 * then a reset instead of a FIN (http_cut_wait). */
	bool			 cut;
	/* Closing after an early answer, the client's body still coming:
	 * its close lingers (http_linger). */
	bool			 linger;
	bool			 tunnel;	/* flushing toward the handoff */
	bool			 client_keep;	/* keep the client after this */
	bool			 client_10;	/* HTTP/1.0 client */
	bool			 transparent;	/* dst is the client's own */
	bool			 cert_tried;	/* client certificate's user */
	uint64_t		 progress;	/* bumped by every step that moved */
	size_t			 buffer;
	size_t			 head_scan;	/* http_head_end() resume point */
	struct http_head_scan	 req_judge;	/* the request head arriving */
	unsigned		 nreq;		/* requests on this connection */
	enum px_end_by		 end_by;
	char			 end_reason[160];	/* once closing */
	/* progress when the last reply's grace (or the request-timeout
	 * after it) began: a reply still read keeps them from running out. */
	uint64_t		 grace_progress;
	/* A cut's flush: the client's bytes still unwritten or not
	 * acknowledged at the last look, and when they last shrank
	 * (px_clock_ms). */
	size_t			 cut_pending;
	uint64_t		 cut_since;
	/* <auth>: the connection's identity and the check under way
	 * (http_auth.c); NULL until the service's first request. */
	struct http_auth	*auth;
	/* The transaction in flight (one at a time on HTTP/1.x). */
	struct http_txn		 tx;
};

/* ---- http.c ------------------------------------------------------------ */

/* Copies a peer string for the log: cut to size, and every byte that is
 * not printable ASCII (or is '"') becomes '?' (in http_reply.c). */
void	http_copy(char *dst, size_t size, const char *src, size_t len);
/* Stops reading the client and ends the session (with a FIN) once what is
 * queued for it is written. */
void	http_close_when_flushed(struct http_state *h, enum px_end_by by,
	    const char *reason);
/* Ends the session cut: reset both sides (a truncated message must not
 * look whole). What is queued for an HTTP/1.x client (the responses
 * before, whole, and what came of this one) is written first: at once
 * when nothing is. */
void	http_abort(struct http_state *h, enum px_end_by by,
	    const char *reason);
/* A CONNECT's 200 or a 101 is out: both sockets go to the core's relay;
 * an HTTP/2 stream's tunnel runs in the engine (http_h2s_tunnel). */
void	http_start_tunnel(struct http_txn *t);
/* t's response is over (written or queued; the request too, unless the
 * server answered early): its server connection kept or dropped, then
 * the next request, the end of the connection, or (an HTTP/2 stream)
 * the stream's end. Any engine's done. */
void	http_transaction_done(struct http_txn *t);
/* The engine of an HTTP/1.1 client connection's transaction (http.c). */
extern const struct http_engine_ops http_engine_h1;
/* One step of an HTTP/2 stream's transaction (http_h2_stream.c drives
 * them): its request body on, the server's response in, the server's
 * output written, the server read while the stream has room. */
void	http_txn_step(struct http_txn *t);
/* t's timer ran out (http_txn_timer): a 504, a cut, or a wait that goes
 * on; the timeout counted. false: t waited for none of those (between
 * requests: the connection's request-timeout). */
bool	http_txn_timeout(struct http_txn *t);

/* ---- http_txn.c -------------------------------------------------------- */

/* What a transaction asks of the engine that runs it: its client
 * connection's state machine (HTTP/1.1's, http_engine_h1 in http.c) or
 * its HTTP/2 stream's (http_engine_h2, http_h2_stream.c). The files of
 * the transaction layer reach the engine only through it (the wrappers
 * below), so they call one way down (docs/CORE.md, "The http analyser's
 * layers"). */
struct http_engine_ops {
	const char *name;
	/* Runs every step that can make progress on the connection h. */
	void	(*drive)(struct http_state *h);
	/* t's own timer (its response-timeout, grpc-timeout; 0 off). */
	void	(*timer)(struct http_txn *t, uint64_t ms);
	/* t ends cut (its client must never take what it got for whole),
	 * with an RST_STREAM code for an HTTP/2 client (0: INTERNAL_ERROR). */
	void	(*cut)(struct http_txn *t, enum px_end_by by, uint32_t code,
		    const char *reason);
	/* t's response is over (written or queued): the next request. */
	void	(*done)(struct http_txn *t);
	/* A refusal of t's request was queued: http_refusal_sent. */
	void	(*refused)(struct http_txn *t, bool keep, const char *reason);
	/* proxyd's own answer ended t (an error page, logged): the client
	 * connection ends (by, reason) once it is written, or the stream
	 * with it. */
	void	(*answered)(struct http_txn *t, enum px_end_by by,
		    const char *reason);
	/* A CONNECT's 200 or a 101 is out: the tunnel starts. */
	void	(*tunnel)(struct http_txn *t);
	/* The server connection of a tunnel the engine runs itself (t->tunnel:
	 * an HTTP/2 stream's) ended (err 0: a FIN) or failed. NULL for an
	 * engine whose tunnels go to the core's relay (HTTP/1.1's). */
	void	(*tunnel_gone)(struct http_txn *t, int err);
};

/* t starts as a transaction of h run by eng (its head buffer made). 0, or
 * -1 out of memory (http_txn_free frees what was made). */
int	http_txn_init(struct http_txn *t, struct http_state *h,
	    const struct http_engine_ops *eng);
/* Runs every step that can make progress on t's connection (http_drive);
 * after every event. */
void	http_txn_drive(struct http_txn *t);
/* t's own timer (its response-timeout, grpc-timeout; 0 off): the
 * session's for an HTTP/1.1 client, its stream's for an HTTP/2 one. */
void	http_txn_timer(struct http_txn *t, uint64_t ms);
/* t ends cut (its client must never take what it got for whole): an
 * HTTP/1.1 client's connection reset (http_abort), an HTTP/2 stream
 * reset, its connection going on. */
void	http_txn_abort(struct http_txn *t, enum px_end_by by,
	    const char *reason);
/* The same, an HTTP/2 client's stream reset with code. */
void	http_txn_cut(struct http_txn *t, enum px_end_by by, uint32_t code,
	    const char *reason);
/* The transaction is over (its reply written or queued): the next
 * request, or the end of the connection. */
void	http_transaction_end(struct http_txn *t);
/* The response (and its request) are complete and their scans passed:
 * bytes the server sent after it are dropped, the next request may come. */
void	http_response_complete(struct http_txn *t);
/* A refusal of t's request was queued (a 429, a 401/407 challenge): with
 * keep, its head (t->head_len) leaves the client input and the connection
 * reads the next request; else the request is logged and the session
 * ends (reason) once it is flushed. An HTTP/2 stream ends with it. */
void	http_refusal_sent(struct http_txn *t, bool keep, const char *reason);
/* A CONNECT's 200 or a 101 is out: both sockets go to the core's relay. */
void	http_txn_tunnel(struct http_txn *t);
/* t goes (its session closes): its scans (their records written), its
 * resolver query, buffers and HTTP/2 server stream; its server
 * connection to the pool when keep_server, else closed. */
void	http_txn_free(struct http_txn *t, bool keep_server);
/* Nothing under way for t calls back any more: its scans (records
 * written), its resolver query, its server (to the pool when
 * keep_server, else closed). */
void	http_txn_stop(struct http_txn *t, bool keep_server);

/* A line about t (printf fmt), tagged "proto=h2 stream=N" when t is an
 * HTTP/2 stream (its connection has others). */
void	http_txn_log(struct http_txn *t, int level, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
/* The http-request line of the transaction, once (then method is "").
 * An HTTP/2 stream's waits for the stream's end (http_h2_stream.c). */
void	http_log_request(struct http_txn *t);
/* `buffer` bounds a direction of t (what was read from one side and
 * waits to be written to the other): what is left of it. */
size_t	http_txn_room(struct http_txn *t, enum px_dir dir);
/* The same with tag at its end ("proto=h2 stream=N"): an HTTP/2 stream
 * answered by the connection itself (http_h2.c). */
void	http_log_request_as(struct http_txn *t, const char *tag);

/* Where a transaction's response goes: the protocol of its client
 * connection, fed the judged head and the body as they come. The scan
 * (http_scan.c) sits in front of it: out is where http_scan_to says the
 * bytes go (the client's output, or the scan's hold); a head the scan
 * holds is kept parsed and given to head at its release, ahead of the
 * body held with it. HTTP/1.1's (http_txn.c), and an HTTP/2 stream's
 * (http_h2_txn.c: HEADERS, DATA and trailers through nghttp2). A body an
 * HTTP/1.1 server sends chunked goes on with its own chunks (http_body.c),
 * not through data. */
struct http_client_ops {
	const char *name;
	/* The response head m (interim or final), judged. */
	void	(*head)(struct http_txn *t, const struct http_head *m,
		    const struct http_resp_ctx *rs, struct evbuffer *out);
	/* The bytes head will count (add to out) for m: a head a scan
	 * holds is counted when judged and written when released. 0, or
	 * -1 out of memory. */
	int	(*head_size)(struct http_txn *t, const struct http_head *m,
		    const struct http_resp_ctx *rs, size_t *n);
	/* The n body bytes at the front of src go on. */
	void	(*data)(struct http_txn *t, struct evbuffer *src, size_t n,
		    struct evbuffer *out);
	/* The body's end, with its trailer section tr (NULL: none). */
	void	(*end)(struct http_txn *t, const struct http_head *tr,
		    struct evbuffer *out);
	/* The server failed the response (why) after part of it went: the
	 * client must not take what it got for a whole one. */
	void	(*reset)(struct http_txn *t, const char *why);
	/* Where the request's body comes from, framed as its head said
	 * (HTTP/1.1: the client connection's input, after the head). */
	struct evbuffer *(*in)(struct http_txn *t);
	/* Where the response's bytes go when no scan holds them; what is
	 * in it counts against `buffer` (HTTP/1.1: the client connection's
	 * output). */
	struct evbuffer *(*out)(struct http_txn *t);
};

/* The writer of t's response. */
const struct http_client_ops *http_client(const struct http_txn *t);
/* An HTTP/2 stream's (http_h2_txn.c): t->h2w set. */
extern const struct http_client_ops http_client_h2;
/* Its in and out. */
struct evbuffer *http_client_in(struct http_txn *t);
struct evbuffer *http_client_out(struct http_txn *t);

/* ---- http_auth.c ------------------------------------------------------- */

/* <auth> on t's request, whose parsed head is m: 0 go on (proven, or
 * not required), -1 answered (a challenge, 503), 1 waiting for its check
 * (HTTP_REQ_AUTH; a copy of m is kept, and judged again once answered:
 * http_replay_request), or for one under way for the connection that
 * its answer decides too (another HTTP/2 stream's, with the same
 * credentials). */
int	http_auth_request(struct http_txn *t, const struct http_head *m);
/* Who the connection proved to be; NULL: nobody yet. */
const struct px_auth_id *http_auth_id(const struct http_state *h);
/* t's request passed <auth> (http_auth_request said 0): it is judged,
 * logged and recorded as who the connection is now, whatever the
 * connection proves later (its other HTTP/2 streams). Unbind: none. */
void	http_auth_bind(struct http_txn *t);
void	http_auth_unbind(struct http_txn *t);
/* Who t's request was judged as; NULL: nobody. */
const struct px_auth_id *http_auth_txn_id(const struct http_txn *t);
/* <source-limits per="user"> refused the connection (limit: at the
 * refusal, with its Retry-After and rule): every later request of it is
 * refused too (limited: true, and the same answer). */
void	http_auth_user_limit(struct http_state *h, uint32_t retry_s,
	    const char *rule);
bool	http_auth_user_limited(const struct http_state *h, uint32_t *retry_s,
	    char *rule, size_t len);
/* The credentials field the service checks itself, never sent on
 * ("proxy-authorization", "authorization"); NULL: no <auth>. */
const char *http_auth_field(const struct http_state *h);
void	http_auth_close(struct http_state *h);
/* Frees the worker's digest of Basic credentials (http_worker_exit). */
void	http_auth_worker_exit(void);
/* The field lines the final response to t's request carries for
 * <auth> (Negotiate's last token, RFC 4559 5: "WWW-Authenticate:
 * Negotiate ...\r\n", not in forward mode); NULL: none. Once sent,
 * http_auth_reply_sent. */
const char *http_auth_reply(const struct http_txn *t);
void	http_auth_reply_sent(struct http_txn *t);
/* t goes before its stream's end (an HTTP/2 stream's transaction):
 * its wait for a check, if any, and its reply go; a check nobody else
 * waits for is cancelled (px_auth_cancel). */
void	http_auth_txn_gone(struct http_txn *t);
/* px_analyser.who: " user=NAME auth=METHOD" once proven. */
void	http_auth_who(const struct px_session *s, const void *st, char *buf,
	    size_t len);


/* ---- http_judge.c ------------------------------------------------------ */

/* A complete request head (head_len bytes) is at the front of the client
 * input: parsed (the HTTP/1.1 codec's part), then http_judge_request. */
void	http_handle_request(struct http_txn *t, const char *buf,
	    size_t head_len);
/* The parsed request head m judged, then answered, refused or sent on;
 * what an HTTP/2 stream's head is to go through too. Its bytes in the
 * client input (t->head_len, 0: none there) leave once it is judged. */
void	http_judge_request(struct http_txn *t, const struct http_head *m,
	    bool replay);
/* A request starts: counted, its log fields from m (NULL when rc, the
 * status its parse refused it with, why), then judged. */
void	http_request_start(struct http_txn *t, const struct http_head *m,
	    int rc, const char *why);
/* The request whose <auth> check was answered, judged again from its
 * kept head m: counted and timed once, as one request. */
void	http_replay_request(struct http_txn *t, const struct http_head *m);
/* A complete response head is at the front of the server input: parsed,
 * then judged by http_judge_response. false when the transaction ended. */
bool	http_handle_response(struct http_txn *t, const char *buf,
	    size_t head_len);
/* The response head m judged and written for the client (framing, the
 * response-header rules, the scan); buf and head_len: its bytes as an
 * HTTP/1.1 server sent them (NULL, 0: from an HTTP/2 server, whose head
 * came as fields). false when the transaction ended. */
bool	http_judge_response(struct http_txn *t, const struct http_head *m,
	    const char *buf, size_t head_len);
/* A head was taken (or refused): the next one is looked at from its
 * start. */
void	http_head_restart(size_t *scan, struct http_head_scan *judge);
/* A worker thread exits: the head buffer kept per thread goes. */
void	http_thread_exit_heads(void);

/* ---- http_body.c ------------------------------------------------------- */

/* Moves request body bytes from the client to the server, up to the
 * server output's limit. */
void	http_pump_request(struct http_txn *t);
/* Moves response body bytes to the client, up to its output's limit. */
void	http_pump_response(struct http_txn *t);
/* Runs every step that can make progress; after every event (http.c;
 * the transaction layer's way to it: http_txn_drive). */
void	http_drive(struct http_state *h);

/* ---- http_h2.c --------------------------------------------------------- */

/* The client speaks HTTP/2 (ALPN h2): its session starts. 0, or -1. */
int	http_h2_start(struct http_state *h);
/* h2c: before the first request head, the client's input starts with
 * (a part of) the HTTP/2 preface. 1 when HTTP/2 took over (or waits
 * for the rest of the preface), 0 when this is HTTP/1.x. */
int	http_h2_preface(struct http_state *h);
void	http_h2_readable(struct http_state *h);
void	http_h2_writable(struct http_state *h);
void	http_h2_timer(struct http_state *h);
void	http_h2_config(struct http_state *h);
void	http_h2_close(struct http_state *h);
/* http_drive of an HTTP/2 connection: its streams' transactions stepped,
 * what nghttp2 has sent. */
void	http_h2_drive_conn(struct http_state *h);
/* The bytes t's writer counted for the last head it sent (HTTP/2). */
size_t	http_h2w_head_bytes(const struct http_h2w *w);
/* The stream id w writes. */
int32_t	http_h2w_stream(const struct http_h2w *w);
void	http_h2_describe(const struct http_state *h, char *buf, size_t len);
void	http_h2_kind_name(unsigned i, char *buf, size_t size);

/* ---- http_h2_stream.c: an HTTP/2 stream that is a transaction --------- */

/* t's response is complete (http_transaction_end): its server connection
 * to the pool when keep_server, the stream's end queued; its line waits
 * for the stream's end. */
void	http_h2s_done(struct http_txn *t, bool keep_server);
/* t is cut: RST_STREAM code, its server request stopped. */
void	http_h2s_abort(struct http_txn *t, uint32_t code, const char *why);
void	http_h2s_timer(struct http_txn *t, uint64_t ms);
/* t's CONNECT got its 2xx (an extended CONNECT its 101), whose HEADERS
 * are queued: from now its stream's DATA go to the server connection and
 * the server's bytes out as DATA, until both ends are passed on. */
void	http_h2s_tunnel(struct http_txn *t);
/* One step of such a tunnel (in place of http_txn_step). */
void	http_h2s_tunnel_step(struct http_txn *t);
/* Its server connection ended (err 0: a FIN) or failed. */
void	http_h2s_tunnel_gone(struct http_txn *t, int err);
/* The engine of a stream's transaction (http_txn_init). */
extern const struct http_engine_ops http_engine_h2;

/* ---- http_scan.c ------------------------------------------------------- */

/* The request goes without Range, If-Range and Request-Range: the
 * service scans downloads with <scan partial="refuse"> (the default), and
 * a part of a body, scanned alone, passes where the whole would not
 * (EICAR fetched as bytes=0-33 then 34-67). A server may always answer a
 * Range with the whole body; this one then does. */
bool	http_scan_whole(const struct http_txn *t);
/* With <scan partial="refuse"> in the direction dir scanned: -1 (the
 * transaction ended, logged reason=scan-partial) for a message m that
 * carries a part of a body: a request with Content-Range (400), a 206 or
 * a response with Content-Range (502); else 0. */
int	http_scan_partial(struct http_txn *t, const struct http_head *m,
	    enum px_dir dir);
/* A request body of size bytes (-1: chunked) follows: starts its scan if
 * the service scans uploads. 0 go on, -1 the transaction ended (413). */
int	http_scan_request(struct http_txn *t, int64_t size);
/* A final response head m with a body (head, len: its bytes as the
 * scanner is shown them) starts its scan. 0: m goes to the client now
 * (through the writer, by the caller); 1: the scan keeps m (a copy, and
 * of rs) to send it through the writer when what is held is released,
 * *n the bytes it counts (counted now, as if sent: dropped unsent
 * later if refused); -1: the transaction ended (502). */
int	http_scan_response(struct http_txn *t, const struct http_head *m,
	    const struct http_resp_ctx *rs, const char *head, size_t len,
	    size_t *n);
/* The service has no <scan>, <content> nor <audit>: no body of its is
 * held, sniffed or recorded. */
bool	http_scan_none(const struct http_state *h);
/* The service scans response bodies (a scanner for downloads). */
bool	http_scan_downloads(const struct http_txn *t);
/* Where the body in dir goes: the hold while scanned, else out. */
struct evbuffer *http_scan_to(struct http_txn *t, enum px_dir dir,
	    struct evbuffer *out);
/* Bytes held or waiting for the scanner in dir: counted against buffer. */
size_t	http_scan_queued(const struct http_txn *t, enum px_dir dir);
/* n body bytes at the front of src are about to go on: a copy goes to the
 * scanner. -1: the transaction ended (over max-size, refused). */
int	http_scan_feed(struct http_txn *t, enum px_dir dir,
	    struct evbuffer *src, size_t n);
/* Moves to out what is no longer held back. */
void	http_scan_release(struct http_txn *t, enum px_dir dir,
	    struct evbuffer *out);
/* The body in dir is complete: true while its verdict is awaited (the
 * transfer must not complete); false once it may, the held bytes moved
 * to out. */
bool	http_scan_hold(struct http_txn *t, enum px_dir dir,
	    struct evbuffer *out);
/* The body in dir is complete and its verdict not in yet. */
bool	http_scan_pending(const struct http_txn *t, enum px_dir dir);
/* Part of the body in dir is held back (for a verdict or a type), or
 * is still being scanned. */
bool	http_scan_holding(const struct http_txn *t, enum px_dir dir);
/* The body in dir will never all go on, though nothing refused it (the
 * server answered before the request's end): what is held is dropped,
 * the scan and the type left unjudged, the record says why (reason);
 * for an upload with something held, the server connection is reset.
 * The bytes dropped. */
size_t	http_scan_unsent(struct http_txn *t, enum px_dir dir,
	    const char *reason);
void	http_scan_close(struct http_txn *t);
/* The body in dir is over (the transaction logged, or the session
 * ended): its audit record, if it has one, is written. */
void	http_audit_end(struct http_txn *t, enum px_dir dir);

/* ---- http_upstream.c --------------------------------------------------- */

/* "host[:port]" from a Host field or an authority: *port (defport if none)
 * and the printable host; an IP literal also fills *ss, a name leaves its
 * family 0. 0, or -1 when malformed. */
int	http_authority(const char *a, size_t len, uint16_t defport, char *host,
	    size_t hsize, struct sockaddr_storage *ss, uint16_t *port);
/* http_authority for the request's Host field, into t->host: the
 * worker's last result again when the value is the same bytes. */
int	http_host_authority(struct http_txn *t, const char *a, size_t len,
	    uint16_t defport, struct sockaddr_storage *ss, uint16_t *port);
/* Opens t->srv on dst: a pooled connection if pooled_ok (never for
 * CONNECT), else a new one. 0, or -1 (logged). */
int	http_server_open(struct http_txn *t, const struct sockaddr *dst,
	    bool pooled_ok);
/* Where request bytes for the server go: its HTTP/1.1 connection's
 * output, or its HTTP/2 stream's queue (DATA); NULL: no server yet. */
struct evbuffer *http_server_out(struct http_txn *t);
/* Closes t->srv: to the pool when reusable and nothing is left in it. */
void	http_server_drop(struct http_txn *t, bool reusable);
/* The server sent bytes after a complete response: dropped, and its
 * connection is not reused. */
void	http_unasked_bytes(struct http_txn *t, struct evbuffer *sin);
/* Response bytes from t's HTTP/1.1 server: heads, then body. */
void	http_server_input(struct http_txn *t);
/* t's server connection ended (EOF) or failed (err != 0). */
void	http_server_gone(struct http_txn *t, int err);
/* The events of the server connection http_server_open took (arg: its
 * transaction). */
void	http_server_rd_cb(struct px_conn *c, void *arg);
void	http_server_wr_cb(struct px_conn *c, void *arg);
/* The request head is in head_out and dst is known: picks a server
 * connection and sends. */
void	http_dispatch(struct http_txn *t, const struct sockaddr *dst);
/* Forward mode: resolves t->host, then http_dispatch (or a 502). */
void	http_resolve(struct http_txn *t, uint16_t port);
/* A replayable request whose reused connection died unanswered goes again
 * on a new connection (or, when none can be opened, is answered 502):
 * true. False, with t->srv untouched, when the request cannot be
 * retried. */
bool	http_retry(struct http_txn *t);
/* px_analyser.on_worker_exit: the worker's resolver. */
void	http_worker_exit(void);

/* ---- http_grpc.c ------------------------------------------------------- */

struct http_head;
/* A request head was parsed: t->grpc says whether it is a gRPC call, and
 * its grpc-timeout sets t->grpc_deadline_ms. 0, or -1 for a malformed
 * grpc-timeout (*why). */
int	http_grpc_request(struct http_txn *t, const struct http_head *m,
	    const char **why);
/* ms, or less if the call's grpc-timeout runs out sooner (0: none). */
uint64_t http_grpc_bound(const struct http_txn *t, uint64_t ms);
/* The call's grpc-timeout ran out. */
bool	http_grpc_expired(const struct http_txn *t);
uint64_t http_grpc_now_ms(void);
/* A trailers-only gRPC answer for what would have been HTTP status
 * (sets t->grpc_status), why as grpc-message. */
void	http_grpc_reply(struct http_txn *t, struct evbuffer *out,
	    int status, const char *why, bool keep);

/* ---- http_reply.c ------------------------------------------------------ */

/* A reply of proxyd's own (an error page, a 429, a challenge, a gRPC
 * trailers-only answer) as a parsed response head: its status, reason and
 * fields in order with their ids, the values kept in vals until it is
 * sent through the transaction's writer (http_client), which makes it
 * HTTP/1.1 bytes or HTTP/2 frames alike. On the caller's stack. */
#define HTTP_OWN_FIELDS	8
struct http_own {
	struct evbuffer		*vals;		/* NULL: out of memory */
	size_t			 off[HTTP_OWN_FIELDS];	/* of each value */
	struct http_head	 m;		/* last: mostly unused */
};
void	http_own_start(struct http_own *o, int status, const char *reason);
/* A field, its value (val, vlen) copied. */
void	http_own_add(struct http_own *o, const char *name, const char *val,
	    size_t vlen);
void	http_own_addf(struct http_own *o, const char *name, const char *fmt,
	    ...) __attribute__((format(printf, 3, 4)));
/* Content-Length: n (and the head's content_length). */
void	http_own_length(struct http_own *o, size_t n);
/* Sends the head, then body (NULL: none; never to a HEAD request) and,
 * with end, the response's end, to out through the writer; frees vals.
 * Without end the response goes on (CONNECT's 200: the tunnel). */
void	http_own_send(struct http_txn *t, struct http_own *o,
	    struct evbuffer *out, struct evbuffer *body, bool end);

/* Answers status with an error page, logs, and ends the client connection
 * once the page is written (a reset if part of a response went out). */
void	http_error(struct http_txn *t, int status, const char *why);
/* 429 with Retry-After (<source-limits requests=>); keep: the connection
 * stays open (Connection: keep-alive), else it says close. */
void	http_reply_limited(struct http_txn *t, uint32_t retry_s, bool keep);
size_t	http_limit_refusal(const void *pol, const char *limit,
	    const char *whose, const char *rule, uint32_t retry_s, uint64_t id,
	    char *buf, size_t size);
/* CONNECT: the server accepted; tells the client. */
void	http_reply_established(struct http_txn *t);

#endif
