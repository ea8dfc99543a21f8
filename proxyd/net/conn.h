/* One socket end: its buffers, readiness, backpressure helpers, half-close,
 * and a transform slot (TLS fills it; none means plain recv/send). The only
 * code that reads or writes a buffered connection's socket. It knows no
 * session and no protocol: its owner gets two callbacks, "readable" and
 * "writable", already translated through the transform (a TLS record layer
 * that needs the socket writable to go on reading asks for it here, and the
 * owner still just sees "readable").
 *
 * Not bufferevents: those add and delete the write event around every
 * response and ask FIONREAD before every read (6 epoll_ctl and 4 ioctl per
 * keep-alive HTTP request, measured). This writes at once, polls for
 * writability only when the kernel pushes back, and reads into reserved
 * evbuffer space. */
#ifndef PX_CONN_H
#define PX_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/event_struct.h>

struct event_base;
struct evbuffer;
struct px_conn;

/* What a transform's read or write needs before it can go on. */
enum px_conn_want {
	PX_CONN_WANT_NONE = 0,
	PX_CONN_WANT_READ,	/* the socket readable */
	PX_CONN_WANT_WRITE,	/* the socket writable */
};

/* The transform slot. Each call works on the connection's socket (c->fd)
 * with the transform's own state (c->tf_state). read and write return
 * bytes (>0), 0 (read: the peer's orderly end), or -1 with errno; on
 * EAGAIN *want says which readiness lets it go on. */
struct px_conn_transform {
	const char	*name;
	ssize_t		(*read)(struct px_conn *c, void *buf, size_t len,
			    enum px_conn_want *want);
	ssize_t		(*write)(struct px_conn *c, const void *buf, size_t len,
			    enum px_conn_want *want);
	/* Ends our direction (TLS: close_notify). 0 done, -1 with errno
	 * (EAGAIN with *want: call again then). */
	int		(*shutdown)(struct px_conn *c, enum px_conn_want *want);
	/* Bytes already read from the socket and readable without it being
	 * readable (TLS: SSL_pending(), or records read ahead after a read
	 * that gave bytes). May be NULL: none ever. */
	size_t		(*pending)(const struct px_conn *c);
	/* Why the last call failed with EPROTO, for a log line ("tls: no
	 * shared cipher"); NULL when it has nothing to say. May be NULL. */
	const char	*(*last_error)(const struct px_conn *c);
	/* Runs the transform's opening exchange (TLS: the handshake) on its
	 * own. 0 done, -1 with errno (EAGAIN with *want). May be NULL:
	 * nothing to open. */
	int		(*handshake)(struct px_conn *c, enum px_conn_want *want);
	/* The socket turned readable while the connection sat idle (in the
	 * keep-alive pool): consume what the transform may take on its own
	 * (TLS 1.3 session tickets, a key update). 0: still clean and alive;
	 * -1: closed, or application bytes nobody asked for. May be NULL:
	 * any byte means it is gone. */
	int		(*idle_input)(void *state);
	/* Frees a state (the socket stays open). It takes the state alone so
	 * that a state parked without its conn (the keep-alive pool) can be
	 * freed too. May be NULL. */
	void		(*free)(void *state);
};

typedef void	(*px_conn_cb)(struct px_conn *c, void *arg);

struct px_conn {
	int		 fd;		/* -1: none */
	/* The last read found the socket empty (it came back short of its
	 * room), and the read event has been armed since, not reporting it
	 * readable: px_conn_quiet(). */
	bool		 drained;
	/* ... by a plain read that came back short (not by EAGAIN): a FIN
	 * queued behind its bytes stays unseen until the loop polls again,
	 * so drained is not trusted in the pass of that read (drained_tick:
	 * the loop's cached time then, in ms, its low 16 bits). */
	bool		 drained_short;
	uint16_t	 drained_tick;
	struct evbuffer	*in, *out;
	struct event	 rd, wr;
	bool		 rd_on, wr_on;
	bool		 reading;	/* the owner wants "readable" */
	bool		 read_first;	/* px_conn_read_first(): not watched yet */
	bool		 eof;		/* the peer ended its direction */
	bool		 shut;		/* our direction is ended */
	bool		 shut_pending;	/* end ours once out is written */
	/* A transform's read met the end (0) or an error after bytes in the
	 * same recv: those went up first, this is the next recv's answer
	 * (the socket may never say readable again for it). */
	bool		 held_end;
	int		 held_errno;	/* 0: end of stream */
	/* What the transform waits for, per operation. */
	enum px_conn_want read_want, write_want, shut_want;
	const struct px_conn_transform *tf;	/* NULL: plain socket */
	void		*tf_state;
	/* A transform set while bytes were queued (STARTTLS: the reply that
	 * says "go on in TLS"): it takes the slot once they are written;
	 * nothing is read meanwhile. */
	const struct px_conn_transform *tf_next;
	void		*tf_next_state;
	px_conn_cb	 on_readable, on_writable;
	void		*arg;
	/* Another event (a pooled connection's) still watches fd for
	 * reading: released once rd is armed or c closed (px_conn_adopt). */
	void		(*adopt_release)(void *);
	void		*adopt_arg;
};

