/* HTTP/2 towards clients: CONNECT streams as tunnels (RFC 9113 8.5) on a
 * leg, for the services whose streams are still legs (<scan>, <content>,
 * <audit>:
 * elsewhere a CONNECT is a transaction whose tunnel is in the engine,
 * http_h2_stream.c). Also the :protocol check and the sec-websocket-key
 * drop of the fields kept for a leg, which every stream runs.
 *
 * A CONNECT stream's leg gets "CONNECT host:port HTTP/1.1", judged there
 * as an HTTP/1.1 client's (forward mode only, ports, servers, zones); the
 * leg's session then hands its two sockets to the core's relay, so past
 * its 2xx the leg carries raw bytes: the client's DATA go into it as they
 * are (no chunking; windows open as the leg takes them), what it sends
 * back goes out as DATA (at most HTTP_H2_STREAM_BUF held here, as for any
 * response body: http_h2_resp.c reads it as a body up to EOF).
 *
 * Until that 2xx the client's DATA wait here, bounded by the stream's
 * window: written earlier, a refused CONNECT's payload would be read by
 * the leg as the next request. Half-closes cross both ways: END_STREAM
 * shuts the leg's write side (the relay passes the FIN on), the server's
 * FIN reaches us as the leg's EOF and ends the stream. The relay closing
 * the leg while we still write is an error on the TCP side, and the
 * stream is reset with CONNECT_ERROR.
 *
 * Resets cross too (RFC 9113 8.5), though a socketpair cannot carry
 * one: the client's RST_STREAM ends the leg's session as a TCP client's
 * reset would (px_session_leg_reset: the server gets an RST), and a leg
 * whose relay is cut on its server's side (px_session_relay_cut) marks
 * its stream as its session closes, before the socketpair does
 * (http_h2_leg_closing), so that its EOF, even after our FIN, is taken
 * for the reset it is: RST_STREAM(CONNECT_ERROR), not END_STREAM.
 *
 * An extended CONNECT (RFC 8441: :protocol, offered in SETTINGS where the
 * policy lets a WebSocket Upgrade through) is the same tunnel behind an
 * HTTP/1.1 Upgrade: the leg gets a GET with Upgrade: <protocol> (and the
 * Sec-WebSocket-Key an HTTP/1.1 server wants, which h2 clients do not
 * send), judged by <upgrade>, and its 101 is the stream's 200. */
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "http_h2_int.h"

/* :protocol's value: an Upgrade token (RFC 8441 4), so that it goes into
 * the leg's Upgrade field as it is. 0, or -1 (the stream is malformed). */
int
h2_tunnel_protocol(struct h2_stream *st, const uint8_t *v, size_t len)
{
	size_t i;

	if (len == 0 || len >= sizeof(st->protocol))
		return -1;
	for (i = 0; i < len; i++)
		if (!http_is_tchar(v[i]) && v[i] != '/')
			return -1;
	memcpy(st->protocol, v, len);
	st->protocol[len] = '\0';
	return 0;
}

/* An extended CONNECT's Upgrade fields for the leg. 0, or -1. */
int
h2_tunnel_upgrade_fields(struct h2_stream *st)
{
	unsigned char nonce[16], key[32];

	if (st->protocol[0] == '\0')
		return 0;
	if (evbuffer_add_printf(st->fields, "Upgrade: %s\r\n"
	    "Connection: Upgrade\r\n", st->protocol) == -1)
		return -1;
	if (strcasecmp(st->protocol, "websocket") != 0)
		return 0;
	/* RFC 6455 4.1: a fresh nonce; its Accept goes back to nobody. */
	if (RAND_bytes(nonce, sizeof(nonce)) != 1)
		return -1;
	EVP_EncodeBlock(key, nonce, sizeof(nonce));
	return evbuffer_add_printf(st->fields, "Sec-WebSocket-Key: %s\r\n",
	    key) == -1 ? -1 : 0;
}

/* The :status the leg's status becomes: an extended CONNECT's 101 is its
 * 200. Any other 2xx to it means the Upgrade did not happen (an origin
 * answering the GET): no status says so to a client that would take it
 * for the tunnel, -1 (the stream is reset). */
int
h2_tunnel_status(const struct h2_stream *st, int status)
{
	if (!st->tunnel || st->protocol[0] == '\0')
		return status;
	if (status == 101)
		return 200;
	return status >= 200 && status <= 299 ? -1 : status;
}

