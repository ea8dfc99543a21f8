/* One socket end (see conn.h). */
#include "conn.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "splice.h"	/* px_event_want() */

#define PX_CONN_READ_MAX	(256 * 1024)	/* per recv */
#define PX_CONN_RECORD		16384	/* a transform's write: a TLS record */

/* Emptied buffers of closed conns, per worker thread, for the next conns
 * to open: evbuffer_new() is a calloc and evbuffer_free() a free, each a
 * few hundred instructions in glibc's bins (calloc skips its per-thread
 * cache), four of each per new connection. Bounded: a burst of closes
 * hands the rest back. */
#define PX_CONN_SPARE_MAX	64
static _Thread_local struct evbuffer *px_conn_spare[PX_CONN_SPARE_MAX];
static _Thread_local unsigned px_conn_nspare;

static struct evbuffer *
px_conn_buf_new(void)
{
	if (px_conn_nspare > 0)
		return px_conn_spare[--px_conn_nspare];
	return evbuffer_new();
}

/* Drained as a whole (every chain freed, references to other buffers
 * dropped), a buffer is as evbuffer_new() made it for what conn.c uses;
 * a spool's release (spool.h) may have marked it as draining to a socket
 * (sendfile), which the next owner, perhaps TLS, must not inherit. */
static void
px_conn_buf_free(struct evbuffer *b)
{
	if (b == NULL)
		return;
	evbuffer_clear_flags(b, EVBUFFER_FLAG_DRAINS_TO_FD);
	if (px_conn_nspare < PX_CONN_SPARE_MAX &&
	    evbuffer_drain(b, evbuffer_get_length(b)) == 0 &&
	    evbuffer_get_length(b) == 0) {
		px_conn_spare[px_conn_nspare++] = b;
		return;
	}
	evbuffer_free(b);
}

void
px_conn_thread_exit(void)
{
	while (px_conn_nspare > 0)
		evbuffer_free(px_conn_spare[--px_conn_nspare]);
}

/* The adopted watch is no longer needed: c's read event has taken over,
 * or c goes. */
static void
px_conn_adopt_done(struct px_conn *c)
{
	void (*release)(void *) = c->adopt_release;

	c->adopt_release = NULL;
	release(c->adopt_arg);
	c->adopt_arg = NULL;
}

/* Arms exactly the events that what we wait for needs: no syscall when
 * nothing changed. */
static void
px_conn_update(struct px_conn *c)
{
	bool rd = (c->reading && c->read_want != PX_CONN_WANT_WRITE &&
	    c->tf_next == NULL && !c->read_first) ||
	    c->write_want == PX_CONN_WANT_READ ||
	    c->shut_want == PX_CONN_WANT_READ;
	bool wr = c->write_want == PX_CONN_WANT_WRITE ||
	    c->read_want == PX_CONN_WANT_WRITE ||
	    c->shut_want == PX_CONN_WANT_WRITE;

	/* Not watched: what comes from now on is not reported. */
	if (!rd)
		c->drained = false;
	px_event_want(&c->rd, &c->rd_on, rd);
	px_event_want(&c->wr, &c->wr_on, wr);
	if (c->rd_on && c->adopt_release != NULL)
		px_conn_adopt_done(c);
}

static void
px_conn_rd_event(evutil_socket_t fd, short what, void *arg)
{
	struct px_conn *c = arg;

	(void)fd; (void)what;
	c->drained = false;	/* until a read empties it again */
	if (c->read_first) {
		/* Watched from now on; an owner that stops reading within
		 * this pass undoes it in libevent's changelist, no syscall. */
		c->read_first = false;
		px_conn_update(c);
	}
	if (c->shut_want == PX_CONN_WANT_READ)
		(void)px_conn_shutdown(c);
	if (c->write_want == PX_CONN_WANT_READ) {
		c->on_writable(c, c->arg);
		return;		/* the owner may have closed c */
	}
	if (c->reading)
		c->on_readable(c, c->arg);
}

