/* Moving bytes between two sockets, the client's (side 0) and the
 * server's (side 1), until both directions ended. It knows no session:
 * what it moved, what an analyser says of the bytes and how it ended go
 * to its owner through struct px_relay_ops.
 *
 * Splice path: one px_splice pump per direction (splice.h); payload never
 * enters user space and each direction's pipe is its whole buffer.
 *
 * Buffered path: two conns (conn.h), for bandwidth limits, TLS and
 * analysers that see the bytes. The le-proxy pattern: a side stops reading while its
 * peer's output holds `buffer` bytes and resumes at half; bytes are written
 * as soon as they are read, the write event polled only while the kernel
 * pushes back. */
#ifndef PX_RELAY_H
#define PX_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyser-t.h"
#include "bucket.h"
#include "conn.h"
#include "splice.h"

struct evbuffer;
struct event_base;

struct px_relay_ops {
	/* Buffered only: the conn of side (0 client, 1 server) is open and
	 * nothing moved yet; the owner may fill its transform slot (TLS).
	 * 0, or -1 (the relay does not start). NULL: plain. */
	int	(*prepare)(void *arg, int side, struct px_conn *c);
	/* n bytes in direction dir were written to the kernel (splice) or
	 * queued for it (buffered: see px_relay_free's unsent); 0: bytes
	 * moved without a new one queued (progress, for idle timers). */
	void	(*moved)(void *arg, enum px_dir dir, size_t n);
	/* Buffered only: what side dir's source sent, before it is passed on
	 * (on_data's contract). NULL: pass everything. */
	enum px_verdict (*analyse)(void *arg, enum px_dir dir,
		    struct evbuffer *in);
	/* The analyser answered PX_DENY or PX_ERROR: the owner ends or
	 * finishes; the relay stops reading. */
	void	(*verdict)(void *arg, enum px_verdict v);
	/* The relay is over: both directions ended (by: PX_END_CLIENT or
	 * PX_END_SERVER, whoever closed first; without half-close the first
	 * EOF ends it) or a socket failed (PX_END_CLIENT_FAIL or
	 * PX_END_SERVER_FAIL, with the reason). The owner then frees it. */
	void	(*ended)(void *arg, enum px_end_by by, const char *reason);
	/* px_relay_finish() is done: both outputs are written. */
	void	(*flushed)(void *arg);
};

struct px_relay_limits {
	size_t		 buffer;	/* per direction */
	/* prepare() puts transforms (TLS) on the conns: the buffered path. */
	bool		 transforms;
	uint64_t	 session_rate;	/* bytes/s per direction, 0: none */
	struct px_bucket *shared;	/* [2] by px_dir, the worker's; NULL */
};

struct px_relay {
	const struct px_relay_ops *ops;
	void		*arg;
	struct event_base *base;
	struct px_pipe_pool *pipes;
	int		 fd[2];		/* client, server */
	enum px_relay_mode mode;
	bool		 half_close;
	bool		 running;
	struct px_relay_limits lim;

	/* One mode's state at a time (an idle plug session's memory: 700
	 * bytes saved). sp: PX_RELAY_SPLICE only; conn: PX_RELAY_BUFFERED,
	 * each valid once conn_open says so. */
	union {
		struct px_splice sp[2];		/* splice, by px_dir */
		struct px_conn	 conn[2];	/* buffered, by side */
	};
	bool		 conn_open[2];
	bool		 shut[2];	/* our direction to that side ended */
	bool		 paused[2];	/* reading stopped: peer's output full */
	bool		 rate_paused[2]; /* reading stopped: bandwidth used up */
	bool		 read_held[2];	/* by side: px_relay_hold_read */
	bool		 rl_on;
	struct px_bucket rl[2];		/* session_rate, by px_dir */
	struct event	 rl_timer;
	bool		 rl_timer_set;
	bool		 finishing;

	bool		 eof_seen;
	enum px_end_by	 eof_by;	/* PX_END_CLIENT or PX_END_SERVER */

	/* A pass (px_relay_pass), by px_dir: bytes that go on unseen. */
	uint64_t	 pass_left[2];	/* not yet read from the source */
	uint64_t	 pass_owed[2];	/* what it lacked when the source ended */
	enum px_pass_state {
		PX_PASS_COPY = 0,	/* none, or through user space */
		PX_PASS_WAIT,		/* splice once the peer's output is written */
		PX_PASS_SPLICE,		/* the pump in pass[] moves them */
	}		 pass_state[2];
	/* The pumps of spliced passes, by px_dir: [2] made by the first
	 * (704 bytes a session that never passes should not hold). */
	struct px_splice *pass;
	uint64_t	 pass_spliced[2];	/* bytes, over the relay's life */
	size_t		 pass_then[2];	/* by px_dir: see px_relay_pass() */
	size_t		 pass_preload[2]; /* by px_dir: counted before the pump */
	/* By px_dir: what is queued for that peer while a pass runs (it
	 * follows the pass); px_relay_output() hands it out meanwhile. */
	struct evbuffer	*held[2];
	size_t		 read_cap[2];	/* by side: the next read's most, 0 none */
	/* By px_dir: the source's end waits (px_relay_hold_end). */
	bool		 end_held[2];
};

