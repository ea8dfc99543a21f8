/* http_txn: what is one transaction's alone, apart from the connection's
 * state machine (http.c): its start and end (what it owns made and
 * freed), its http-request line and the metrics counted with it, written
 * once, after which the transaction's log fields start from nothing for
 * the next request; the client side a transaction sees (struct
 * http_client_ops: where its request body comes from, the writer its
 * response goes through), HTTP/1.1's; and the way the transaction layer
 * reaches the engine that runs it (struct http_engine_ops, given at
 * http_txn_init: HTTP/1.1's in http.c, an HTTP/2 stream's in
 * http_h2_stream.c), so that it never calls up into either. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <syslog.h>

#include <event2/buffer.h>
#include <event2/dns.h>

#include "auth.h"
#include "conn.h"
#include "http_h2_origin.h"
#include "http_head.h"
#include "http_int.h"
#include "log.h"
#include "parse.h"

int
http_txn_init(struct http_txn *t, struct http_state *h,
    const struct http_engine_ops *eng)
{
	t->conn = h;
	t->eng = eng;
	t->grpc_status = -1;
	t->srv.io = NULL;
	t->h2w = NULL;
	t->head_out = evbuffer_new();
	return t->head_out != NULL ? 0 : -1;
}

void
http_txn_stop(struct http_txn *t, bool keep_server)
{
	http_scan_close(t);
	http_auth_unbind(t);	/* after the records that name its user */
	if (t->dns != NULL)
		evdns_getaddrinfo_cancel(t->dns);
	t->dns = NULL;
	http_server_drop(t, keep_server);
}

void
http_txn_free(struct http_txn *t, bool keep_server)
{
	http_txn_stop(t, keep_server);
	if (t->head_out != NULL)
		evbuffer_free(t->head_out);
	t->head_out = NULL;
	free(t->canon);
	t->canon = NULL;
	http_h2o_close(t);
}

/* ---- the engine that runs it ------------------------------------------- */

void
http_txn_drive(struct http_txn *t)
{
	t->eng->drive(t->conn);
}

void
http_txn_timer(struct http_txn *t, uint64_t ms)
{
	t->eng->timer(t, ms);
}

void
http_txn_abort(struct http_txn *t, enum px_end_by by, const char *reason)
{
	t->eng->cut(t, by, 0, reason);
}

void
http_txn_cut(struct http_txn *t, enum px_end_by by, uint32_t code,
    const char *reason)
{
	t->eng->cut(t, by, code, reason);
}

void
http_transaction_end(struct http_txn *t)
{
	t->eng->done(t);
}

void
http_response_complete(struct http_txn *t)
{
	/* Bytes that came with the response, after its end (a body after
	 * a 204, 304 or a HEAD response, say): one request is in flight,
	 * so they answer nothing, and the connection is closed, never
	 * pooled. */
	if (t->srv.io != NULL && evbuffer_get_length(t->srv.io->in) != 0)
		http_unasked_bytes(t, t->srv.io->in);
	t->eng->done(t);
}

void
http_refusal_sent(struct http_txn *t, bool keep, const char *reason)
{
	t->eng->refused(t, keep, reason);
}

void
http_txn_tunnel(struct http_txn *t)
{
	t->eng->tunnel(t);
}

/* ---- its http-request line ---------------------------------------------- */

void
http_txn_log(struct http_txn *t, int level, const char *fmt, ...)
{
	static _Thread_local char line[1024];
	va_list ap;

	if (!px_log_enabled(level))
		return;
	va_start(ap, fmt);
	(void)vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* An HTTP/2 stream's names it: its connection has others. */
	if (t->h2w != NULL)
		px_session_log(t->conn->s, level, "%s proto=h2 stream=%d", line,
		    (int)http_h2w_stream(t->h2w));
	else
		px_session_log(t->conn->s, level, "%s", line);
}

