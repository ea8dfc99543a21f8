/* gRPC (HTTP/2, content-type application/grpc) as the http analyser sees
 * it: which requests are gRPC calls, their grpc-timeout, and the shape of
 * proxyd's own answers to them. A gRPC client reads a status from
 * grpc-status, never from :status: a refusal or a failed server answered
 * with an HTML page is a transport error to it ("Received http2 header
 * with status: 403"), so such answers are trailers-only responses
 * (gRPC's PROTOCOL-HTTP2.md): 200, content-type application/grpc,
 * grpc-status and grpc-message, no body, sent through the transaction's
 * writer as a head and its end (http_own_send). The HTTP/2 front makes
 * that one HEADERS frame with END_STREAM (http_h2_txn.c: no body, no
 * DATA). */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>

#include "http_head.h"
#include "http_int.h"

/* gRPC status codes (gRPC's statuscodes.md). */
enum http_grpc_code {
	HTTP_GRPC_OK = 0,
	HTTP_GRPC_DEADLINE_EXCEEDED = 4,
	HTTP_GRPC_PERMISSION_DENIED = 7,
	HTTP_GRPC_RESOURCE_EXHAUSTED = 8,
	HTTP_GRPC_UNIMPLEMENTED = 12,
	HTTP_GRPC_INTERNAL = 13,
	HTTP_GRPC_UNAVAILABLE = 14,
};

uint64_t
http_grpc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* application/grpc, application/grpc+proto, application/grpc;...: not
 * application/grpc-web (whose answers are another shape). */
static bool
http_grpc_type(const char *v, size_t len)
{
	static const char t[] = "application/grpc";
	size_t tl = sizeof(t) - 1;

	while (len != 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
		len--;
	if (len < tl || strncasecmp(v, t, tl) != 0)
		return false;
	return len == tl || v[tl] == '+' || v[tl] == ';' || v[tl] == ' ';
}

/* grpc-timeout: 1 to 8 digits and a unit, H M S m u n (PROTOCOL-HTTP2.md
 * "Timeout"). In ms, rounded up (a 1 ns deadline is one that runs out);
 * -1 when malformed. */
static int64_t
http_grpc_timeout(const char *v, size_t len)
{
	uint64_t n = 0, ms;
	size_t i;

	if (len < 2 || len > 9)
		return -1;
	for (i = 0; i < len - 1; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	switch (v[len - 1]) {
	case 'H': ms = n * 3600 * 1000; break;
	case 'M': ms = n * 60 * 1000; break;
	case 'S': ms = n * 1000; break;
	case 'm': ms = n; break;
	case 'u': ms = (n + 999) / 1000; break;
	case 'n': ms = (n + 999999) / 1000000; break;
	default: return -1;
	}
	return (int64_t)ms;
}

int
http_grpc_request(struct http_txn *t, const struct http_head *m,
    const char **why)
{
	const struct http_hdr *timeout = NULL;
	unsigned i;
	int64_t ms;

	t->grpc = false;
	t->grpc_status = -1;
	t->grpc_deadline_ms = 0;
	for (i = 0; i < m->nhdr; i++) {
		const struct http_hdr *f = &m->hdr[i];

		if (http_token_eq(f->name, f->nlen, "content-type") &&
		    http_grpc_type(f->val, f->vlen))
			t->grpc = true;
		else if (http_token_eq(f->name, f->nlen, "grpc-timeout"))
			timeout = f;
	}
	if (!t->grpc || timeout == NULL)
		return 0;
	if ((ms = http_grpc_timeout(timeout->val, timeout->vlen)) < 0) {
		*why = "malformed grpc-timeout";
		return -1;
	}
	/* 0 means none in the timer's terms: a deadline already gone is
	 * one that runs out at once. */
	t->grpc_deadline_ms = http_grpc_now_ms() + (uint64_t)ms;
	return 0;
}

uint64_t
http_grpc_bound(const struct http_txn *t, uint64_t ms)
{
	uint64_t now, left;

	if (!t->grpc || t->grpc_deadline_ms == 0)
		return ms;
	now = http_grpc_now_ms();
	left = t->grpc_deadline_ms > now ? t->grpc_deadline_ms - now : 1;
	return ms == 0 || left < ms ? left : ms;
}

bool
http_grpc_expired(const struct http_txn *t)
{
	return t->grpc && t->grpc_deadline_ms != 0 &&
	    http_grpc_now_ms() >= t->grpc_deadline_ms;
}

/* The gRPC status for what would have been an HTTP error status: a
 * refusal is PERMISSION_DENIED, a limit RESOURCE_EXHAUSTED (as gRPC's
 * own message size limits), a request that is not well formed INTERNAL
 * (gRPC's HTTP-to-gRPC mapping for 400), a server that failed
 * UNAVAILABLE, one that did not answer in time DEADLINE_EXCEEDED. */
static int
http_grpc_code(int status)
{
	switch (status) {
	case 400: return HTTP_GRPC_INTERNAL;
	case 408: case 504: return HTTP_GRPC_DEADLINE_EXCEEDED;
	case 413: case 414: case 429: case 431:
		return HTTP_GRPC_RESOURCE_EXHAUSTED;
	case 501: return HTTP_GRPC_UNIMPLEMENTED;
	case 502: case 503: return HTTP_GRPC_UNAVAILABLE;
	default:
		return status < 500 ? HTTP_GRPC_PERMISSION_DENIED :
		    HTTP_GRPC_INTERNAL;
	}
}

void
http_grpc_reply(struct http_txn *t, struct evbuffer *out, int status,
    const char *why, bool keep)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *c;
	struct http_own o;
	struct evbuffer *msg;

	t->grpc_status = http_grpc_code(status);
	http_own_start(&o, 200, "OK");
	http_own_add(&o, "Content-Type", "application/grpc", 16);
	http_own_addf(&o, "grpc-status", "%d", t->grpc_status);
	/* Percent-encoded (PROTOCOL-HTTP2.md "Responses"): every byte
	 * outside printable ASCII, and '%' itself. */
	if ((msg = evbuffer_new()) != NULL) {
		for (c = (const unsigned char *)why; *c != '\0'; c++) {
			char e[3] = { '%', hex[*c >> 4], hex[*c & 15] };

			if (*c >= 0x20 && *c < 0x7f && *c != '%')
				evbuffer_add(msg, c, 1);
			else
				evbuffer_add(msg, e, 3);
		}
		http_own_add(&o, "grpc-message",
		    (const char *)evbuffer_pullup(msg, -1),
		    evbuffer_get_length(msg));
		evbuffer_free(msg);
	}
	http_own_length(&o, 0);
	http_own_add(&o, "Connection", keep ? "keep-alive" : "close",
	    keep ? 10 : 5);
	http_own_add(&o, "Cache-Control", "no-store", 8);
	/* Trailers-only: a head that says no body, and the end. */
	http_own_send(t, &o, out, NULL, true);
}