static void
px_conn_wr_event(evutil_socket_t fd, short what, void *arg)
{
	struct px_conn *c = arg;

	(void)fd; (void)what;
	if (c->shut_want == PX_CONN_WANT_WRITE)
		(void)px_conn_shutdown(c);
	if (c->read_want == PX_CONN_WANT_WRITE) {
		c->read_want = PX_CONN_WANT_NONE;
		px_conn_update(c);
		c->on_readable(c, c->arg);
		return;
	}
	if (c->write_want == PX_CONN_WANT_WRITE)
		c->on_writable(c, c->arg);
}

int
px_conn_open(struct px_conn *c, struct event_base *base, int fd,
    px_conn_cb on_readable, px_conn_cb on_writable, void *arg)
{
	c->fd = fd;
	c->drained = false;
	c->eof = c->shut = c->shut_pending = c->held_end = false;
	c->rd_on = c->wr_on = c->reading = c->read_first = false;
	c->read_want = c->write_want = c->shut_want = PX_CONN_WANT_NONE;
	c->tf = c->tf_next = NULL;
	c->tf_state = c->tf_next_state = NULL;
	c->on_readable = on_readable;
	c->on_writable = on_writable;
	c->arg = arg;
	c->adopt_release = NULL;
	c->adopt_arg = NULL;
	c->in = px_conn_buf_new();
	c->out = px_conn_buf_new();
	if (c->in == NULL || c->out == NULL)
		return -1;
	event_assign(&c->rd, base, fd, EV_READ | EV_PERSIST, px_conn_rd_event, c);
	event_assign(&c->wr, base, fd, EV_WRITE | EV_PERSIST, px_conn_wr_event, c);
	return 0;
}

void
px_conn_adopt(struct px_conn *c, void (*release)(void *), void *arg)
{
	c->adopt_release = release;
	c->adopt_arg = arg;
	if (c->rd_on)
		px_conn_adopt_done(c);
}

void
px_conn_close(struct px_conn *c)
{
	if (c->adopt_release != NULL)
		px_conn_adopt_done(c);
	/* (read_first: active, not added; deleting takes it off the queue.) */
	if (c->rd_on || c->read_first)
		event_del(&c->rd);
	if (c->wr_on)
		event_del(&c->wr);
	c->rd_on = c->wr_on = c->reading = c->read_first = false;
	if (c->tf != NULL && c->tf->free != NULL)
		c->tf->free(c->tf_state);
	if (c->tf_next != NULL && c->tf_next->free != NULL)
		c->tf_next->free(c->tf_next_state);
	c->tf = c->tf_next = NULL;
	c->tf_state = c->tf_next_state = NULL;
	px_conn_buf_free(c->in);
	px_conn_buf_free(c->out);
	c->in = c->out = NULL;
	c->fd = -1;
}

void
px_conn_set_transform(struct px_conn *c, const struct px_conn_transform *tf,
    void *state)
{
	if (c->tf_next != NULL && c->tf_next->free != NULL)
		c->tf_next->free(c->tf_next_state);
	c->tf_next = NULL;
	c->tf_next_state = NULL;
	if (c->out != NULL && evbuffer_get_length(c->out) != 0) {
		c->tf_next = tf;
		c->tf_next_state = state;
		px_conn_update(c);
		return;
	}
	if (c->tf != NULL && c->tf->free != NULL)
		c->tf->free(c->tf_state);
	c->tf = tf;
	c->tf_state = state;
}

/* What was queued before a deferred transform is written: it takes over. */
static void
px_conn_take_next(struct px_conn *c)
{
	if (c->tf_next == NULL || evbuffer_get_length(c->out) != 0)
		return;
	if (c->tf != NULL && c->tf->free != NULL)
		c->tf->free(c->tf_state);
	c->tf = c->tf_next;
	c->tf_state = c->tf_next_state;
	c->tf_next = NULL;
	c->tf_next_state = NULL;
}

