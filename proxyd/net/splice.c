/* The one splice(2) pump (see splice.h). */
#include "splice.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"

#define PX_SPLICE_ROUNDS	16	/* per wakeup, for fairness */

/* ---- pipes ------------------------------------------------------------ */

void
px_pipe_pool_flush(struct px_pipe_pool *p)
{
	while (p->n > 0) {
		p->n--;
		close(p->fds[p->n][0]);
		close(p->fds[p->n][1]);
	}
}

int
px_pipe_get(struct px_pipe_pool *p, int fds[2], int size)
{
	int cap;

	if (p->size != size) {
		px_pipe_pool_flush(p);
		p->size = size;
	}
	if (p->n > 0) {
		p->n--;
		fds[0] = p->fds[p->n][0];
		fds[1] = p->fds[p->n][1];
		return p->cap[p->n];
	}
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == -1)
		return -1;
	/* Best effort: above /proc/sys/fs/pipe-max-size, or past the
	 * per-user pipe page limits, an unprivileged process gets less;
	 * the pump then moves smaller chunks. */
	if ((cap = fcntl(fds[1], F_SETPIPE_SZ, size)) == -1 &&
	    (cap = fcntl(fds[1], F_GETPIPE_SZ)) == -1)
		cap = 4096;
	if (cap < size && !p->warned) {
		p->warned = true;
		px_log(LOG_WARNING, 0, "worker %u: splice pipes get %d bytes, not "
		    "the %d of limits/@buffer: raise /proc/sys/fs/pipe-max-size "
		    "or run with CAP_SYS_RESOURCE", p->owner, cap, size);
	}
	return cap;
}

void
px_pipe_put(struct px_pipe_pool *p, int fds[2], int cap, int size, bool empty)
{
	/* A pipe asked for an older limits/@buffer is not kept. */
	if (empty && size == p->size && p->n < PX_PIPE_POOL) {
		p->fds[p->n][0] = fds[0];
		p->fds[p->n][1] = fds[1];
		p->cap[p->n] = cap;
		p->n++;
		return;
	}
	close(fds[0]);
	close(fds[1]);
}

/* ---- the pump --------------------------------------------------------- */

static void
px_splice_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_splice *sp = arg;

	(void)fd;
	/* The source's FIN is queued behind its bytes (EPOLLRDHUP): after a
	 * short read the next one gives EOF, not EAGAIN. */
	if (what & EV_CLOSED)
		sp->closing = true;
	px_splice_run(sp);
}

int
px_splice_init(struct px_splice *sp, struct event_base *base,
    struct px_pipe_pool *pool, int from, int to, int size,
    const struct px_splice_ops *ops, void *arg)
{
	int cap;

	sp->pipe[0] = sp->pipe[1] = -1;
	sp->stopped = true;
	if ((cap = px_pipe_get(pool, sp->pipe, size)) == -1) {
		sp->pipe[0] = sp->pipe[1] = -1;
		return -1;
	}
	sp->pool = pool;
	sp->ops = ops;
	sp->arg = arg;
	sp->from = from;
	sp->to = to;
	sp->pipe_cap = (size_t)cap;
	sp->pipe_size = size;
	sp->in_pipe = 0;
	sp->eof = sp->closing = false;
	sp->bounded = false;
	sp->left = 0;
	sp->stopped = false;
	sp->rd_on = sp->wr_on = false;
	event_assign(&sp->rd, base, from, EV_READ | EV_CLOSED | EV_PERSIST,
	    px_splice_cb, sp);
	event_assign(&sp->wr, base, to, EV_WRITE | EV_PERSIST, px_splice_cb, sp);
	return 0;
}

void
px_splice_bound(struct px_splice *sp, uint64_t n)
{
	sp->bounded = true;
	sp->left = n;
}

static void px_splice_pump(struct px_splice *, bool);

void
px_splice_extend(struct px_splice *sp, uint64_t n)
{
	px_splice_bound(sp, n);
	sp->stopped = false;
	px_splice_pump(sp, false);
}

/* A bounded pump that starts with bytes in its pipe (a frame head its
 * owner wrote there, PIPE_BUF at most: one of the pipe's pages): what
 * follows them is read in behind, so that one splice writes head and body.
 * True when that read was short (the socket is likely empty); a failure
 * is left for the pump's own read to meet. */
