/* Server connections given back to be closed once their output is written
 * (px_session_upstream_flush): a tunnel's last bytes and its FIN, queued
 * as its stream ended, that the server's kernel has not all taken yet.
 * The worker holds them past their session's end (the client may leave as
 * soon as its stream is over), writing as the socket lets it and reading
 * nothing; each is closed once its output is empty (its half-close sent),
 * or reset (SO_LINGER 0) after idle_ms without a byte going out, and all
 * of them when the worker exits. Never a session's own: no session's
 * accounting or idle timer sees them. */
#include <errno.h>
#include <stdlib.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "session.h"
#include "upflush.h"
#include "worker.h"

/* With no idle-timeout to bound it, a server that never reads is given
 * this long. */
#define PX_UPFLUSH_DEFAULT_MS	60000

struct px_upflush {
	struct px_upconn	*u;
	struct event		 timer;
	struct timeval		 idle;
	LIST_ENTRY(px_upflush)	 link;
};

static void
px_upflush_close(struct px_upflush *f, bool reset)
{
	int fd = f->u->c.fd;

	if (reset && fd >= 0) {
		struct linger lg = { 1, 0 };

		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	LIST_REMOVE(f, link);
	event_del(&f->timer);
	px_conn_close(&f->u->c);
	if (fd >= 0)
		close(fd);
	free(f->u);
	free(f);
}

/* Writes what it can: 1 when all of it is out (and its end, asked for),
 * 0 while bytes wait, -1 on an error. */
static int
px_upflush_push(struct px_upflush *f)
{
	struct px_conn *c = &f->u->c;
	size_t before = evbuffer_get_length(c->out);

	if (before != 0 && px_conn_send(c) == -1)
		return -1;
	if (evbuffer_get_length(c->out) != 0) {
		if (evbuffer_get_length(c->out) < before)
			(void)event_add(&f->timer, &f->idle);
		return 0;
	}
	/* A TLS close_notify the socket did not take at once is not waited
	 * for: the bytes are out, the close ends it. */
	if (c->shut_pending && !c->shut)
		(void)px_conn_shutdown(c);
	return 1;
}

static void
px_upflush_writable(struct px_conn *c, void *arg)
{
	struct px_upflush *f = arg;
	int rc;

	(void)c;
	if ((rc = px_upflush_push(f)) != 0)
		px_upflush_close(f, rc == -1);
}

static void
px_upflush_readable(struct px_conn *c, void *arg)
{
	/* Not read: reading stays off. */
	px_conn_read_enable(c, false);
	(void)arg;
}

static void
px_upflush_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what;
	px_upflush_close(arg, true);
}

void
px_upflush_take(struct px_worker *w, struct px_upconn *u, uint64_t idle_ms)
{
	struct px_upflush *f;
	int rc;

	if ((f = calloc(1, sizeof(*f))) == NULL) {
		px_conn_close(&u->c);
		if (u->c.fd >= 0)
			close(u->c.fd);
		free(u);
		return;
	}
	f->u = u;
	if (idle_ms == 0)
		idle_ms = PX_UPFLUSH_DEFAULT_MS;
	f->idle.tv_sec = (time_t)(idle_ms / 1000);
	f->idle.tv_usec = (suseconds_t)(idle_ms % 1000) * 1000;
	evtimer_assign(&f->timer, w->base, px_upflush_timeout, f);
	LIST_INSERT_HEAD(&w->flushing, f, link);
	u->c.on_readable = px_upflush_readable;
	u->c.on_writable = px_upflush_writable;
	u->c.arg = f;
	px_conn_read_enable(&u->c, false);
	(void)event_add(&f->timer, &f->idle);
	if ((rc = px_upflush_push(f)) != 0)
		px_upflush_close(f, rc == -1);
}

void
px_upflush_worker_exit(struct px_worker *w)
{
	while (!LIST_EMPTY(&w->flushing))
		px_upflush_close(LIST_FIRST(&w->flushing), true);
}
