/* HTTP/2 towards servers (server-h2="yes"): the calls the http engine
 * makes into http_h2_origin.c and http_h2_origin_stream.c. The engine
 * hands it a transaction's parsed request with what the head it would
 * send an HTTP/1.1 server is made of (http_h2o_prepare: the
 * request-header rules applied from the parsed fields, never its own
 * text parsed again), and gets
 * the response back as a parsed struct http_head filled from nghttp2's
 * header callbacks, judged by the same code that judges an HTTP/1.1
 * server's (http_judge_response), and its body as DATA ending with
 * END_STREAM. Internal to the http analyser. */
#ifndef HTTP_H2_ORIGIN_H
#define HTTP_H2_ORIGIN_H

#include <stdbool.h>

struct evbuffer;
struct http_head;
struct http_state;
struct http_txn;
struct sockaddr;

struct http_req_ctx;

/* The header list of the request m (with what r says of it, as
 * http_head_request takes them) for a stream, kept with the
 * transaction until the next request's (a request that fails over to
 * HTTP/1.1 goes as its text head). On failure the dispatch fails. */
void	http_h2o_prepare(struct http_txn *t, const struct http_head *m,
	    const struct http_req_ctx *r);
/* The session ends: the list goes. */
void	http_h2o_close(struct http_txn *t);
/* This transaction goes to its server dst over HTTP/2: server-h2="yes";
 * "auto" under TLS unless dst picked http/1.1 lately (ALPN). */
bool	http_h2o_wanted(const struct http_txn *t,
	    const struct sockaddr *dst);
/* The stream's connection agreed on h2 (TLS: ALPN): body bytes may go
 * (until then they wait in the client's input, for an HTTP/1.1
 * fallback under "auto"). True without a stream. */
bool	http_h2o_ready(const struct http_txn *t);
/* Sends the prepared request to dst on a stream of one of the
 * worker's h2 connections to dst (a new one when all are full, up to
 * server-pool). 0, or -1 (nothing sent; the caller answers 502). */
int	http_h2o_dispatch(struct http_txn *t, const struct sockaddr *dst);
/* Where request body bytes go (DATA, framing removed). */
struct evbuffer *http_h2o_req_buf(struct http_txn *t);
/* The request's trailer section t (already through the rules): sent as a
 * trailing HEADERS once the body is. */
void	http_h2o_req_trailers(struct http_txn *t, const struct http_head *tr);
/* Request body bytes were added (or the request ended): sends them. */
void	http_h2o_req_more(struct http_txn *t);
/* The whole request left for the server (or the stream is over). */
bool	http_h2o_request_sent(const struct http_txn *t);
/* The session's timer fired: true when it was the wait of a stream whose
 * response is whole for its request's rest (the server's window): armed
 * again while body bytes go, else the stream is cancelled and the
 * transaction ends as an early response (the request's rest unsent). */
bool	http_h2o_timer(struct http_txn *t);
/* The stream's response: head, body, end, failure; after every event. */
void	http_h2o_input(struct http_txn *t);
/* The transaction leaves its stream (reset if still open). */
void	http_h2o_drop(struct http_txn *t);
/* The worker ends: its connections are closed. */
void	http_h2o_worker_exit(void);

#endif