void
http_log_request(struct http_txn *t)
{
	/* An HTTP/2 stream's: at the stream's end, with what its client
	 * got (http_h2_stream.c). */
	if (t->h2w != NULL)
		return;
	http_log_request_as(t, "");
}

void
http_log_request_as(struct http_txn *t, const char *tag)
{
	struct http_state *h = t->conn;
	char client[PX_ADDRSTRLEN], server[PX_ADDRSTRLEN], user[160];
	char grpc[24] = "";
	const struct px_auth_id *id = http_auth_txn_id(t);
	struct timeval now, d;
	bool deny;

	if (t->method[0] == '\0')
		return;
	http_audit_end(t, PX_TO_SERVER);
	http_audit_end(t, PX_TO_CLIENT);
	gettimeofday(&now, NULL);
	timersub(&now, &t->t_start, &d);
	if (t->status >= 100 && t->status <= 599) {
		px_session_series_add(h->s, HTTP_S_RESPONSES,
		    (unsigned)t->status - 100, 1);
		px_session_series_observe(h->s, HTTP_S_DURATION,
		    (unsigned)t->status / 100 - 1,
		    (uint64_t)d.tv_sec * 1000000 + (uint64_t)d.tv_usec);
	}
	/* A tag is an HTTP/2 stream's (http_h2_stream.c). */
	px_session_series_add(h->s, HTTP_S_PROTO, tag[0] != '\0' ? 1 : 0, 1);
	/* Formatting the line (two addresses) costs more than parsing a
	 * head: not done for a log that drops it. */
	if (!px_log_enabled(LOG_INFO))
		goto out_clear;
	deny = t->verdict != NULL && (strcmp(t->verdict, "deny") == 0 ||
	    strcmp(t->verdict, "abort") == 0);
	if (id != NULL)
		px_log_escape(user, sizeof(user), id->user, strlen(id->user),
		    false);
	if (t->grpc_status >= 0)
		snprintf(grpc, sizeof(grpc), " grpc-status=%d", t->grpc_status);
	px_session_log(h->s, LOG_INFO, "http-request client=%s method=%s "
	    "host=%s path=%s status=%d%s to-server=%llu to-client=%llu "
	    "duration=%ld.%03ld verdict=%s server=%s upstream=%s%s%s%s%s%s%s"
	    "%s%s%s%s%s",
	    px_sockaddr_str(px_session_client(h->s), client, sizeof(client)),
	    t->method, t->host[0] ? t->host : "-", t->path, t->status, grpc,
	    (unsigned long long)t->req_bytes, (unsigned long long)t->resp_bytes,
	    (long)d.tv_sec, (long)(d.tv_usec / 1000),
	    t->verdict ? t->verdict : "accept",
	    t->srv.dst.ss_family ? px_sockaddr_str((struct sockaddr *)
	    &t->srv.dst, server, sizeof(server)) : "-",
	    t->srv.dst.ss_family == 0 ? "-" : t->srv.kept ? "kept" :
	    t->srv.reused ? "pooled" : "new",
	    t->srv_h2 ? " server-proto=h2" : "",
	    t->rst_code[0] != '\0' ? " reset=" : "", t->rst_code,
	    deny ? " rule=" : "",
	    !deny ? "" : t->rule[0] != '\0' ? t->rule : "builtin",
	    id != NULL ? " user=" : "", id != NULL ? user : "",
	    id != NULL ? " auth=" : "",
	    id != NULL ? px_auth_method_name(id->method) : "",
	    tag[0] != '\0' ? " " : "", tag);
out_clear:
	/* The next request starts from nothing: a refusal before its head
	 * is whole must not name or count this one's host and bytes. */
	t->method[0] = t->host[0] = t->rule[0] = t->rst_code[0] = '\0';
	t->srv_h2 = false;
	t->req_bytes = t->resp_bytes = t->interim_bytes = 0;
	t->grpc = false;
	t->grpc_status = -1;
	t->grpc_deadline_ms = 0;
}