void
px_conn_move_transform(struct px_conn *to, struct px_conn *from)
{
	to->tf = from->tf;
	to->tf_state = from->tf_state;
	from->tf = NULL;
	from->tf_state = NULL;
}

static void px_conn_kick_pending(struct px_conn *c);

int
px_conn_handshake(struct px_conn *c)
{
	enum px_conn_want want = PX_CONN_WANT_READ;

	if (c->tf == NULL || c->tf->handshake == NULL)
		return 0;
	if (c->tf->handshake(c, &want) == 0) {
		c->read_want = PX_CONN_WANT_NONE;
		px_conn_update(c);
		/* The peer's first bytes, read with its last handshake
		 * message, wait in the transform. */
		px_conn_kick_pending(c);
		return 0;
	}
	if (errno != EAGAIN)
		return -1;
	/* Waits like a read: "readable" when the socket lets it go on. */
	c->reading = true;
	c->read_want = want == PX_CONN_WANT_WRITE ? PX_CONN_WANT_WRITE :
	    PX_CONN_WANT_NONE;
	px_conn_update(c);
	errno = EAGAIN;
	return -1;
}

/* A transform may hold decoded bytes the socket will never announce:
 * report them as readable from the loop. */
static void
px_conn_kick_pending(struct px_conn *c)
{
	if (c->reading && (c->held_end || (c->tf != NULL &&
	    c->tf->pending != NULL && c->tf->pending(c) > 0)))
		event_active(&c->rd, EV_READ, 0);
}

void
px_conn_read_enable(struct px_conn *c, bool on)
{
	c->reading = on;
	px_conn_update(c);
	px_conn_kick_pending(c);
}

void
px_conn_read_first(struct px_conn *c)
{
	c->reading = true;
	c->read_first = true;
	event_active(&c->rd, EV_READ, 1);
}

const char *
px_conn_strerror(const struct px_conn *c, int err)
{
	const char *why;

	if (err == EPROTO && c->tf != NULL && c->tf->last_error != NULL &&
	    (why = c->tf->last_error(c)) != NULL)
		return why;
	return strerror(err);
}

void
px_conn_want_writable(struct px_conn *c, bool on)
{
	c->write_want = on ? PX_CONN_WANT_WRITE : PX_CONN_WANT_NONE;
	px_conn_update(c);
}

bool
px_conn_unread(const struct px_conn *c)
{
	char b;

	if (c->fd == -1)
		return false;
	if (c->held_end || (c->tf != NULL && c->tf->pending != NULL &&
	    c->tf->pending(c) > 0))
		return true;
	/* A peek, not FIONREAD: that counts bytes and misses a FIN. */
	return recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != -1 ||
	    (errno != EAGAIN && errno != EWOULDBLOCK);
}

size_t
px_conn_unacked(const struct px_conn *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int n = 0;

	if (c->fd == -1)
		return 0;
	/* Reset or closed: nothing more will be (the count stays). */
	if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	    ti.tcpi_state != TCP_ESTABLISHED && ti.tcpi_state != TCP_CLOSE_WAIT)
		return 0;
	if (ioctl(c->fd, SIOCOUTQ, &n) == -1 || n < 0)
		return 0;
	return (size_t)n;
}

/* The loop's cached time (ms, its low 16 bits): the same in one pass. */
static uint16_t
px_conn_tick(const struct px_conn *c)
{
	struct timeval tv;

	if (event_base_gettimeofday_cached(event_get_base(&c->rd), &tv) == -1)
		return 0;
	return (uint16_t)((uint64_t)tv.tv_sec * 1000 +
	    (uint64_t)tv.tv_usec / 1000);
}

