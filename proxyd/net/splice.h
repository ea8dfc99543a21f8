/* One splice(2) pump: socket -> pipe -> socket for one direction, with the
 * pipe as the whole buffer (a direction reads only while its pipe is
 * empty, so a slow reader stops the other side's reads). Used by the plug
 * relay, tunnels and data channels alike; it knows nothing of sessions and
 * reports through its callbacks. */
#ifndef PX_SPLICE_H
#define PX_SPLICE_H

#include "event_want.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/queue.h>

#include <event2/event_struct.h>

struct event_base;
struct event;


/* Empty pipes kept for reuse: creating and sizing one costs 3 syscalls.
 * One pool per worker, touched by that worker only. */
#define PX_PIPE_POOL	64	/* pipes in flight at once, not per session */
struct px_pipe_pool {
	int		 fds[PX_PIPE_POOL][2];
	int		 cap[PX_PIPE_POOL];	/* what the kernel granted */
	int		 n;
	int		 size;			/* what was asked for */
	bool		 warned;		/* about getting less */
	unsigned	 owner;			/* worker id, for the warning */
};

/* A pipe asking for `size` bytes: its real capacity (an unprivileged user
 * may get less), or -1 with errno. */
int	px_pipe_get(struct px_pipe_pool *p, int fds[2], int size);
/* Kept for reuse when empty and of the pool's size, else closed. */
void	px_pipe_put(struct px_pipe_pool *p, int fds[2], int cap, int size,
	    bool empty);
void	px_pipe_pool_flush(struct px_pipe_pool *p);

enum px_splice_fail {
	PX_SPLICE_READ = 0,	/* the source socket failed */
	PX_SPLICE_WRITE,	/* the destination socket failed */
};

struct px_splice;

/* What a pump reports. After `done` or `failed` the pump has stopped and
 * is not touched again by px_splice_run(): the owner may free it there. */
struct px_splice_ops {
	/* n bytes reached the destination socket during this pass. */
	void	(*moved)(void *arg, struct px_splice *sp, size_t n);
	/* The source gave EOF and everything it sent is written. */
	void	(*done)(void *arg, struct px_splice *sp);
	/* A bounded pump (px_splice_bound) wrote its last byte: how many
	 * more it may read (what moved is reported first); 0 stops it, then
	 * `reached`. NULL: none, it stops. */
	uint64_t (*more)(void *arg, struct px_splice *sp);
	/* A bounded pump (px_splice_bound) wrote its last byte. NULL only
	 * for pumps that are never bounded. */
	void	(*reached)(void *arg, struct px_splice *sp);
	void	(*failed)(void *arg, struct px_splice *sp,
		    enum px_splice_fail where, int err);
};

struct px_splice {
	const struct px_splice_ops *ops;
	void		*arg;
	int		 from, to;
	int		 pipe[2];	/* -1: none (idle: back in the pool) */
	struct px_pipe_pool *pool;
	size_t		 pipe_cap;	/* its real capacity */
	int		 pipe_size;	/* what was asked for it */
	size_t		 in_pipe;	/* read but not yet written */
	bool		 eof;		/* the source gave EOF */
	bool		 closing;	/* epoll saw its FIN (EV_CLOSED) */
	bool		 bounded;	/* stop after `left` more bytes */
	uint64_t	 left;		/* bounded: not yet read */
	bool		 stopped;	/* done, failed or released */
	struct event	 rd;		/* EV_READ | EV_CLOSED on from */
	struct event	 wr;		/* EV_WRITE on to */
	bool		 rd_on, wr_on;
};

/* Takes a pipe from the pool and sets the events up; nothing is read until
 * px_splice_start(). 0, or -1 with errno (out of pipes). The pipe goes
 * back to the pool whenever it is empty and the pump waits for its
 * source, and is taken again when bytes come: an idle direction holds no
 * descriptor but its sockets'. */
int	px_splice_init(struct px_splice *sp, struct event_base *base,
	    struct px_pipe_pool *pool, int from, int to, int size,
	    const struct px_splice_ops *ops, void *arg);
/* Makes an initialised pump stop once n more bytes are written (then
 * ops->more, ops->reached); it reads no byte past them (n = 0: none). */
void	px_splice_bound(struct px_splice *sp, uint64_t n);
/* A bounded pump that stopped at its bound (ops->reached) goes on for n
 * more bytes, at once. */
void	px_splice_extend(struct px_splice *sp, uint64_t n);
/* Runs the pump once now (the source's bytes are often waiting already),
 * or only arms the read event when `now` is false. A bounded pump whose
 * pipe already holds a few bytes (a head, PIPE_BUF at most) first reads
 * the source in behind them: one splice then writes both. */
void	px_splice_start(struct px_splice *sp, bool now);
/* Moves what it can now; may call the ops (see above). */
void	px_splice_run(struct px_splice *sp);
/* Stops the events and gives the pipe back; safe to call twice. */
void	px_splice_release(struct px_splice *sp, struct px_pipe_pool *pool);
bool	px_splice_active(const struct px_splice *sp);

#endif
