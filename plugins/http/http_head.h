/* The heads proxyd sends on: built from a parsed head (http_parse.h), the
 * <http> policy and the few facts of the transaction a head does not
 * carry. Pure functions: no session, no I/O, only bytes appended to an
 * evbuffer, so what goes on the wire is unit tested byte for byte
 * (tests/unit/http_head_test.c).
 *
 * Both writers send HTTP/1.1, write the framing fields in one canonical
 * form (Content-Length in decimal without leading zeros; one
 * Transfer-Encoding, its codings in lower case), drop the fields whose
 * names have '_' (unless underscore-headers="pass"), drop the hop-by-hop
 * fields (RFC 9110 7.6.1:
 * Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade, and
 * every field Connection names), apply the header rules (the first
 * accept, drop or change rule naming a field decides it, a field no rule
 * names gets the list's default, reqh_dflt or resph_dflt; inserts come
 * after the fields, in rule order),
 * then add Via and their own Connection. The *_fields writers give the
 * same fields one by one instead, for an HTTP/2 server or client
 * (without Transfer-Encoding and Connection). */
#ifndef HTTP_HEAD_H
#define HTTP_HEAD_H

#include <stdbool.h>
#include <stddef.h>

#include "http.h"

struct evbuffer;
struct sockaddr;

/* What a request head needs beyond the parsed head and the policy. */
struct http_req_ctx {
	const char		*target;	/* the request target sent on */
	size_t			 tlen;
	const char		*query;		/* sent after target and '?'; */
	size_t			 qlen;		/* NULL: no '?' */
	/* Host to add when the client sent none: host, or dst when host is
	 * "" (HTTP/1.1 to the server requires one). */
	const char		*host;
	const struct sockaddr	*dst;
	const struct sockaddr	*client;	/* for X-Forwarded-For */
	bool			 upgrade;	/* its Upgrade was accepted */
	/* The authority of an absolute-form target: sent as Host in place
	 * of the client's (RFC 9112 3.2.2). NULL: origin form. */
	const char		*authority;
	size_t			 alen;
	/* Range, If-Range, Request-Range not sent on: the whole body is
	 * fetched, to be scanned whole (<scan partial="refuse">). */
	bool			 whole;
	/* A field never sent on: the credentials proxyd checked itself
	 * (<auth>: Proxy-Authorization or Authorization). NULL: none. */
	const char		*drop;
};

/* What a response head needs beyond the parsed head and the policy. */
struct http_resp_ctx {
	bool	dechunk;	/* to an HTTP/1.0 client: chunks removed, the
				 * body ends with the connection */
	bool	client_keep;	/* the client connection stays open */
	bool	client_10;	/* the client speaks HTTP/1.0 */
	/* Whole field lines of the proxy's own to add ("Name: value\r\n":
	 * Negotiate's final token, <auth>); NULL: none. */
	const char *extra;
	/* The head is proxyd's own reply (an error page, a challenge, a
	 * 429, a gRPC trailers-only answer): its fields go as they are, in
	 * order, without the rules, Via or a Connection of the writer's
	 * (the head carries its own); the others above are not read. */
	bool	own;
};

/* Where the *_fields writers give each field, whole: name and value as
 * the text writers would write them (the name as the client spelt it or
 * the rule names it). A NULL name: out of memory, the list is not
 * whole. */
typedef void (*http_field_fn)(void *arg, const char *name, size_t nlen,
    const char *val, size_t vlen);

/* The request head for the server: m's method, r's target, m's fields
 * through the request-header rules, then Host (if m has none),
 * X-Forwarded-For (x-forwarded-for=: the client's address appended to
 * m's, or replacing it), Via, and "Connection: upgrade" (an accepted
 * Upgrade) or "Connection: close" (keepalive-server="no"). */
void	http_head_request(struct evbuffer *out, const struct http_head *m,
	    const struct http_policy *p, const struct http_req_ctx *r);
/* The fields http_head_request writes, to fn one by one in the same
 * order, for an HTTP/2 server: without Transfer-Encoding and Connection
 * (RFC 9113 8.2.2: framing and the connection are HTTP/2's); the caller
 * makes the request line :method and :path, Host :authority. */
void	http_head_request_fields(const struct http_head *m,
	    const struct http_policy *p, const struct http_req_ctx *r,
	    http_field_fn fn, void *arg);
/* The response head for the client: m's status line, m's fields through
 * the response-header rules (Transfer-Encoding dropped when dechunking a
 * final response; Upgrade kept on a 101), then Via and the Connection the
 * client needs: upgrade (101), close (not kept), keep-alive (a kept
 * HTTP/1.0 client). A head with minor 2 came from an HTTP/2 server (its
 * fields, not a status line): Via says 2. */
void	http_head_response(struct evbuffer *out, const struct http_head *m,
	    const struct http_policy *p, const struct http_resp_ctx *r);
/* The head of proxyd's own reply (r->own): "HTTP/1.1 " m's status and
 * reason, m's fields as they are, the empty line. */
void	http_head_own(struct evbuffer *out, const struct http_head *m);
/* The fields http_head_response writes, to fn one by one in the same
 * order, for an HTTP/2 client: without Transfer-Encoding and Connection
 * (RFC 9113 8.2.2); the caller makes the status :status. r->extra's
 * lines are given as fields; proxyd's own reply's (r->own) as they are,
 * without Connection, Keep-Alive and Transfer-Encoding. */
void	http_head_response_fields(const struct http_head *m,
	    const struct http_policy *p, const struct http_resp_ctx *r,
	    http_field_fn fn, void *arg);
/* The end of a chunked body: the last chunk ("0\r\n"), the trailer
 * fields of t when trailers="pass" (through the request- or
 * response-header rules, without their inserts; never framing, routing,
 * hop-by-hop, Content-*, authentication or cookie fields, never a name
 * with '_' unless underscore-headers="pass"), and the empty line. */
void	http_head_trailers(struct evbuffer *out, const struct http_head *t,
	    const struct http_policy *p, bool request);
/* The trailer fields http_head_trailers writes (none unless
 * trailers="pass"), to fn one by one: an HTTP/2 trailing HEADERS. */
void	http_head_trailer_fields(const struct http_head *t,
	    const struct http_policy *p, bool request, http_field_fn fn,
	    void *arg);
/* A copy of m that owns its bytes (method, target, reason, fields) in
 * one allocation (free() it): a parsed head kept after the buffer it
 * points into is gone or moved (<auth>'s replay). Only m's nhdr fields
 * are there. NULL: out of memory. */
struct http_head *http_head_dup(const struct http_head *m);
/* Splits an absolute-form target "http://authority[/path][?query]"
 * (RFC 9112 3.2.2) into its authority and the origin-form target sent on
 * ("/" when it has neither; "?query" alone when it has no path, which
 * http_head_request sends as "/?query"). false when it is not one. */
bool	http_head_origin_form(const char *target, size_t tlen,
	    const char **auth, size_t *alen, const char **path, size_t *plen);

#endif