bool
px_conn_quiet(const struct px_conn *c)
{
	/* A short plain read's FIN is reported from the next poll on; a
	 * later pass in the same coarse tick is taken for this one (the
	 * caller then asks the kernel). */
	if (c->drained && c->drained_short &&
	    px_conn_tick(c) == c->drained_tick)
		return false;
	return c->drained && c->rd_on && !c->held_end &&
	    (c->rd.ev_evcallback.evcb_flags & (EVLIST_ACTIVE |
	    EVLIST_ACTIVE_LATER)) == 0 && (c->tf == NULL ||
	    c->tf->pending == NULL || c->tf->pending(c) == 0);
}

bool
px_conn_write_blocked(const struct px_conn *c)
{
	return c->write_want != PX_CONN_WANT_NONE;
}

/* One read through the slot into iov; the plain socket reads all of iov
 * with one readv. */
static ssize_t
px_conn_read_iov(struct px_conn *c, struct iovec *iov, int k,
    enum px_conn_want *want)
{
	ssize_t n, total = 0;
	int i;

	*want = PX_CONN_WANT_READ;
	if (c->tf == NULL)
		return readv(c->fd, iov, k);
	/* A transform (TLS) gives one record, 16 KB at most, per read: keep
	 * reading until the room is full or it would block, so one wake-up
	 * moves what the socket has, as the plain readv does. */
	for (i = 0; i < k; i++) {
		size_t off = 0;

		while (off < iov[i].iov_len) {
			n = c->tf->read(c, (char *)iov[i].iov_base + off,
			    iov[i].iov_len - off, want);
			if (n <= 0 && total > 0 && (n == 0 ||
			    (errno != EAGAIN && errno != EWOULDBLOCK))) {
				/* close_notify or a failure right after data:
				 * keep it for the next recv and come back for
				 * it from the loop. */
				c->held_end = true;
				c->held_errno = n == 0 ? 0 : errno;
				if (c->reading)
					event_active(&c->rd, EV_READ, 0);
			}
			if (n <= 0)
				return total > 0 ? total : n;
			off += (size_t)n;
			total += n;
		}
	}
	return total;
}

ssize_t
px_conn_recv(struct px_conn *c, size_t room)
{
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	enum px_conn_want want;
	ssize_t n, left;
	int k, i;

	/* No room is not an end: a zero-length read would look like EOF.
	 * Nor are bytes read in plain that belong to a transform waiting. */
	c->drained = false;	/* unless this read finds it empty */
	if (room == 0 || c->tf_next != NULL) {
		errno = EAGAIN;
		return -1;
	}
	if (c->held_end) {
		c->held_end = false;
		if (c->held_errno == 0) {
			c->eof = true;
			return 0;
		}
		errno = c->held_errno;
		return -1;
	}
	if (room > PX_CONN_READ_MAX)
		room = PX_CONN_READ_MAX;
	if ((k = evbuffer_reserve_space(c->in, (ev_ssize_t)room, v, 2)) < 1) {
		errno = ENOMEM;
		return -1;
	}
	/* The reserved extents may be larger than asked: read no more than
	 * room (the backpressure and bandwidth bounds rest on it). */
	left = (ssize_t)room;
	for (i = 0; i < k; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len < (size_t)left ? v[i].iov_len :
		    (size_t)left;
		left -= (ssize_t)iov[i].iov_len;
	}
	n = px_conn_read_iov(c, iov, k, &want);
	if (n <= 0) {
		int err = errno;

		evbuffer_commit_space(c->in, v, 0);
		if (n == 0)
			c->eof = true;
		else if (err == EAGAIN || err == EWOULDBLOCK) {
			/* Plain: the read event already waits for this. */
			c->read_want = want == PX_CONN_WANT_WRITE ?
			    PX_CONN_WANT_WRITE : PX_CONN_WANT_NONE;
			px_conn_update(c);
			c->drained = c->rd_on;	/* empty, and watched */
			c->drained_short = false;
		}
		errno = err;
		return n;
	}
	if (c->read_want != PX_CONN_WANT_NONE) {
		c->read_want = PX_CONN_WANT_NONE;
		px_conn_update(c);
	}
	/* Short of its room: the socket had no more (a transform's read
	 * stops short only where it would block, or at a held end). */
	c->drained = left + n < (ssize_t)room && c->rd_on;
	/* A transform's read went on to EAGAIN or its end; readv did not. */
	if ((c->drained_short = c->drained && c->tf == NULL))
		c->drained_tick = px_conn_tick(c);
	left = n;
	for (i = 0; i < k; i++) {
		if ((size_t)left < v[i].iov_len)
			v[i].iov_len = (size_t)left;
		left -= (ssize_t)v[i].iov_len;
	}
	evbuffer_commit_space(c->in, v, k);
	px_conn_kick_pending(c);
	return n;
}

