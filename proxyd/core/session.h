/* A session: one client connection, its server connection (a driver analyser's: those
 * it took, struct px_upconn), the analyser between them, and its
 * accounting. Owned by one worker from accept to close; only
 * px_session_end() tears it down. A stream analyser's bytes move through a
 * px_relay (relay.h), which reports back through callbacks; a driver
 * analyser's through its client conn and its own server conns
 * (session_api.c). */
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
#include "data_channel.h"
#include "config.h"
#include "ja4.h"
#include "conn.h"
#include "relay.h"

struct px_worker;
struct px_listener;
struct px_svc_counters;

/* A server connection a driver analyser took (px_session_upstream_take,
 * session_api.c): the analyser holds &c and gets its events; the core
 * lists it for the session's accounting (what it still holds unsent, the
 * idle timer's progress, the admin's listing) until the analyser parks it
 * or hands it to the tunnel, or the session's end closes it. */
struct px_upconn {
	struct px_conn		 c;	/* first: the analyser's pointer */
	LIST_ENTRY(px_upconn)	 link;
	uint64_t		 connect_start_us;	/* a connect under way; 0 */
};
LIST_HEAD(px_upconns, px_upconn);

/* A driver analyser's own, beside its client conn: one lazy timer
 * (px_session_timer) and its server connections. */
struct px_drv {
	struct event		 ev;
	bool			 pending;	/* ev is added */
	uint64_t		 fire_us;	/* when pending: fires by this */
	uint64_t		 deadline_us;	/* on_timer; 0: none */
	struct px_upconns	 ups;
};

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
	struct px_svc_counters	*m;		/* svc's, on w (metrics.h) */
	bool			 m_final;	/* m->accepted counted it */
	enum px_session_state	 state;

	int			 cfd, sfd;
	struct sockaddr_storage	 client;
	struct sockaddr_storage	 local;		/* our end of the client socket */
	struct sockaddr_storage	 dst;		/* original destination */
	struct sockaddr_storage	 server;	/* where we connected */
	/* Zones of the client and the destination (-1: none), for the log;
	 * svc_chosen once the destination picked the service of a shared
	 * listener (until then svc is the first of its group). */
	int32_t			 client_zone, server_zone;
	bool			 svc_chosen;
	/* <source-limits> (in svc_chosen's padding: idle_session_memory
	 * counts the bytes): limit_answered: a refused client got its
	 * protocol's refusal and the session ends with a FIN, not a reset;
	 * sl_judged: per="ja4", judged once at the hello; per="user", once
	 * at its first proven request. */
	bool			 limit_answered;
	bool			 sl_judged;

	struct event		 conn_ev;	/* EV_READ|EV_WRITE on sfd while connecting */
	struct event		 timer;		/* connect, then idle timeout */
	bool			 timer_on;
	uint64_t		 last_active_ms;
	uint64_t		 tcp_progress;	/* px_tcp_progress() at last check */
	uint64_t		 tcp_progress_ms; /* when it last changed */
	uint64_t		 start_ms;
	uint64_t		 connect_start_us;	/* a connect under way */
	struct timeval		 start_tv;

	/* Once relaying (relay_on): allocated then, since a driver
	 * analyser's session never has one (2.5 KB it held for nothing). */
	struct px_relay		*relay;
	bool			 relay_on;
	/* A driver analyser's client conn (struct px_driver), or the
	 * client's during its TLS handshake or ClientHello, and keybridge's
	 * server conn before the analyser opens: [2] by px_chan_end, from
	 * px_session_dconn(), NULL before (a plug session never has them);
	 * [0] alone, a driver's plain client (px_drv_open): dconn_open[1]
	 * says whether [1] is there to look at. */
	struct px_conn		*dconn;
	bool			 dconn_open[2];
	bool			 an_timer_set;
	/* The driver analyser's timer and the server conns it took
	 * (px_drv_open, session_api.c): allocated, since a plug session
	 * never has them. */
	struct px_drv		*drv;
	uint64_t		 bytes[2];	/* delivered, per px_dir */
	uint64_t		 credited[2];	/* of bytes, in m->delivered */
	bool			 admitted;	/* past the admission checks */
	/* Relayed analysers: the client's TLS handshake runs on dconn[0]
	 * before the server is connected; its conn then moves to the relay. */
	bool			 tls_handshaking;
	/* Keybridge: the client waits at its hello (kb_started) while the
	 * server's handshake runs on dconn[1] (kb_server_hs). */
	bool			 kb_started, kb_server_hs;
	bool			 kb_untrusted;	/* its leaf: the untrusted CA */
	/* Passed to the new process of a rolling upgrade (handover.c): its
	 * end here writes no line and leaves the sockets to that process.
	 * (In the bools' padding: idle_session_memory counts the bytes.) */
	bool			 handed;
	char			*client_sni;	/* what it asked for; NULL */
	/* The JA4 of the client's first ClientHello (any TLS mode), then
	 * (at PX_SESSION_JA4S) the JA4S of the first ServerHello of a server
	 * proxyd speaks TLS to, in one buffer made when TLS is set up
	 * (px_session_ja4_buf): a session without TLS pays a pointer, not
	 * the 63 bytes. NULL or "": none; read them with px_session_ja4 and
	 * px_session_ja4s. */
	char			*ja4;
	/* Passthrough: what of the ClientHello the server's socket did not
	 * take at once; the buffered relay sends it first. */
	struct evbuffer		*hello_rest;
	bool			 end_marked;	/* end_by, end_phase are set */
	enum px_end_by		 end_by;
	enum px_end_phase	 end_phase;
	bool			 finishing;	/* px_session_finish() called */
	bool			 finished;	/* end with FIN: reply flushed */
	/* <source-limits>: sl_held: it holds a slot of the source's table
	 * entry (sl_ref, below), given back at its end; limited: refused by
	 * a source limit, ended with a reset and no session-end line (the
	 * limited line stands for it, once a second per source);
	 * limit_answered, sl_judged: beside svc_chosen, above. */
	bool			 sl_held;
	bool			 limited;
	char			*finish_reason;	/* NULL until a finish */
	/* The rule a policy end names (rule= of the session-end line): a
	 * px_rule_ref() text; "": the proxy's own (rule=builtin). */
	char			*rule;		/* NULL: none yet */
	struct px_sl_ref	 sl_ref;	/* <source-limits>: see sl_held */
	void			*an_state;
	struct px_chan_host	 chan_host;	/* its data channels (data_channel.h) */
	TAILQ_ENTRY(px_session)	 link;
	bool			 ct_waiting;	/* for conntrack's answer */
	uint32_t		 ct_seq;
	TAILQ_ENTRY(px_session)	 ct_link;	/* in w->ct_wait */
};

