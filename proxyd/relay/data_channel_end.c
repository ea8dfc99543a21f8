/* A data channel's ends (data_channel.c holds the channel): each one
 * accepted on a listener of its own (px_channel_listen: one connection,
 * then the port closes), on a kept listener several transfers take turns
 * on (px_data_listener_new, px_channel_listen_on: strays refused, closed
 * when idle), or connected out (px_channel_connect, marked, from a foreign
 * address in transparent mode). The peer check (the expected host) and the
 * choice of a port in a range are here. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "analyser.h"	/* declares the px_channel_* calls */
#include "data_channel_int.h"
#include "event_want.h"
#include "listener.h"
#include "log.h"
#include "parse.h"
#include "upstream.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

static _Thread_local uint32_t px_chan_rand;

/* ---- ends ------------------------------------------------------------- */

static void
px_chan_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct px_chan_endp *e = arg;
	struct px_channel *ch = e->ch;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char a[PX_ADDRSTRLEN];
	int fd;

	(void)what;
	fd = accept4((int)lfd, (struct sockaddr *)&ss, &len,
	    SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd == -1) {
		if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
			return;
		px_chan_finish(ch, strerror(errno));
		return;
	}
	if (e->check_peer && !px_sockaddr_same_host((struct sockaddr *)&ss,
	    (struct sockaddr *)&e->peer)) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		ch->refused++;
		px_log(LOG_WARNING, ch->host->id, "data-connection refused: from "
		    "%s, expected the %s's host", px_sockaddr_str(
		    (struct sockaddr *)&ss, a, sizeof(a)),
		    e == &ch->e[PX_CHAN_CLIENT] ? "client" : "server");
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(fd);
		return;
	}
	/* One connection per listener: the port is closed at once. */
	px_event_want(&e->ev, &e->ev_on, false);
	close(e->lfd);
	e->lfd = -1;
	e->fd = fd;
	memcpy(&e->addr, &ss, sizeof(ss));
	px_chan_maybe_start(ch);
}

static uint32_t
px_chan_random(const struct px_chan_host *hst)
{
	uint32_t x = px_chan_rand;

	if (x == 0)
		x = (uint32_t)(hst->id * 2654435761u) | 1;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	px_chan_rand = x;
	return x;
}

/* net.ipv4.ip_local_port_range (it applies to IPv6 too), read once; at
 * most *tries ports are tried in it. */
static void
px_chan_ephemeral_range(uint16_t *lo, uint16_t *hi, uint32_t *tries)
{
	static _Atomic uint32_t cached;	/* lo << 16 | hi; 0: not read */
	uint32_t v = cached;
	unsigned a = 32768, b = 60999;
	FILE *f;

	if (v == 0) {
		if ((f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) != NULL) {
			if (fscanf(f, "%u %u", &a, &b) != 2 || a == 0 || a > b ||
			    b > 65535) {
				a = 32768;
				b = 60999;
			}
			fclose(f);
		}
		v = (uint32_t)a << 16 | b;
		cached = v;
	}
	*lo = (uint16_t)(v >> 16);
	*hi = (uint16_t)(v & 0xffff);
	*tries = 512;	/* a full range means something else is wrong */
}

/* A listening socket on local's address (the wildcard in transparent
 * mode) with a port of [lo, hi]; -1 with errno. */
