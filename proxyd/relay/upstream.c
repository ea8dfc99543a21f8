/* Connecting out and the keep-alive pool (upstream.h). */
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

/* The parked connections of one key, oldest first. */
struct px_pool_bucket {
	struct px_pool_key	 key;
	struct px_pool_list	 conns;
	unsigned		 n;
	TAILQ_ENTRY(px_pool_bucket) link;
};

struct px_pool_conn {
	struct px_pool		*pool;
	struct px_pool_bucket	*bucket;	/* NULL: taken (held) */
	struct px_pooled	 c;
	uint64_t		 parked_ms;	/* px_clock_ms() */
	uint64_t		 deadline_ms;
	struct timeval		 parked_pass;	/* the loop's cached time */
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
	TAILQ_INIT(&p->buckets);
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

static struct px_pool_bucket *
px_pool_bucket_find(struct px_pool *p, const struct px_pool_key *k)
{
	struct px_pool_bucket *b;

	TAILQ_FOREACH(b, &p->buckets, link)
		if (memcmp(&b->key, k, sizeof(*k)) == 0)
			return b;
	return NULL;
}

/* Takes c out of its bucket (freed once empty); c's event stays. */
static void
px_pool_unlink(struct px_pool_conn *c)
{
	struct px_pool_bucket *b = c->bucket;

	TAILQ_REMOVE(&b->conns, c, link);
	c->bucket = NULL;
	c->pool->n--;
	if (--b->n == 0) {
		TAILQ_REMOVE(&c->pool->buckets, b, link);
		free(b);
	}
}

static void
px_pool_drop(struct px_pool_conn *c)
{
	event_del(&c->ev);
	px_pool_unlink(c);
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
	/* Taken, its event only held for the hand-over: the new owner
	 * reads what came (the event, not persistent, is off now). */
	if (c->bucket == NULL)
		return;
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

/* Parked longer than this, a connection is asked of the kernel before it
 * is taken however quiet it looked: origins close idle connections after
 * seconds, and this covers what the loop may not have reported (a pass
 * reports at most libevent's batch of ready sockets). */
#define PX_POOL_TRUST_MS	1000

/* A connection parked past a key's max stays this long (ms), and the
 * key's connections number at most PX_POOL_SURPLUS times its max. */
#define PX_POOL_SURPLUS_MS	1000
#define PX_POOL_SURPLUS		4

/* Whether c is surely still open without asking the kernel (recv
 * MSG_PEEK, a system call per reuse): its read event (level-triggered)
 * has been in epoll through at least one whole loop pass since it was
 * parked, and that pass found nothing on it (not active). The loop's
 * cached time is set once per pass: a different one means a pass began
 * (and its epoll_wait ran) since; the same one (the clock is libevent's
 * coarse one, a few milliseconds a tick) may be this pass, so the kernel
 * is asked, unless it was parked quiet: its owner's last read emptied
 * the socket (a plain read's FIN is not seen in its own pass: px_conn_
 * quiet), which says as much as that epoll_wait (HTTP/2
 * streams take in one pass what others' responses parked in it). A FIN
 * that comes within the current pass is the race every reuse has, the
 * peek's too (http's one retry is for it). */
static bool
px_pool_quiet(const struct px_pool_conn *c, uint64_t now_ms)
{
	struct timeval now;

	if (c->ev.ev_evcallback.evcb_flags & (EVLIST_ACTIVE |
	    EVLIST_ACTIVE_LATER) || now_ms - c->parked_ms > PX_POOL_TRUST_MS ||
	    event_base_gettimeofday_cached(c->pool->base, &now) == -1)
		return false;
	return c->c.quiet || timercmp(&now, &c->parked_pass, !=);
}

int
px_pool_take(struct px_pool *p, const struct px_pool_key *k,
    struct px_pooled *out)
{
	struct px_pool_bucket *b = px_pool_bucket_find(p, k);
	struct px_pool_conn *c;
	uint64_t now = b != NULL ? px_clock_ms() : 0;
	char ch;

	/* Most recently parked first: the likeliest to be alive. */
	while (b != NULL && (c = TAILQ_LAST(&b->conns, px_pool_list)) != NULL) {
		bool last = b->n == 1;
		ssize_t n;

		/* A FIN or RST that arrived since the last loop pass (or, TLS,
		 * a close_notify: any byte is one too many while idle). */
		if (px_pool_quiet(c, now)) {
			n = -1;
			errno = EAGAIN;
		} else
			n = recv(c->c.fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0 || (n == -1 && errno != EAGAIN &&
		    errno != EWOULDBLOCK) || (n > 0 &&
		    !px_pool_idle_alive(&c->c))) {
			px_pool_count_stale(c);
			px_pool_drop(c);
			if (last)
				break;	/* the bucket went with it */
			continue;
		}
		px_pool_unlink(c);
		*out = c->c;
		out->held = c;
		return 0;
	}
	return -1;
}

void
px_pool_release(struct px_pool_conn *held)
{
	if (held == NULL)
		return;
	event_del(&held->ev);
	free(held);
}

void
px_pool_put(struct px_pool *p, const struct px_pool_key *k,
    const struct px_pooled *pc, unsigned max, uint64_t idle_ms)
{
	struct px_pool_bucket *b;
	struct px_pool_conn *c;
	struct timeval tv = { .tv_sec = (time_t)(idle_ms / 1000),
	    .tv_usec = (suseconds_t)(idle_ms % 1000) * 1000 };

	if (max == 0 || idle_ms == 0 || p->closed) {
		px_pooled_close(pc);
		return;
	}
	/* Past max, a burst's connections stay a little (the next burst
	 * takes them: HTTP/2 clients' streams come and go by the hundred),
	 * not closed at once and opened again; past PX_POOL_SURPLUS times
	 * max, the oldest goes. */
	if ((b = px_pool_bucket_find(p, k)) != NULL && b->n >= max &&
	    idle_ms > PX_POOL_SURPLUS_MS) {
		idle_ms = PX_POOL_SURPLUS_MS;
		tv.tv_sec = (time_t)(idle_ms / 1000);
		tv.tv_usec = (suseconds_t)(idle_ms % 1000) * 1000;
	}
	if (b != NULL && b->n >= (uint64_t)max * PX_POOL_SURPLUS) {
		bool last = b->n == 1;

		px_pool_drop(TAILQ_FIRST(&b->conns));
		if (last)
			b = NULL;	/* freed with its last connection */
	}
	if (b == NULL) {
		if ((b = malloc(sizeof(*b))) == NULL) {
			px_pooled_close(pc);
			return;
		}
		b->key = *k;
		TAILQ_INIT(&b->conns);
		b->n = 0;
		TAILQ_INSERT_TAIL(&p->buckets, b, link);
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		if (b->n == 0) {
			TAILQ_REMOVE(&p->buckets, b, link);
			free(b);
		}
		px_pooled_close(pc);
		return;
	}
	c->pool = p;
	c->bucket = b;
	c->c = *pc;
	c->c.held = NULL;
	c->parked_ms = px_clock_ms();
	c->deadline_ms = c->parked_ms + idle_ms;
	(void)event_base_gettimeofday_cached(p->base, &c->parked_pass);
	event_assign(&c->ev, p->base, pc->fd, EV_READ, px_pool_conn_cb, c);
	event_add(&c->ev, &tv);
	TAILQ_INSERT_TAIL(&b->conns, c, link);
	b->n++;
	p->n++;
}

void
px_pool_flush(struct px_pool *p)
{
	struct px_pool_bucket *b;

	while ((b = TAILQ_FIRST(&p->buckets)) != NULL)
		px_pool_drop(TAILQ_FIRST(&b->conns));
}