void	px_session_accept(struct px_listener *l, int fd,
	    const struct sockaddr *sa, int salen);
void	px_session_touch(struct px_session *s);
/* admission.c: the id the next session gets; and the first one to give
 * (a rolling upgrade's new process starts past the old one's). */
uint64_t px_session_ids_next(void);
void	px_session_ids_from(uint64_t first);
/* What a TLS conn of s needs to know of it: its id for the log, its
 * worker's caches, its service's counters. */
struct px_tls_peer px_session_tls_peer(struct px_session *s);
char *px_session_ja4_buf(struct px_session *s);
/* The session's JA4, "" when it has none. */
static inline const char *
px_session_ja4(const struct px_session *s)
{
	return s->ja4 != NULL ? s->ja4 : "";
}
#define PX_SESSION_JA4S	(PX_JA4_LEN + 1)	/* its offset in s->ja4 */
/* The JA4S of the session's server, "" when it has none. */
static inline const char *
px_session_ja4s(const struct px_session *s)
{
	return s->ja4 != NULL ? s->ja4 + PX_SESSION_JA4S : "";
}
/* Frees the sessions closed since the last call (w->dead). */
void	px_session_reap(struct px_worker *w);
uint64_t px_now_ms(struct px_worker *w);
/* session_api.c: s->dconn allocated (zeroed) if it is not yet. 0, or -1
 * (out of memory). */
int	px_session_dconn(struct px_session *s);
/* session_api.c: a driver analyser's client conn and timer, before its
 * on_open. 0, or -1 (out of memory). */
int	px_drv_open(struct px_session *s);
/* Frees the driver analyser's timer and closes the server conns it still
 * holds (px_drv_open), if any. */
void	px_drv_free(struct px_session *s);
/* The fd of the first server conn the driver analyser holds; -1: none. */
int	px_drv_server_fd(const struct px_session *s);

/* The server's TLS failed (err) in a handshake call of the analyser's
 * (FTP's AUTH TLS), not in a read of the relay's: the session ends as the
 * relay would end it (by=server-fail, server-error: and the reason). */
void	px_session_server_tls_failed(struct px_session *s,
	    const struct px_conn *c, int err);
/* session_api.c: logs c's TLS failure, if any (side: "client", "server"). */
void	px_session_log_tls_failure(struct px_session *s,
	    const struct px_conn *c, const char *side);

struct px_session_snap;
/* What the admin listing shows of s, copied on its worker. */
void	px_session_snapshot(const struct px_session *s, uint64_t now,
	    struct px_session_snap *snap);
/* conntrack's answer to the session's lookup: its original destination,
 * or NULL (no entry). */
void	px_session_origdst_answer(struct px_session *s,
	    const struct sockaddr_storage *dst);
/* Bytes a data channel of the session delivered: into its totals. */
void	px_session_channel_bytes(struct px_session *s, enum px_dir dir,
	    uint64_t n);

#endif
