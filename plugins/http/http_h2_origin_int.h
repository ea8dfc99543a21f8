/* HTTP/2 towards servers, inside: what http_h2_origin.c (the worker's
 * shared connections) and http_h2_origin_stream.c (a transaction's
 * stream: its request out, its response in) both hold. Only those two
 * include it; the engine's interface is http_h2_origin.h. */
#ifndef HTTP_H2_ORIGIN_INT_H
#define HTTP_H2_ORIGIN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <nghttp2/nghttp2.h>

#include "conn.h"

struct event;
struct evbuffer;
struct http_state;
struct http_txn;

/* Streams on a connection before the server's SETTINGS say how many. */
#define H2O_DEFAULT_STREAMS	100
/* nghttp2's output taken per write round. */
#define H2O_OUT_HIGH		(64 * 1024)
#define H2O_READ_MAX		(64 * 1024)
/* Times a request goes again after streams refused unprocessed. */
#define H2O_REFUSALS		4

struct h2o_conn;

struct h2o_field {
	uint32_t	 no, nl, vo, vl;
};

/* A header list being gathered (the request's fields, its trailers, a
 * response's header block): names (lower-cased for a request) and values
 * in one buffer, where each is in it, grown to what it holds; for a
 * request, then the nghttp2_nv array pointing there. */
struct h2o_list {
	char		*buf;
	size_t		 len, cap;
	struct h2o_field *f;
	unsigned	 n, fcap;
	unsigned	 npseudo;	/* the last ones: they go first */
	int		 authority;	/* the Host field's index; -1 */
	bool		 failed;	/* out of memory */
	nghttp2_nv	*nv;
	size_t		 nnv;
};

/* A header block arriving (a response head, or trailers), in a list (a
 * stream keeps its blocks, not a struct http_head of HTTP_MAX_HEADERS
 * fields: one per worker is made from a block when the engine reads it,
 * h2o_block_head). */
struct h2o_block {
	struct h2o_list	 l;
	int		 status;
	const char	*bad;		/* over a limit, malformed: why */
	struct h2o_block *next;		/* the next interim head queued */
};

/* Interim heads (100, 103) held for the client at once, oldest first:
 * past this many the oldest is dropped (a server's flood of them). */
#define H2O_INTERIM_MAX	8

struct http_h2o_stream {
	TAILQ_ENTRY(http_h2o_stream) link;
	struct h2o_conn		*conn;
	struct http_txn		*t;		/* NULL once it let go */
	int32_t			 id;
	/* Its body: bytes waiting for the stream's window. */
	struct evbuffer		*req;
	bool			 req_body;	/* a body follows the head */
	bool			 req_end;	/* the body is all in req */
	bool			 req_deferred;	/* the data source waits */
	bool			 req_done;	/* END_STREAM (or trailers) sent */
	struct h2o_list		*tl;		/* the request's trailers */
	/* The response. */
	struct h2o_block	*blk;		/* the block arriving */
	bool			 blk_trailers;	/* blk is the trailers */
	bool			 got_head;	/* the final head is whole */
	bool			 head_ended;	/* it came with END_STREAM */
	bool			 head_ready;	/* not judged yet */
	struct h2o_block	*iblk;		/* 1xx heads not passed on yet,
						 * oldest first (next) */
	unsigned		 niblk;		/* how many */
	struct h2o_block	*ipassed;	/* the last one passed on */
	struct h2o_block	*tblk;		/* the trailers, once whole */
	struct h2o_block	*hblk;		/* the final head (or a bad
						 * block: why in its bad) */
	struct evbuffer		*body;		/* DATA not taken yet */
	bool			 got_bytes;	/* any response frame */
	bool			 ended;		/* END_STREAM received */
	bool			 closed;
	uint32_t		 error;		/* RST_STREAM's code, or the
						 * connection's failure */
	bool			 failed;
	bool			 refused;	/* not answered: a replayable
						 * request may go again */
	/* REFUSED_STREAM (or past a GOAWAY's last stream): the server did
	 * not process it (RFC 9113 8.7), any request may go again while
	 * none of its body left req. */
	bool			 unprocessed;
	uint64_t		 req_sent;	/* body bytes given to nghttp2 */
	unsigned		 refusals;	/* streams of this request refused
						 * unprocessed before this one */
	/* A copy of those while no response came, up to `buffer` (NULL
	 * once over it): what a refused stream sends again. */
	struct evbuffer		*replay;
	size_t			 replay_max;
	bool			 notify;	/* h has something new */
	/* The response is whole, the request's rest waits: req_sent when
	 * the timer was last armed for it (request-timeout). */
	bool			 waiting;
	uint64_t		 wait_sent;
};

TAILQ_HEAD(h2o_stream_list, http_h2o_stream);

/* A TLS name as the pool keys it: a DNS name is at most 253 bytes, so a
 * whole SNI always fits and two names never share a truncated key. */
#define H2O_NAME_MAX	256

struct h2o_conn {
	TAILQ_ENTRY(h2o_conn)	 link;
	struct px_conn		 io;
	int			 fd;		/* io's socket: ours to close */
	nghttp2_session		*ng;
	struct event		*idle;
	struct sockaddr_storage	 dst;
	struct h2o_stream_list	 streams;
	unsigned		 nstreams;
	unsigned		 busy;		/* in one of its callbacks */
	uint64_t		 idle_ms;
	bool			 connected;
	bool			 tls;		/* TLS towards the server */
	/* What else it was made with (px_session_upstream_tls: the TLS
	 * context's id, never its address, which a reload may give another
	 * context; _mark): only sessions alike share it. */
	uint64_t		 tls_ctx;
	int64_t			 mark;
	bool			 unverified;	/* a chain that failed may do */
	bool			 offer_h1;	/* auto: ALPN "h2,http/1.1" */
	bool			 ready;		/* h2 agreed (ALPN, or h2c) */
	char			 name[H2O_NAME_MAX];	/* the TLS name checked; "" */
	char			 why[96];	/* why it failed, for the 502 */
	bool			 dead;
	bool			 goaway;
	bool			 listed;	/* in h2o_conns */
};

TAILQ_HEAD(h2o_conn_list, h2o_conn);

/* In http_h2_origin.c (the connections). */
/* Runs nghttp2's output onto c's socket while there is room. */
void	http_h2o_conn_flush(struct h2o_conn *c);
/* A connection to dst with a free stream slot; a new one (fresh: never
 * an existing one) when all are full and server-pool allows, else the
 * least loaded. NULL: none could be made. */
struct h2o_conn *http_h2o_conn_pick(struct http_txn *t,
	    const struct sockaddr *dst, bool fresh, bool *reused);
/* st leaves its connection (reset if still open). */
void	http_h2o_stream_detach(struct http_h2o_stream *st);

/* In http_h2_origin_stream.c (the streams). */
/* The callbacks through which nghttp2 gives a connection's frames to its
 * streams. */
void	http_h2o_callbacks(nghttp2_session_callbacks *cb);

#endif
