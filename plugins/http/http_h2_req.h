/* An HTTP/2 request's head made a parsed head (struct http_head) from its
 * decoded fields, without HTTP/1.1 text and without a second parse: what
 * an HTTP/2 stream that is a transaction of its client's session is
 * judged by (issue 36). The head is the one the same request's HTTP/1.1
 * text would parse into, field for field, and is
 * judged by the parser's own rules (http_head_add_field, http_parse.h),
 * with the line and byte limits counted as that text would have them.
 * Pure: no session, no nghttp2 (its header callbacks feed
 * http_h2_req_add). */
#ifndef HTTP_H2_REQ_H
#define HTTP_H2_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http_parse.h"

struct http_h2_field {
	uint32_t	no, nl;		/* name: offset in buf, length */
	uint32_t	vo, vl;		/* value */
};

/* A request header block as it is decoded, kept per stream until it is
 * whole: its bytes in one buffer, the pseudo-headers apart, the cookie
 * crumbs (RFC 9113 8.2.3) apart to be joined. All zero: empty. */
struct http_h2_req {
	char			*buf;
	size_t			 len, cap;
	struct http_h2_field	*f;
	unsigned		 n, fcap;
	/* Indexes into f of :method, :scheme, :authority, :path, :protocol
	 * (RFC 8441), the host field and each cookie crumb's first and last;
	 * -1 none (set by http_h2_req_init). */
	int			 method, scheme, authority, path, protocol, host;
	/* A pseudo-header not known, or one twice: malformed, the stream is
	 * to be reset (PROTOCOL_ERROR, as today), no head made. */
	bool			 bad;
	/* An extended CONNECT's Sec-WebSocket-Key for the HTTP/1.1 server
	 * (base64 of a fresh nonce: the caller's, this file makes no random
	 * bytes); "" none. */
	char			 ws_key[32];
	bool			 failed;	/* out of memory */
};

void	http_h2_req_init(struct http_h2_req *r);
void	http_h2_req_free(struct http_h2_req *r);
/* One decoded field of the block (nghttp2 checked it: lower-case name,
 * no connection-specific field). 0, or -1 out of memory. */
int	http_h2_req_add(struct http_h2_req *r, const char *name, size_t nlen,
	    const char *val, size_t vlen);
/* The block is whole: m is its head (pointing into r, valid while r is
 * not added to or freed). forward: the service is in forward mode (the
 * target is absolute: scheme://authority path); unsized: a body follows
 * without content-length (its DATA go on as chunks: Transfer-Encoding:
 * chunked is added, as an HTTP/1.1 client would send it). An extended CONNECT (:protocol)
 * is the HTTP/1.1 Upgrade it stands for: GET :path with Upgrade:
 * <protocol>, Connection: Upgrade and, for websocket, r->ws_key as its
 * only Sec-WebSocket-Key (a client's own is dropped: RFC 8441 5 leaves
 * it out of the h2 handshake, and two keys are refused by a careful
 * server, RFC 6455 11.3.1). 0, or the status to refuse the
 * request with (*why), as the parse of its HTTP/1.1 text would: 400, 414,
 * 431, 501, 505. */
int	http_h2_req_head(struct http_h2_req *r, bool forward, bool unsized,
	    const struct http_limits *lim, struct http_head *m,
	    const char **why);

#endif