/* Starts relaying fd[0] (client) and fd[1] (server). Splice falls back to
 * buffered when no pipe can be had. 0, or -1 (the relay did not start;
 * free it). The ops may run inside this call. */
int	px_relay_start(struct px_relay *r, struct event_base *base,
	    struct px_pipe_pool *pipes, const int fd[2], enum px_relay_mode mode,
	    bool half_close, const struct px_relay_limits *lim,
	    const struct px_relay_ops *ops, void *arg);
/* Buffered only: stop reading both sides; ops->flushed once both outputs
 * are written (or ops->ended if a side fails meanwhile). */
void	px_relay_finish(struct px_relay *r);
/* Buffered only, from inside analyse(dir): after the bytes it leaves in
 * `in` (passed on as PX_PASS does), the next n bytes from dir's source go
 * on without analyse() seeing them: spliced when no transform or rate
 * limit is on and n is worth it, else copied. Meanwhile nothing else is
 * written to that peer (replies wait), so the n bytes stay whole. After a
 * spliced pass the first read takes at most `then` bytes (0: as usual),
 * so that the next frame's head comes alone and its body can be spliced
 * too. Returns true when the n bytes will be spliced. */
bool	px_relay_pass(struct px_relay *r, enum px_dir dir, uint64_t n,
	    size_t then);
/* Buffered only: the next read from dir's source takes at most n bytes
 * (the head of a frame that is likely to be big), when a pass could
 * splice its body; else nothing changes. The cap holds until a read gets
 * a byte; one that gets all n is followed at once by the next read. */
void	px_relay_read_head(struct px_relay *r, enum px_dir dir, size_t n);
/* Buffered only, from inside analyse(dir) once dir's source ended: that
 * end is not passed on (no FIN for the peer) until px_relay_resume()
 * releases it, or analyse(dir) itself does (hold false: passed on after
 * it returns, behind what it queued). What the analyser keeps meanwhile
 * is its own. */
void	px_relay_hold_end(struct px_relay *r, enum px_dir dir, bool hold);
/* Buffered only: dir's source is not read (hold) until this is called
 * again with false; what was read of it goes on meanwhile (a data
 * channel's byte quota waiting for its next lease). */
void	px_relay_hold_read(struct px_relay *r, enum px_dir dir, bool hold);
/* Buffered only, from outside the relay's callbacks: the analyser can go
 * on with dir (what it waited for came: room, a verdict). It runs again
 * over what dir's source sent and it left, what it queued is written,
 * and the source is read again; with release_end, a held end is passed
 * on after that. May end the relay (ops->ended): nothing of r after it. */
void	px_relay_resume(struct px_relay *r, enum px_dir dir, bool release_end);
/* The relay holds no byte and waits on both sources, neither ended: no
 * pipe with bytes in it, empty queues, no pass, hold, finish or
 * transform. Its two sockets can then be relayed by anyone else from
 * where it stands (a rolling upgrade's hand-over). */
bool	px_relay_quiet(const struct px_relay *r);
/* Bytes of the current pass in direction dir not read yet (0: none). */
uint64_t px_relay_pass_left(const struct px_relay *r, enum px_dir dir);
/* Buffered only, the server side plain and nothing passing: the server
 * side moves to fd (connected), what was queued for the old one with it
 * (an analyser that connects its server after the client spoke: FTP's
 * USER name@server), and its ops' prepare puts a transform on it (TLS
 * from the first byte: the hello is sent at once). The old socket stays
 * open, its owner's. 0, or -1 (the relay may have failed: its ops said
 * so). */
int	px_relay_set_server(struct px_relay *r, int fd);
/* Buffered only: where bytes for direction dir are queued, NULL if none
 * (during a pass in that direction, a buffer that follows the pass). */
struct evbuffer *px_relay_output(struct px_relay *r, enum px_dir dir);
bool	px_relay_input_closed(const struct px_relay *r, enum px_dir dir);
/* The buffered path's conn of side 0 (client) or 1 (server); NULL if none. */
const struct px_conn *px_relay_conn(const struct px_relay *r, int side);
/* Bytes of direction dir counted as moved but still in the buffered
 * path's queues (what px_relay_free would call unsent); 0 when splicing. */
size_t	px_relay_unsent(const struct px_relay *r, enum px_dir dir);
/* Stops everything and gives pipes back; the sockets stay open. unsent (by
 * px_dir, may be NULL) gets what the buffered path queued but the kernel
 * never took. Safe on a relay never started, and twice. */
void	px_relay_free(struct px_relay *r, uint64_t unsent[2]);
/* After px_relay_free, once none of the relay's code can be on the stack
 * (its callbacks may have freed it): the memory it kept until then. */
void	px_relay_dispose(struct px_relay *r);

#endif
