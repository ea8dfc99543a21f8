#include "upstream.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "bucket.h"
#include "conn.h"
#include "listener.h"
#include "parse.h"
#include "tls.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

/* Binds the client's address (port chosen at connect time, so the same
 * client can have many sessions to many servers). */
static int
px_upstream_spoof(int fd, const struct sockaddr *source)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;

	len = px_sockaddr_len(source);
	px_sockaddr_copy(&ss, source);
	px_sockaddr_set_port(&ss, 0);
	/* IP_TRANSPARENT alone lets bind() take a foreign address (the
	 * kernel's inet_can_nonlocal_bind): no IP_FREEBIND, one setsockopt
	 * less per spoofed connection. */
	if (source->sa_family == AF_INET6 ? setsockopt(fd, SOL_IPV6,
	    IPV6_TRANSPARENT, &one, sizeof(one)) == -1 : setsockopt(fd, SOL_IP,
	    IP_TRANSPARENT, &one, sizeof(one)) == -1)
		return -1;
	(void)setsockopt(fd, SOL_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	return bind(fd, (struct sockaddr *)&ss, len);
}

int
px_upstream_connect(const uint32_t *mark, const struct sockaddr *dst,
    socklen_t len, const struct sockaddr *source, bool *in_progress,
    const char **stage)
{
	int fd, one = 1;

	*in_progress = false;
	*stage = "socket";
	fd = socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    IPPROTO_TCP);
	if (fd == -1)
		return -1;
	/* Without it, small keep-alive responses wait on delayed ACKs. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*stage = "mark";
	if (mark != NULL && setsockopt(fd, SOL_SOCKET, SO_MARK, mark,
	    sizeof(*mark)) == -1)
		goto fail;
	*stage = "spoof-source";
	if (source != NULL && px_upstream_spoof(fd, source) == -1)
		goto fail;
	*stage = "connect";
	if (connect(fd, dst, len) == 0)
		return fd;
	if (errno == EINPROGRESS) {
		*in_progress = true;
		return fd;
	}
fail:
	return px_close_failed(fd);
}

int
px_upstream_result(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
		return errno;
	return err;
}

/* ---- per-worker pool of idle server connections ------------------------ */

struct px_pool_conn {
	struct px_pool		*pool;
	struct px_pool_key	 key;
	struct px_pooled	 c;
	uint64_t		 deadline_ms;	/* px_clock_ms() */
	struct event		 ev;	/* EV_READ + idle timeout */
	TAILQ_ENTRY(px_pool_conn) link;
};

/* One writer: a relaxed load and store, no locked add. The parking
 * service's counter, or the pool's. */
static void
px_pool_count_stale(struct px_pool_conn *c)
{
	atomic_uint_fast64_t *n = c->c.stale != NULL ? c->c.stale :
	    c->pool->stale;

	if (n != NULL)
		atomic_store_explicit(n, atomic_load_explicit(n,
		    memory_order_relaxed) + 1, memory_order_relaxed);
}

void
px_pool_init(struct px_pool *p, struct event_base *base,
    atomic_uint_fast64_t *stale)
{
	TAILQ_INIT(&p->conns);
	p->n = 0;
	p->base = base;
	p->closed = false;
	p->stale = stale;
}

/* Closes a connection that is not parked, with its transform's state. */
static void
px_pooled_close(const struct px_pooled *c)
{
	if (c->tf != NULL && c->tf->free != NULL)
		c->tf->free(c->tf_state);
	close(c->fd);
}

void
px_pool_key_init(struct px_pool_key *k, const uint32_t *mark,
    const struct px_tls_ctx *tls, const struct sockaddr *dst,
    const struct sockaddr *source, const char *tls_name, bool tls_unverified)
{
	memset(k, 0, sizeof(*k));
	memcpy(&k->dst, dst, px_sockaddr_len(dst));
	/* A spoofed connection carries its client's address: only that
	 * client may reuse it. The port is the kernel's choice. */
	if (source != NULL) {
		memcpy(&k->src, source, px_sockaddr_len(source));
		px_sockaddr_set_port(&k->src, 0);
	}
	k->mark = mark != NULL ? *mark : 0;
	if (tls != NULL) {
		k->tls_ctx = px_tls_ctx_id(tls);
		if (tls_name != NULL)
			snprintf(k->tls_name, sizeof(k->tls_name), "%s",
			    tls_name);
		k->tls_unverified = tls_unverified;
	}
}