/* Sets c up on fd (non-blocking, connected or connecting). Nothing is
 * polled until px_conn_read_enable() or a px_conn_send() that cannot
 * finish. 0, or -1 (out of memory). */
int	px_conn_open(struct px_conn *c, struct event_base *base, int fd,
	    px_conn_cb on_readable, px_conn_cb on_writable, void *arg);
/* fd came watched for reading by another event (a pooled connection's):
 * release(arg) deletes that one. It is called once c's own read event is
 * armed (or c closed), so the socket's epoll registration carries over
 * unchanged instead of a delete and an add (two epoll_ctl). */
void	px_conn_adopt(struct px_conn *c, void (*release)(void *), void *arg);
/* Frees the buffers a thread's closed conns left for its next ones (a
 * worker thread, before it exits). */
void	px_conn_thread_exit(void);
/* Frees the buffers, events and the transform's state; leaves the socket
 * open (its owner closes or parks it). Safe on a closed or zeroed conn. */
void	px_conn_close(struct px_conn *c);
/* Puts a transform into the slot: at once when nothing is queued in out,
 * else once that is written (a STARTTLS mid-stream), not reading until
 * then. A transform already there or waiting is freed first. */
void	px_conn_set_transform(struct px_conn *c,
	    const struct px_conn_transform *tf, void *state);
/* Takes `from`'s transform and its state (a TLS session handshaken on
 * `from`'s socket, moving to a relay's conn on the same socket); `from`
 * is left plain. */
void	px_conn_move_transform(struct px_conn *to, struct px_conn *from);
/* Runs the transform's handshake: 0 done (or nothing to do), -1 with
 * errno; EAGAIN: under way, "readable" comes when it can go on. */
int	px_conn_handshake(struct px_conn *c);
/* Calls "writable" once the socket is (a connect under way is done or
 * failed), or stops waiting for it. */
void	px_conn_want_writable(struct px_conn *c, bool on);
/* Whether "readable" callbacks come. */
void	px_conn_read_enable(struct px_conn *c, bool on);
/* Reading on, the first "readable" from the loop at once, before the
 * socket is watched: a peer that sent with its connect (an HTTP request)
 * is read without waiting for epoll, and a socket the owner stops
 * reading in that callback is never added to epoll at all. */
void	px_conn_read_first(struct px_conn *c);
/* Reads what is there into c->in, up to room bytes: >0, 0 at EOF (c->eof
 * set), -1 with errno (EAGAIN: nothing yet, or room 0; the wait is
 * armed). */
ssize_t	px_conn_recv(struct px_conn *c, size_t room);
/* Writes what c->out holds; polls for room only when the kernel is full;
 * ends our direction once out is empty if px_conn_shutdown() asked for it.
 * 0, or -1 with errno on a real error. */
int	px_conn_send(struct px_conn *c);
/* Half-close: end our direction once everything queued is written. */
int	px_conn_shutdown(struct px_conn *c);
/* Text for a failure of c with err: the transform's own reason when it
 * has one, else strerror(err). */
const char *px_conn_strerror(const struct px_conn *c, int err);
/* Whether the peer's bytes wait to be read (px_conn_recv): in the socket
 * (a MSG_PEEK) or in the transform's buffer (TLS: px_tls_pending, which
 * the socket does not show), or its end; true also when that cannot be
 * told. Not what c->in holds already. */
bool	px_conn_unread(const struct px_conn *c);
/* Whether nothing of the peer's is known to wait, with no system call:
 * the last read emptied the socket (a plain read: in an earlier pass, a
 * FIN behind its bytes being seen by the next poll only), "readable" has
 * stayed watched since, and the loop has not queued it (level-triggered: bytes that came
 * before this pass's poll would have), nor holds the transform decoded
 * bytes or an end. False says nothing: ask px_conn_unread(). (Bytes that
 * come after this pass's poll are not seen: no check is free of that.) */
bool	px_conn_quiet(const struct px_conn *c);
/* Bytes the kernel still holds of what c wrote (SIOCOUTQ): not sent yet,
 * or sent and not acknowledged by the peer; 0 once the connection is
 * reset or closed (none of them will be), and when that cannot be told.
 * A reset (SO_LINGER 0) would drop them. */
size_t	px_conn_unacked(const struct px_conn *c);
/* The write event is armed: the kernel pushed back. */
bool	px_conn_write_blocked(const struct px_conn *c);

#endif