/* Where the client's DATA for st go now. */
struct evbuffer *
h2_tunnel_out(struct h2_stream *st)
{
	/* A transaction's request body (or its tunnel's bytes), to be
	 * pumped (http_h2_stream.c); before it starts, with its HEADERS'
	 * read, kept for it. */
	if (st->tx != NULL)
		return h2_txn_in(st);
	if (st->txn_ready)
		return st->early;
	if (st->tunnel && !st->tunnel_up)
		return st->held;
	return st->leg_open ? st->leg.out : st->early;
}

/* Whether the leg may get its FIN: never before the tunnel is up (the
 * leg's analyser would take it as the client leaving). */
bool
h2_tunnel_may_shut(const struct h2_stream *st)
{
	return !st->tunnel || st->tunnel_up;
}

/* The leg answered st's CONNECT with status (final). A 2xx opens the
 * tunnel: the held DATA and FIN go to the leg, and everything after the
 * head is the server's bytes until EOF. Otherwise the response is an
 * ordinary one and the held DATA are dropped. */
void
h2_tunnel_response(struct h2_stream *st, int status)
{
	size_t n = evbuffer_get_length(st->held);

	if (status < 200 || status > 299) {
		evbuffer_drain(st->held, n);
		/* Less when writing the head opened the window early. */
		if (n > st->unconsumed)
			n = st->unconsumed;
		nghttp2_session_consume(st->c->ng, st->id, n);
		st->unconsumed -= n;
		st->shut = true;	/* later DATA: dropped, window opened */
		return;
	}
	st->tunnel_up = true;
	st->body_kind = HTTP_BODY_CLOSE;
	evbuffer_add_buffer(st->leg.out, st->held);
	h2_leg_flush(st);
}

/* The leg's read gave n (0: EOF, -1: an error) on a tunnel that is up:
 * whether that is the TCP side failing rather than the server's FIN. The
 * relay passes a FIN on as a shutdown and keeps the leg open until ours
 * comes; it closes the leg whole only when the tunnel ends, so a closed
 * leg before our FIN is an end the server did not choose cleanly (reset,
 * error, idle-timeout). */
bool
h2_tunnel_failed(const struct h2_stream *st, ssize_t n)
{
	struct pollfd pfd = { .fd = st->fd, .events = POLLOUT };

	if (n < 0 || st->leg_failed)
		return true;
	if (st->shut)
		return false;
	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR));
}

/* The client reset stream id (RST_STREAM, code). A tunnel's server
 * connection is reset in turn, not closed with a FIN (RFC 9113 8.5: a
 * CONNECT_ERROR MUST be passed on as a TCP RST; any other code, CANCEL
 * say, is no clean end either). */
void
h2_tunnel_client_reset(struct http_h2 *c, int32_t id, uint32_t code)
{
	struct h2_stream *st = nghttp2_session_get_stream_user_data(c->ng, id);
	char why[48];

	if (st == NULL || !st->tunnel || st->leg_id == 0)
		return;
	snprintf(why, sizeof(why), "RST_STREAM(%s)",
	    nghttp2_http2_strerror(code));
	h2_leg_reset(st, why);
}

/* A leg's session is closing: a tunnel whose relay was cut on its
 * server's side (a reset, an error, a timeout) marks its stream. Only a
 * stream's leg relays (a kept one is idle in keep-alive), so its parent
 * ref is that stream's &st->peer. */
void
http_h2_leg_closing(struct http_state *h)
{
	struct h2_stream *st;

	if (h->h2_parent_ref == NULL || *h->h2_parent_ref != h ||
	    !px_session_relay_cut(h->s))
		return;
	st = (struct h2_stream *)(void *)((char *)h->h2_parent_ref -
	    offsetof(struct h2_stream, peer));
	st->leg_failed = true;
}

/* Whether a request field of st is left out of its leg's head. An
 * extended CONNECT's sec-websocket-key: RFC 8441 5 leaves the key out of
 * the h2 handshake (:protocol does its work), so it is nothing the client
 * may rely on, and the leg's head carries the fresh one
 * h2_tunnel_upgrade_fields makes for the HTTP/1.1 server. Two keys
 * there (RFC 6455 11.3.1: it appears once) would be refused by a careful
 * server or, worse, judged by one and answered by the other. Dropped
 * rather than PROTOCOL_ERROR: RFC 8441 does not make such a request
 * malformed (RFC 9113 8.1.1 lists what is), and the key means nothing on
 * this hop. */
bool
h2_tunnel_drops(const struct h2_stream *st, const uint8_t *name, size_t nlen)
{
	static const char key[] = "sec-websocket-key";

	return strcasecmp(st->protocol, "websocket") == 0 &&
	    nlen == sizeof(key) - 1 && memcmp(name, key, nlen) == 0;
}