static int
px_chan_listen_fd(struct px_chan_host *hst, const struct sockaddr *local,
    uint16_t lo, uint16_t hi, struct sockaddr_storage *bound)
{
	struct sockaddr_storage ss;
	socklen_t len = px_sockaddr_len(local);
	uint32_t range, start, i, tries = 0;
	int fd, one = 1;

	fd = socket(local->sa_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, IPPROTO_TCP);
	if (fd == -1)
		return -1;
	/* Ports of earlier transfers sit in TIME_WAIT; another listener on
	 * the same port still makes bind() fail. */
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (local->sa_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
		    sizeof(one));
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, local, len);
	/* Transparent mode: our address on the client's side is the server's,
	 * not one of ours. TPROXY hands a diverted SYN to a listener on the
	 * address of the interface it came in on, or the wildcard: so listen
	 * on the wildcard (the peer check still applies), IP_TRANSPARENT:
	 * TPROXY only hands packets to transparent sockets. */
	if (hst->transparent) {
		if (px_socket_transparent(fd, local->sa_family) == -1)
			goto fail;
		if (local->sa_family == AF_INET6)
			((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_any;
		else
			((struct sockaddr_in *)&ss)->sin_addr.s_addr =
			    htonl(INADDR_ANY);
	}
	/* No range given: the kernel's ephemeral range, but each port tried
	 * by an explicit bind. bind(port 0) counts ports held only by
	 * TIME_WAIT connections as taken and fails (EADDRINUSE) under a
	 * sustained transfer rate; an explicit bind with SO_REUSEADDR takes
	 * them, as vsftpd does. */
	if (lo == 0 && hi == 0)
		px_chan_ephemeral_range(&lo, &hi, &tries);
	range = (uint32_t)hi - lo + 1;
	if (tries == 0 || tries > range)
		tries = range;
	start = px_chan_random(hst) % range;
	for (i = 0; i < tries; i++) {
		px_sockaddr_set_port(&ss, (uint16_t)(lo + (start + i) % range));
		if (bind(fd, (struct sockaddr *)&ss, len) == 0)
			break;
		if (errno != EADDRINUSE)
			goto fail;
	}
	if (i == tries) {
		errno = EADDRINUSE;
		goto fail;
	}
	if (listen(fd, 4) == -1)
		goto fail;
	len = sizeof(*bound);
	if (getsockname(fd, (struct sockaddr *)bound, &len) == -1)
		goto fail;
	return fd;
fail:
	return px_close_failed(fd);
}

int
px_channel_listen(struct px_channel *ch, enum px_chan_end end,
    const struct sockaddr *local, uint16_t lo, uint16_t hi,
    const struct sockaddr *peer, struct sockaddr_storage *bound)
{
	struct px_chan_host *hst = ch->host;
	struct px_chan_endp *e = &ch->e[end];
	int fd;

	if (e->fd != -1 || e->lfd != -1 || e->lst != NULL) {
		errno = EBUSY;
		return -1;
	}
	if ((fd = px_chan_listen_fd(hst, local, lo, hi, bound)) == -1)
		return -1;
	e->lfd = fd;
	e->check_peer = peer != NULL;
	if (peer != NULL)
		memcpy(&e->peer, peer, px_sockaddr_len(peer));
	event_assign(&e->ev, hst->base, fd, EV_READ | EV_PERSIST,
	    px_chan_accept_cb, e);
	px_event_want(&e->ev, &e->ev_on, true);
	return 0;
}

/* ---- kept listeners ----------------------------------------------------- */

static void
px_lst_refuse(struct px_data_listener *l, int fd, const struct sockaddr_storage *ss,
    const char *why)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	char a[PX_ADDRSTRLEN];

	px_log(LOG_WARNING, l->host->id, "data-connection refused: from %s, %s",
	    px_sockaddr_str((const struct sockaddr *)ss, a, sizeof(a)), why);
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static void
px_lst_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct px_data_listener *l = arg;
	struct px_channel *ch;
	struct px_chan_endp *e;
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, n;

	(void)what;
	/* Bounded: strays are refused in one go, the taker ends the loop. */
	for (n = 0; n < 16; n++) {
		len = sizeof(ss);
		fd = accept4((int)lfd, (struct sockaddr *)&ss, &len,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1)
			return;	/* EAGAIN; an error: the next one, or idle */
		if (l->check_peer && !px_sockaddr_same_host(
		    (struct sockaddr *)&ss, (struct sockaddr *)&l->peer)) {
			if (l->waiting != NULL)
				l->waiting->refused++;
			else
				l->refused++;
			px_lst_refuse(l, fd, &ss, l->end == PX_CHAN_CLIENT ?
			    "expected the client's host" :
			    "expected the server's host");
			continue;
		}
		if ((ch = l->waiting) == NULL) {
			l->refused++;
			px_lst_refuse(l, fd, &ss, "no transfer waiting for it");
			continue;
		}
		e = &ch->e[l->end];
		l->waiting = NULL;
		e->lst = NULL;
		e->fd = fd;
		memcpy(&e->addr, &ss, sizeof(ss));
		px_lst_idle(l);
		/* May end the channel, and with its callback the session
		 * (and l): nothing of l after this. */
		px_chan_maybe_start(ch);
		return;
	}
}

void
px_lst_close(struct px_data_listener *l)
{
	if (evtimer_pending(&l->timer, NULL))
		evtimer_del(&l->timer);
	if (l->fd == -1)
		return;
	px_event_want(&l->ev, &l->ev_on, false);
	close(l->fd);
	l->fd = -1;
}

static void
px_lst_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_data_listener *l = arg;

	(void)fd; (void)what;
	/* Idle: the port goes back to the range. */
	if (l->waiting == NULL)
		px_lst_close(l);
}

/* No channel waits any more: the idle clock runs. */
void
px_lst_idle(struct px_data_listener *l)
{
	struct timeval tv = { .tv_sec = (time_t)(l->idle_ms / 1000),
	    .tv_usec = (suseconds_t)(l->idle_ms % 1000) * 1000 };

	if (l->idle_ms != 0 && l->fd != -1)
		evtimer_add(&l->timer, &tv);
}