static bool
px_splice_fill(struct px_splice *sp)
{
	size_t want;
	ssize_t n;

	if (sp->in_pipe == 0 || sp->in_pipe > PIPE_BUF || !sp->bounded ||
	    sp->left == 0 || sp->pipe_cap <= PIPE_BUF)
		return false;
	/* The pages the head leaves free. */
	want = sp->pipe_cap - PIPE_BUF;
	if (sp->left < want)
		want = (size_t)sp->left;
	n = splice(sp->from, NULL, sp->pipe[1], NULL, want,
	    SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
	if (n <= 0)
		return false;
	sp->in_pipe += (size_t)n;
	sp->left -= (uint64_t)n;
	return (size_t)n < want;
}

void
px_splice_start(struct px_splice *sp, bool now)
{
	if (now && !sp->stopped)
		px_splice_pump(sp, px_splice_fill(sp));
	else if (!now)
		px_event_want(&sp->rd, &sp->rd_on, true);
}

bool
px_splice_active(const struct px_splice *sp)
{
	return !sp->stopped;
}

static void
px_splice_stop(struct px_splice *sp)
{
	sp->stopped = true;
	px_event_want(&sp->rd, &sp->rd_on, false);
	px_event_want(&sp->wr, &sp->wr_on, false);
}

void
px_splice_release(struct px_splice *sp, struct px_pipe_pool *pool)
{
	px_splice_stop(sp);
	if (sp->pipe[0] == -1)
		return;
	px_pipe_put(pool, sp->pipe, (int)sp->pipe_cap, sp->pipe_size,
	    sp->in_pipe == 0);
	sp->pipe[0] = sp->pipe[1] = -1;
}

/* Waiting for the source with nothing in the pipe: the pipe goes back to
 * the pool (two descriptors per idle direction). */
static void
px_splice_idle(struct px_splice *sp)
{
	px_event_want(&sp->rd, &sp->rd_on, true);
	if (sp->in_pipe != 0 || sp->pipe[0] == -1)
		return;
	px_pipe_put(sp->pool, sp->pipe, (int)sp->pipe_cap, sp->pipe_size,
	    true);
	sp->pipe[0] = sp->pipe[1] = -1;
}

/* Bytes may come: a pipe again. 0, or -1 with errno. */
static int
px_splice_need_pipe(struct px_splice *sp)
{
	int cap;

	if (sp->pipe[0] != -1)
		return 0;
	if ((cap = px_pipe_get(sp->pool, sp->pipe, sp->pipe_size)) == -1) {
		sp->pipe[0] = sp->pipe[1] = -1;
		return -1;
	}
	sp->pipe_cap = (size_t)cap;
	return 0;
}

/* After splice() said EAGAIN: if the socket sits at the urgent mark, read
 * past it into the (empty) pipe. Returns bytes moved, 0 at EOF, or -1
 * with errno (EAGAIN: nothing to read after all). */
static ssize_t
px_splice_past_urgent(struct px_splice *sp, size_t want)
{
	char buf[16384];
	int atmark = 0;
	ssize_t n, w;

	if (ioctl(sp->from, SIOCATMARK, &atmark) == -1 || !atmark) {
		errno = EAGAIN;
		return -1;
	}
	n = recv(sp->from, buf, sizeof(buf) < want ? sizeof(buf) : want,
	    MSG_DONTWAIT);
	if (n <= 0)
		return n;
	/* The pipe is empty and at least 4k: this cannot be short. */
	w = write(sp->pipe[1], buf, (size_t)n);
	if (w != n) {
		errno = w == -1 ? errno : EIO;
		return -1;
	}
	return n;
}

/* What px_splice_no_pipe() did. */
enum px_np {
	PX_NP_MOVED = 0,	/* *n bytes went from source to destination */
	PX_NP_EOF,		/* the source ended */
	PX_NP_NO_INPUT,		/* nothing to read */
	PX_NP_BLOCKED,		/* the destination takes nothing now */
	PX_NP_READ_ERR,		/* errno */
	PX_NP_WRITE_ERR,	/* errno */
};

/* No descriptor left for a pipe (an idle session woke while the process
 * is at its limit): bytes go through the stack instead, peeked from the
 * source and consumed only as far as the destination took them, so that
 * nothing needs to be kept between calls. Slow, but the session goes on
 * instead of failing. */
static enum px_np
px_splice_no_pipe(struct px_splice *sp, size_t want, size_t *n)
{
	char buf[16384];
	ssize_t r, w;

	if (want > sizeof(buf))
		want = sizeof(buf);
	r = recv(sp->from, buf, want, MSG_PEEK | MSG_DONTWAIT);
	if (r == 0)
		return PX_NP_EOF;
	if (r == -1)
		return errno == EAGAIN || errno == EINTR ? PX_NP_NO_INPUT :
		    PX_NP_READ_ERR;
	w = send(sp->to, buf, (size_t)r, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w == -1)
		return errno == EAGAIN || errno == EINTR ? PX_NP_BLOCKED :
		    PX_NP_WRITE_ERR;
	/* The bytes are still there (only this thread reads the socket). */
	if (recv(sp->from, buf, (size_t)w, MSG_DONTWAIT) != w) {
		errno = EIO;
		return PX_NP_READ_ERR;
	}
	*n = (size_t)w;
	return PX_NP_MOVED;
}

/* Reports what moved, then (fail: where >= 0) the failure. */
static void
px_splice_report(struct px_splice *sp, size_t moved, int where, int err)
{
	if (moved != 0 && sp->ops->moved != NULL)
		sp->ops->moved(sp->arg, sp, moved);
	if (where >= 0) {
		px_splice_stop(sp);
		sp->ops->failed(sp->arg, sp, (enum px_splice_fail)where, err);
	}
}

void
px_splice_run(struct px_splice *sp)
{
	px_splice_pump(sp, false);
}

/* drained: the last read was short (see px_splice_fill). */
static void
px_splice_pump(struct px_splice *sp, bool drained)
{
	int rounds = 0;
	size_t moved = 0, want;
	ssize_t n;

	if (sp->stopped)
		return;
	for (;;) {
		if (sp->in_pipe > 0) {
			/* More of a bounded run is due: let TCP fill its
			 * segments rather than push a short one now. */
			n = splice(sp->pipe[0], NULL, sp->to, NULL, sp->in_pipe,
			    SPLICE_F_NONBLOCK | SPLICE_F_MOVE |
			    (sp->bounded && sp->left > 0 ? SPLICE_F_MORE : 0));
			if (n > 0) {
				sp->in_pipe -= (size_t)n;
				moved += (size_t)n;
				continue;
			}
			if (n == -1 && errno == EINTR)
				continue;
			if (n == -1 && errno == EAGAIN) {
				/* The peer is slow: stop reading, wait to write. */
				px_event_want(&sp->rd, &sp->rd_on, false);
				px_event_want(&sp->wr, &sp->wr_on, true);
				break;
			}
			px_splice_report(sp, moved, PX_SPLICE_WRITE,
			    n == -1 ? errno : EPIPE);
			return;
		}
		px_event_want(&sp->wr, &sp->wr_on, false);
		if (sp->eof) {
			px_splice_report(sp, moved, -1, 0);
			px_splice_stop(sp);
			sp->ops->done(sp->arg, sp);
			return;
		}
		if (sp->bounded && sp->left == 0) {
			px_splice_report(sp, moved, -1, 0);
			moved = 0;
			if (sp->ops->more != NULL && !sp->stopped &&
			    (sp->left = sp->ops->more(sp->arg, sp)) > 0)
				continue;
			px_splice_stop(sp);
			sp->ops->reached(sp->arg, sp);
			return;
		}
		/* A short read left the socket empty: skip the read that would
		 * only say EAGAIN; level-triggered epoll reports what's left.
		 * Unless the FIN is there: that read gives EOF now, one epoll
		 * turn early. */
		if (drained && !sp->closing) {
			px_splice_idle(sp);
			break;
		}
		if (++rounds > PX_SPLICE_ROUNDS) {
			px_event_want(&sp->rd, &sp->rd_on, true);
			break;
		}
		want = sp->pipe_cap;
		if (sp->bounded && sp->left < want)
			want = (size_t)sp->left;
		if (px_splice_need_pipe(sp) == -1) {
			size_t got = 0;

			if (errno != EMFILE && errno != ENFILE) {
				px_splice_report(sp, moved, PX_SPLICE_READ,
				    errno);
				return;
			}
			switch (px_splice_no_pipe(sp, want, &got)) {
			case PX_NP_MOVED:
				moved += got;
				if (sp->bounded)
					sp->left -= got;
				continue;
			case PX_NP_EOF:
				sp->eof = true;
				continue;
			case PX_NP_NO_INPUT:
				px_event_want(&sp->rd, &sp->rd_on, true);
				break;
			case PX_NP_BLOCKED:
				px_event_want(&sp->rd, &sp->rd_on, false);
				px_event_want(&sp->wr, &sp->wr_on, true);
				break;
			case PX_NP_READ_ERR:
				px_splice_report(sp, moved, PX_SPLICE_READ,
				    errno);
				return;
			case PX_NP_WRITE_ERR:
				px_splice_report(sp, moved, PX_SPLICE_WRITE,
				    errno);
				return;
			}
			break;
		}
		n = splice(sp->from, NULL, sp->pipe[1], NULL, want,
		    SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
		/* splice() stops for good at TCP urgent data while epoll keeps
		 * saying readable: a spin and a stall. recv() steps over the
		 * urgent byte (as any reader without SO_OOBINLINE does) and its
		 * bytes go into the empty pipe. */
		if (n == -1 && errno == EAGAIN)
			n = px_splice_past_urgent(sp, want);
		if (n > 0) {
			sp->in_pipe = (size_t)n;
			if (sp->bounded)
				sp->left -= (uint64_t)n;
			drained = (size_t)n < want;
			continue;
		}
		if (n == 0) {
			sp->eof = true;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			px_splice_idle(sp);
			break;
		}
		px_splice_report(sp, moved, PX_SPLICE_READ, errno);
		return;
	}
	px_splice_report(sp, moved, -1, 0);
}