static void
px_pool_drop(struct px_pool_conn *c)
{
	struct px_pool *p = c->pool;

	event_del(&c->ev);
	TAILQ_REMOVE(&p->conns, c, link);
	p->n--;
	px_pooled_close(&c->c);
	free(c);
}

/* Readable while idle: what the transform takes on its own (TLS 1.3
 * tickets) leaves it alive; anything else means it is gone. */
static bool
px_pool_idle_alive(const struct px_pooled *c)
{
	char b;
	ssize_t n;

	if (c->tf == NULL || c->tf->idle_input == NULL ||
	    c->tf->idle_input(c->tf_state) == -1)
		return false;
	/* Nothing left behind it: no FIN, no more bytes. */
	n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Readable while idle: the server closed it (or sent something it should
 * not have); timed out: idle too long. Either way it is gone. */
static void
px_pool_conn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_pool_conn *c = arg;

	uint64_t now = px_clock_ms(), left;
	struct timeval tv;

	(void)fd;
	if ((what & EV_READ) && px_pool_idle_alive(&c->c) &&
	    (left = c->deadline_ms > now ? c->deadline_ms - now : 0) > 0) {
		tv.tv_sec = (time_t)(left / 1000);
		tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
		event_add(&c->ev, &tv);
		return;
	}
	if (what & EV_READ)
		px_pool_count_stale(c);
	px_pool_drop(c);
}

int
px_pool_take(struct px_pool *p, const struct px_pool_key *k,
    struct px_pooled *out)
{
	struct px_pool_conn *c, *next;
	char b;

	/* Most recently parked first: the likeliest to be alive. */
	for (c = TAILQ_LAST(&p->conns, px_pool_list); c != NULL; c = next) {
		int fd;
		ssize_t n;

		next = TAILQ_PREV(c, px_pool_list, link);
		if (memcmp(&c->key, k, sizeof(*k)) != 0)
			continue;
		fd = c->c.fd;
		/* A FIN or RST that arrived since the last loop pass (or, TLS,
		 * a close_notify: any byte is one too many while idle). */
		n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0 || (n == -1 && errno != EAGAIN &&
		    errno != EWOULDBLOCK) || (n > 0 &&
		    !px_pool_idle_alive(&c->c))) {
			px_pool_count_stale(c);
			px_pool_drop(c);
			continue;
		}
		*out = c->c;
		event_del(&c->ev);
		TAILQ_REMOVE(&p->conns, c, link);
		p->n--;
		free(c);
		return 0;
	}
	return -1;
}

void
px_pool_put(struct px_pool *p, const struct px_pool_key *k,
    const struct px_pooled *pc, unsigned max, uint64_t idle_ms)
{
	struct px_pool_conn *c, *oldest = NULL;
	struct timeval tv = { .tv_sec = (time_t)(idle_ms / 1000),
	    .tv_usec = (suseconds_t)(idle_ms % 1000) * 1000 };
	unsigned same = 0;

	if (max == 0 || idle_ms == 0 || p->closed) {
		px_pooled_close(pc);
		return;
	}
	TAILQ_FOREACH(c, &p->conns, link)
		if (memcmp(&c->key, k, sizeof(*k)) == 0) {
			if (oldest == NULL)
				oldest = c;
			same++;
		}
	if (same >= max)
		px_pool_drop(oldest);
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		px_pooled_close(pc);
		return;
	}
	c->pool = p;
	c->key = *k;
	c->c = *pc;
	c->deadline_ms = px_clock_ms() + idle_ms;
	event_assign(&c->ev, p->base, pc->fd, EV_READ, px_pool_conn_cb, c);
	event_add(&c->ev, &tv);
	TAILQ_INSERT_TAIL(&p->conns, c, link);
	p->n++;
}

void
px_pool_flush(struct px_pool *p)
{
	while (!TAILQ_EMPTY(&p->conns))
		px_pool_drop(TAILQ_FIRST(&p->conns));
}