struct px_data_listener *
px_chan_listener_new(struct px_chan_host *host, const struct sockaddr *local,
    uint16_t lo, uint16_t hi, const struct sockaddr *peer, uint64_t idle_ms)
{
	struct px_data_listener *l;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return NULL;
	l->host = host;
	l->fd = -1;
	memcpy(&l->local, local, px_sockaddr_len(local));
	l->lo = lo;
	l->hi = hi;
	l->check_peer = peer != NULL;
	if (peer != NULL)
		memcpy(&l->peer, peer, px_sockaddr_len(peer));
	l->idle_ms = idle_ms;
	evtimer_assign(&l->timer, host->base, px_lst_timer_cb, l);
	l->next = host->listeners;
	host->listeners = l;
	return l;
}

int
px_channel_listen_on(struct px_channel *ch, enum px_chan_end end,
    struct px_data_listener *l, struct sockaddr_storage *bound)
{
	struct px_chan_endp *e = &ch->e[end];
	int fd;

	if (e->fd != -1 || e->lfd != -1 || e->lst != NULL ||
	    l->waiting != NULL || l->host != ch->host) {
		errno = EBUSY;
		return -1;
	}
	if (l->fd == -1) {
		if ((fd = px_chan_listen_fd(l->host, (struct sockaddr *)&l->local,
		    l->lo, l->hi, &l->bound)) == -1)
			return -1;
		l->fd = fd;
		event_assign(&l->ev, l->host->base, fd, EV_READ | EV_PERSIST,
		    px_lst_accept_cb, l);
		px_event_want(&l->ev, &l->ev_on, true);
	}
	if (evtimer_pending(&l->timer, NULL))
		evtimer_del(&l->timer);
	l->waiting = ch;
	l->end = end;
	e->lst = l;
	memcpy(bound, &l->bound, sizeof(*bound));
	return 0;
}

unsigned
px_data_listener_refused(const struct px_data_listener *l)
{
	return l->refused;
}

static void
px_chan_connect_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_chan_endp *e = arg;
	struct px_channel *ch = e->ch;
	char why[96];
	int err;

	px_event_want(&e->ev, &e->ev_on, false);
	/* Watched for reading too: a failed connect comes with EPOLLERR,
	 * which libevent reports as readable and writable, so writable alone
	 * means connected without a getsockopt(SO_ERROR). (Readable: an
	 * error, or a peer that sent already: ask.) */
	err = what == EV_WRITE ? 0 : px_upstream_result((int)fd);
	if (err != 0) {
		snprintf(why, sizeof(why), "connect to the %s failed: %s",
		    e == &ch->e[PX_CHAN_CLIENT] ? "client" : "server",
		    strerror(err));
		px_chan_finish(ch, why);
		return;
	}
	e->connecting = false;
	px_chan_maybe_start(ch);
}

int
px_channel_connect(struct px_channel *ch, enum px_chan_end end,
    const struct sockaddr *dst, const struct sockaddr *src)
{
	struct px_chan_host *hst = ch->host;
	struct px_chan_endp *e = &ch->e[end];
	struct sockaddr_storage ss;
	int fd, one = 1;

	if (e->fd != -1 || e->lfd != -1) {
		errno = EBUSY;
		return -1;
	}
	fd = socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    IPPROTO_TCP);
	if (fd == -1)
		return -1;
	if (end == PX_CHAN_SERVER && hst->has_mark &&
	    setsockopt(fd, SOL_SOCKET, SO_MARK, &hst->mark,
	    sizeof(hst->mark)) == -1)
		goto fail;
	if (src != NULL) {
		/* Transparent mode: our address on the client's side is the
		 * server's (foreign) one, bound as the listener's is. */
		if (hst->transparent &&
		    px_socket_transparent(fd, src->sa_family) == -1)
			goto fail;
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, src, px_sockaddr_len(src));
		px_sockaddr_set_port(&ss, 0);
		/* The port is picked by connect() for the whole 4-tuple. */
		(void)setsockopt(fd, SOL_IP, IP_BIND_ADDRESS_NO_PORT, &one,
		    sizeof(one));
		if (bind(fd, (struct sockaddr *)&ss, px_sockaddr_len(src)) == -1)
			goto fail;
	}
	if (connect(fd, dst, px_sockaddr_len(dst)) == -1 && errno != EINPROGRESS)
		goto fail;
	/* Even a connect done at once goes through the event: the callback
	 * never runs inside this call. */
	e->fd = fd;
	memcpy(&e->addr, dst, px_sockaddr_len(dst));
	e->connecting = true;
	event_assign(&e->ev, hst->base, fd, EV_READ | EV_WRITE,
	    px_chan_connect_cb, e);
	px_event_want(&e->ev, &e->ev_on, true);
	return 0;
fail:
	return px_close_failed(fd);
}