/* `buffer` bounds a direction of t, not a buffer: what was read from one
 * side and what waits to be written to the other count together, so a
 * slow reader holds one buffer's worth per direction, as plug does. The
 * client's side is the transaction's (http_client_in/out): an HTTP/2
 * stream's buffers when it is one. A scanned body's held part and its
 * copy for the scanner count too: scanning adds no buffer. */
size_t
http_txn_room(struct http_txn *t, enum px_dir dir)
{
	const struct px_conn *s = t->srv.io;
	size_t queued = http_scan_queued(t, dir);

	if (dir == PX_TO_SERVER)
		queued += evbuffer_get_length(http_client_in(t)) +
		    (s != NULL ? evbuffer_get_length(s->out) : 0);
	else
		queued += evbuffer_get_length(http_client_out(t)) +
		    (s != NULL ? evbuffer_get_length(s->in) : 0);
	return queued < t->conn->buffer ? t->conn->buffer - queued : 0;
}


/* ---- the HTTP/1.1 writer ------------------------------------------------ */

static void
http_h1_head(struct http_txn *t, const struct http_head *m,
    const struct http_resp_ctx *rs, struct evbuffer *out)
{
	http_head_response(out, m, t->conn->pol, rs);
}

/* Measured as written: the same bytes head writes at the release. */
static int
http_h1_head_size(struct http_txn *t, const struct http_head *m,
    const struct http_resp_ctx *rs, size_t *n)
{
	struct evbuffer *b;

	if ((b = evbuffer_new()) == NULL)
		return -1;
	http_head_response(b, m, t->conn->pol, rs);
	*n = evbuffer_get_length(b);
	evbuffer_free(b);
	return 0;
}

/* A body without a length (an HTTP/2 server's) goes to an HTTP/1.1 client
 * in chunks, to an HTTP/1.0 one as it is (the close ends it). */
static bool
http_h1_chunks(const struct http_txn *t)
{
	return t->resp_body == HTTP_BODY_CHUNKED && !t->dechunk;
}

static void
http_h1_data(struct http_txn *t, struct evbuffer *src, size_t n,
    struct evbuffer *out)
{
	if (http_h1_chunks(t))
		evbuffer_add_printf(out, "%zx\r\n", n);
	evbuffer_remove_buffer(src, out, n);
	if (http_h1_chunks(t))
		evbuffer_add(out, "\r\n", 2);
}

static void
http_h1_end(struct http_txn *t, const struct http_head *tr,
    struct evbuffer *out)
{
	if (!http_h1_chunks(t))
		return;
	if (tr != NULL)
		http_head_trailers(out, tr, t->conn->pol, false);
	else
		evbuffer_add(out, "0\r\n\r\n", 5);
}

/* The connection is the response's framing: it ends, reset. */
static void
http_h1_reset(struct http_txn *t, const char *why)
{
	http_txn_abort(t, PX_END_SERVER_FAIL, why);
}

static struct evbuffer *
http_h1_in(struct http_txn *t)
{
	return t->conn->c->in;
}

static struct evbuffer *
http_h1_out(struct http_txn *t)
{
	return t->conn->c->out;
}

static const struct http_client_ops http_client_h1 = {
	.name = "http/1.1",
	.head = http_h1_head,
	.head_size = http_h1_head_size,
	.data = http_h1_data,
	.end = http_h1_end,
	.reset = http_h1_reset,
	.in = http_h1_in,
	.out = http_h1_out,
};

const struct http_client_ops *
http_client(const struct http_txn *t)
{
	return t->h2w != NULL ? &http_client_h2 : &http_client_h1;
}

struct evbuffer *
http_client_in(struct http_txn *t)
{
	return http_client(t)->in(t);
}

struct evbuffer *
http_client_out(struct http_txn *t)
{
	return http_client(t)->out(t);
}
