/* A rolling upgrade on one machine (`proxyd -s upgrade`): the new process
 * takes the live sessions over from the old one.
 *
 * The old process listens on a Unix socket (SOCK_SEQPACKET, abstract name
 * "proxyd-handover.PID"). Both ends check the other by SO_PEERCRED, for
 * anybody may connect to, or bind first, an abstract name: the old one
 * takes a peer running as root (ours too if it never was root) whose
 * binary is a proxyd, whose HELLO names its own pid; the new one, a
 * listener that is the pid it was told and runs as root or the daemon's
 * <user>, else it exits with a line on stderr (it does not start on its
 * own: the old process may still run, and -s upgrade says it failed).
 * The new one, still root, connects and says HELLO with its protocol
 * version; the old
 * answers WELCOME (its next session id, and its admin listener by
 * SCM_RIGHTS) or REFUSE (another version: the new one exits, the old one
 * serves on as if nothing was asked). The new one binds the services'
 * addresses next to the old one's listeners (SO_REUSEPORT, as every
 * worker does already), starts its workers and says READY. Only then
 * does the old one stop accepting (its listeners closed, as a drain
 * does) and hand over: each worker, every PX_HO_TICK_MS until its last
 * session, sends each quiet session (its analyser says it can be passed,
 * struct px_analyser's handover, and its relay holds no byte:
 * px_relay_quiet; a splice pump's pipe is flushed by the old process
 * first, never passed) as one SESSION record with the client and server
 * sockets attached, and the analyser's own state when it has more than
 * its relay (handover_save: FTP between commands); the session then ends
 * here without a line. The new
 * process's main thread gives each to its least loaded worker, which
 * opens the analyser on the two sockets again (on_open, or handover_load
 * with the state saved); the session-end line, with
 * the whole counts, is the new process's. Sessions that are not quiet
 * keep running in the old process until they end or its shutdown grace
 * (the drain deadline) is over. With none left the old process says DONE
 * (handed, drained), the new one answers DONE once it has read every
 * record before it, and only then do the old one's workers stop; both
 * log `handover sessions=N drained=M`.
 * A failure before READY (version, the new process dies or times out)
 * changes nothing in the old one; after READY, while the old process
 * runs (it waits, workers and all, for its last session to be passed or
 * to end), it listens again and keeps what it has not passed (what it
 * passed is lost with the new process). */
#ifndef PX_HANDOVER_H
#define PX_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>

struct event_base;
struct px_config;
struct px_worker;

#define PX_HO_MAGIC		0x31584850u	/* "PHX1" */
/* Bump on any change of the records below: a process of another
 * version is refused and the old one serves on. */
#define PX_HO_VERSION		1
#define PX_HO_TICK_MS		20
/* The most an analyser's saved state may take (handover_save). */
#define PX_HO_AN_MAX		8192

enum px_ho_type {
	PX_HO_HELLO = 1,	/* new -> old */
	PX_HO_WELCOME,		/* old -> new (+ admin listener) */
	PX_HO_REFUSE,		/* old -> new: another version */
	PX_HO_READY,		/* new -> old: listening */
	PX_HO_SESSION,		/* old -> new (+ client, server sockets) */
	PX_HO_DONE,		/* old -> new, at its exit */
};

struct px_ho_head {
	uint32_t		magic;
	uint16_t		version;
	uint16_t		type;
	uint32_t		len;		/* of the whole record */
	uint32_t		pad;
};

struct px_ho_hello {
	struct px_ho_head	h;
	uint64_t		pid;
	uint64_t		next_id;	/* WELCOME: the old one's */
	uint64_t		handed;		/* DONE */
	uint64_t		drained;	/* DONE */
};

/* One session, as the old process's worker saw it when it was quiet. */
struct px_ho_session {
	struct px_ho_head	h;
	char			service[128];	/* service/@name */
	char			analyser[32];	/* its analyser's name */
	uint64_t		id;
	uint64_t		bytes[2];	/* by px_dir, so far */
	uint64_t		age_ms;		/* since its accept */
	int64_t			start_sec, start_usec;	/* wall clock */
	struct sockaddr_storage	client, local, dst, server;
	int32_t			client_zone, server_zone;
	uint8_t			svc_chosen;
	uint8_t			nsock;		/* 2, or 1: no server socket
						 * (a driver analyser's) */
	uint8_t			pad[2];
	uint32_t		an_len;		/* of an_state */
	unsigned char		an_state[PX_HO_AN_MAX];	/* handover_save */
};

/* ---- the old process (main thread) ----------------------------------- */

/* Listens for a successor on base; admin_fd (-1: none) is passed to it.
 * was_root: the process started as root (a successor must be root), else
 * one of our uid may take over too.
 * ready(arg) runs when it says READY: stop accepting and call
 * px_handover_drain(); gone(arg) when it goes away after that, while
 * this process still runs: accept again (px_handover_resume()). 0, or -1
 * (logged; upgrades are then refused). */
int	px_handover_serve(struct event_base *base, int admin_fd,
	    bool was_root, void (*ready)(void *arg), void (*gone)(void *arg), void *arg);
/* No session left here (every one passed or ended): says DONE to the
 * successor (once); true once it answered DONE, having taken every
 * session passed: the workers may go. */
bool	px_handover_finished(void);
/* The successor is gone: every worker listens again and keeps what it
 * has not passed. */
void	px_handover_resume(void);
/* READY came: tells every worker to hand its quiet sessions over. */
void	px_handover_drain(void);
/* At exit, after the workers: DONE to the successor and the log line. */
void	px_handover_serve_end(void);

/* ---- the new process -------------------------------------------------- */

/* Connects to pid's hand-over socket, checks that pid listens there as
 * root or uid (the daemon's <user>, or ours without one), and says HELLO;
 * our session ids then start past the old one's, and its admin listener
 * is in *admin_fd (-1: none). The socket, or -1 after a line on stderr. */
int	px_handover_connect(long pid, uid_t uid, int *admin_fd);
/* The workers listen: READY, then take the sessions in on base with
 * *cfg (the main thread's current configuration). 0, or -1 (logged). */
int	px_handover_take(struct event_base *base, int fd,
	    struct px_config *const *cfg);
/* The process stops: the old process's socket, if it is still open (its
 * close not read yet), is closed with its event. */
void	px_handover_take_end(void);

/* ---- workers ---------------------------------------------------------- */

/* Old: the worker starts handing its sessions over (PX_CMD_HANDOVER). */
void	px_handover_begin(struct px_worker *w);
/* Both: the worker is exiting: what handing left to close and free. */
void	px_handover_end(struct px_worker *w);
/* New: a session passed over becomes w's (closing: w exits, the session
 * is closed instead). Takes the sockets and ho; the session takes a
 * reference of cfg's (the caller keeps its own). */
void	px_handover_adopt(struct px_worker *w, struct px_config *cfg,
	    size_t svc_idx, int cfd, int sfd, struct px_ho_session *ho,
	    bool closing);

#endif