/* One write of what c->out holds: bytes written, or -1 with errno. */
static ssize_t
px_conn_write_once(struct px_conn *c, enum px_conn_want *want)
{
	struct evbuffer_iovec v;
	unsigned char *p;
	size_t len;
	ssize_t n;

	*want = PX_CONN_WANT_WRITE;
	if (c->tf == NULL) {
		/* A file segment (a scan's spool, spool.h) goes by sendfile,
		 * whose EAGAIN libevent reports as 0: the kernel pushes back,
		 * it is no dead end. (A stream socket never takes 0 of a
		 * non-empty writev otherwise.) */
		if ((n = evbuffer_write(c->out, c->fd)) == 0) {
			errno = EAGAIN;
			return -1;
		}
		return n;
	}
	if (evbuffer_peek(c->out, -1, NULL, &v, 1) < 1)
		return 0;
	/* A record per write (TLS: each its own write(2)): one as full as
	 * the output allows, not one per chunk of it (an HTTP/2 frame, a
	 * small server read), for the copy of at most a record. */
	if (v.iov_len < PX_CONN_RECORD && (len = evbuffer_get_length(c->out)) >
	    v.iov_len) {
		len = len < PX_CONN_RECORD ? len : PX_CONN_RECORD;
		if ((p = evbuffer_pullup(c->out, (ev_ssize_t)len)) != NULL) {
			v.iov_base = p;
			v.iov_len = len;
		}
	}
	n = c->tf->write(c, v.iov_base, v.iov_len, want);
	if (n > 0)
		evbuffer_drain(c->out, (size_t)n);
	return n;
}

int
px_conn_send(struct px_conn *c)
{
	enum px_conn_want want = PX_CONN_WANT_NONE;
	ssize_t n;

	while (evbuffer_get_length(c->out) != 0) {
		if ((n = px_conn_write_once(c, &want)) > 0)
			continue;
		if (n == 0) {
			/* Nothing taken with bytes to give: no progress is
			 * possible, and retrying would spin. */
			errno = EPIPE;
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		return -1;
	}
	c->write_want = evbuffer_get_length(c->out) != 0 ? want :
	    PX_CONN_WANT_NONE;
	px_conn_take_next(c);
	if (c->write_want == PX_CONN_WANT_NONE && c->shut_pending && !c->shut)
		return px_conn_shutdown(c);
	px_conn_update(c);
	return 0;
}

int
px_conn_shutdown(struct px_conn *c)
{
	enum px_conn_want want = PX_CONN_WANT_NONE;

	if (c->shut)
		return 0;
	c->shut_pending = true;
	if (evbuffer_get_length(c->out) != 0)
		return 0;	/* px_conn_send() comes back here at empty */
	if (c->tf != NULL && c->tf->shutdown != NULL &&
	    c->tf->shutdown(c, &want) == -1) {
		if (errno != EAGAIN) {
			c->shut_want = PX_CONN_WANT_NONE;
			px_conn_update(c);
			return -1;
		}
		c->shut_want = want;
		px_conn_update(c);
		return 0;
	}
	c->shut_want = PX_CONN_WANT_NONE;
	c->shut = true;
	(void)shutdown(c->fd, SHUT_WR);
	px_conn_update(c);
	return 0;
}
