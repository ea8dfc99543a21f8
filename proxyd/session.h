/* A session: one client connection, its server connection, and everything
 * needed to relay between them and account for it. Owned by one worker from
 * accept to close; only px_session_close() tears it down. */
#ifndef PX_SESSION_H
#define PX_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "analyser.h"
#include "bucket.h"
#include "config.h"
#include "conn.h"
#include "splice.h"

struct px_worker;
struct px_listener;

enum px_session_state {
	PX_SS_CONNECTING = 0,
	PX_SS_RELAY,
	PX_SS_CLOSED,
};

struct px_session {
	uint64_t		 id;
	struct px_worker	*w;
	struct px_config	*cfg;		/* one reference */
	const struct px_service	*svc;
	enum px_session_state	 state;
	enum px_relay_mode	 relay_mode;
	bool			 half_close;

	int			 cfd, sfd;
	struct sockaddr_storage	 client;
	struct sockaddr_storage	 local;		/* our end of the client socket */
	struct sockaddr_storage	 dst;		/* original destination */
	struct sockaddr_storage	 server;	/* where we connected */

	struct event		 conn_ev;	/* EV_WRITE on sfd while connecting */
	struct event		 timer;		/* connect, then idle timeout */
	bool			 timer_on;
	uint64_t		 last_active_ms;
	uint64_t		 tcp_progress;	/* px_tcp_progress() at last check */
	uint64_t		 tcp_progress_ms; /* when it last changed */
	uint64_t		 start_ms;
	struct timeval		 start_tv;

	struct px_splice	 sp[2];		/* PX_RELAY_SPLICE, by px_dir */
	struct px_conn		 conn[2];	/* PX_RELAY_BUFFERED: client, server */
	bool			 conn_open[2];
	bool			 buf_shut[2];	/* our direction to that side ended */
	bool			 buf_paused[2];	/* reading stopped: peer's output full */
	bool			 rate_paused[2]; /* reading stopped: bandwidth used up */
	bool			 rl_on;		/* a bandwidth limit applies */
	bool			 rl_timer_set;
	struct px_bucket	 rl[2];		/* session-bandwidth, by px_dir */
	struct event		 rl_timer;
	uint64_t		 moved[2];	/* buffered bytes queued per dir */
	bool			 driven;	/* conns belong to a driver analyser */
	bool			 an_timer_set;
	struct event		 an_timer;	/* the driver analyser's */
	uint64_t		 bytes[2];	/* delivered, per px_dir */
	bool			 eof_seen;	/* a side gave EOF: eof_by says which */
	enum px_end_by		 eof_by;	/* PX_END_CLIENT or PX_END_SERVER */
	bool			 admitted;	/* past the admission checks */
	bool			 end_marked;	/* end_by, end_phase are set */
	enum px_end_by		 end_by;
	enum px_end_phase	 end_phase;
	bool			 finishing;	/* px_session_finish() called */
	bool			 finished;	/* end with FIN: reply flushed */
	char			 finish_reason[160];
	void			*an_state;
	struct px_channel	*channels;	/* data channels (channel.c) */
	TAILQ_ENTRY(px_session)	 link;
};

void	px_session_accept(struct px_listener *l, int fd,
	    const struct sockaddr *sa, int salen);
void	px_session_touch(struct px_session *s);
/* Frees the sessions closed since the last call (w->dead). */
void	px_session_reap(struct px_worker *w);
uint64_t px_now_ms(struct px_worker *w);
/* Bytes a data channel of the session delivered: into its totals. */
void	px_session_channel_bytes(struct px_session *s, enum px_dir dir,
	    uint64_t n);

/* relay.c */
int	px_relay_splice_start(struct px_session *s);
int	px_relay_buffered_start(struct px_session *s);
void	px_relay_free(struct px_session *s);
/* Buffered path: stop reading, close when both outputs are written. */
void	px_relay_finish(struct px_session *s);
void	px_session_finish_check(struct px_session *s);

#endif
