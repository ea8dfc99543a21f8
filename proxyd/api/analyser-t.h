/* The analyser contract's types: what an analyser is (struct px_analyser,
 * struct px_driver), the enums both sides speak (directions, verdicts,
 * relay modes, the end model, TLS use) and a data channel's result. No
 * calls: the relays and data channels below the core include this alone;
 * analyser.h adds what an analyser may ask of the core. */
#ifndef PX_ANALYSER_T_H
#define PX_ANALYSER_T_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

struct px_session;
struct px_cfgerr;
struct _xmlNode;
struct evbuffer;
struct event_base;
struct sockaddr;
struct sockaddr_storage;

#define PX_ANALYSERS_MAX	8	/* registered analysers */
#define PX_AN_COUNTERS_MAX	32	/* counters per analyser */
#define PX_AN_SERIES_SLOTS	1024	/* 64-bit slots per service for the
					 * series its analyser declares */

/* A metric family an analyser declares for its services, exported per
 * service and summed over the workers: for each of nvalues values of one
 * label, a counter or a histogram of microseconds (the core's shared
 * bounds). The core stores and exports them; the analyser only adds to
 * them (px_session_series_add, px_session_series_observe). */
enum px_series_kind {
	PX_SERIES_COUNTER = 0,
	PX_SERIES_HISTOGRAM,
};

struct px_series {
	const char		*name;		/* the Prometheus name */
	const char		*help;
	enum px_series_kind	 kind;
	const char		*label;		/* tells the values apart */
	unsigned		 nvalues;
	/* Value i's label text ("200", "2xx"). */
	void			(*value)(unsigned i, char *buf, size_t size);
	/* A histogram of requests: its counts are also the worker's
	 * proxyd_worker_requests_total. */
	bool			 requests;
};

/* What on_data answers about the bytes still left in `in` (those it moved
 * to px_session_output() itself go out whatever it answers). */
enum px_verdict {
	PX_PASS = 0,	/* forward them */
	PX_MORE,	/* keep them, wait for more bytes */
	PX_DENY,	/* refuse: flush both outputs, end (px_session_deny()
			 * unless the analyser ended the session itself) */
	PX_ERROR,	/* end at once with resets: by=proxy unless the
			 * analyser ended the session itself */
};

enum px_dir {
	PX_TO_SERVER = 0,
	PX_TO_CLIENT,
};

enum px_relay_mode {
	PX_RELAY_BUFFERED = 0,	/* evbuffers; on_data sees every byte */
	PX_RELAY_SPLICE,	/* splice(2); no byte reaches user space */
};

/* The ends of a session (and of a data channel). */
enum px_chan_end {
	PX_CHAN_CLIENT = 0,	/* the connection with the client's side */
	PX_CHAN_SERVER,
};

struct px_conn;

/* The second kind of analyser, for protocols that choose their server
 * connections per request (http). The core connects to no server before
 * on_open. It owns the client's conn, the worker's pool and one timer,
 * and tells the analyser when the client's conn is readable or writable
 * and when the timer fires. Server connections are the analyser's own,
 * as many as it wants, each with its own callbacks: it takes them from
 * the core (px_session_upstream_take: pooled or a new connect, spoofed and
 * marked as the service says) and gives them back (px_session_upstream_park).
 * The analyser reads and writes through the conns (conn.h) and accounts
 * what it delivered with px_session_account(). */
struct px_driver {
	void	(*on_readable)(struct px_session *s, void *st);
	void	(*on_writable)(struct px_session *s, void *st);
	void	(*on_timer)(struct px_session *s, void *st);
	/* A reload replaced the worker's configuration; the session keeps
	 * the old one (px_session_config_stale). NULL: nothing to do. The
	 * analyser may end the session here. */
	void	(*on_config)(struct px_session *s, void *st);
};

struct px_analyser {
	const char	*name;		/* matches service/@analyser */
	size_t		 state_size;	/* per session; the core callocs and frees it */
	/* Reads the analyser's own element (NULL if absent: use defaults).
	 * 0 ok, -1 after reporting through px_cfg_error(). */
	int		(*policy_load)(const struct _xmlNode *section, void **pol,
			    struct px_cfgerr *err);
	void		(*policy_free)(void *pol);
	/* The server side is connected. Returns 0 and calls one of the
	 * px_session_relay_*() functions, or -1 to abort the session. */
	int		(*on_open)(struct px_session *s, void *st);
	/* Bytes from one side in buffered mode; NULL: forward as they are.
	 * It may remove bytes from `in` and write what it forwards (maybe
	 * rewritten) to px_session_output(s, dir), and replies to the other
	 * side to px_session_output(s, !dir); the core counts both. When a
	 * side gives EOF it is called once more, with
	 * px_session_input_closed(s, dir) true and what is left in `in`
	 * (maybe nothing: an analyser may hold bytes of its own); what it
	 * leaves in `in` then is dropped. */
	enum px_verdict	(*on_data)(struct px_session *s, void *st,
			    enum px_dir dir, struct evbuffer *in);
	void		(*on_close)(struct px_session *s, void *st);
	/* Names of the analyser's own counters, NULL-terminated (at most
	 * PX_AN_COUNTERS_MAX), bumped with px_session_count() and exported as
	 * proxyd_analyser_events_total{analyser=,event=}. May be NULL. */
	const char *const *counters;
	/* Its own metric families, nseries of them, in at most
	 * PX_AN_SERIES_SLOTS slots (px_analyser_registry_check). */
	const struct px_series *series;
	size_t		 nseries;
	/* Non-NULL: an analyser of the second kind (see struct px_driver);
	 * on_data is then unused. */
	const struct px_driver *driver;
	/* It can serve mode="forward" (the destination comes from each
	 * request). */
	bool		 forward_mode;
	/* The ALPN protocols it speaks, offered when it terminates TLS and
	 * asked for when it originates, comma-separated in order of
	 * preference ("http/1.1,http/1.0"); NULL: no ALPN. */
	const char	*alpn;
	/* What it offers clients under a given policy, in the same form
	 * (HTTP/2 only where the service asks for it); NULL: alpn. */
	const char	*(*client_alpn)(const void *pol);
	/* It starts TLS itself (FTP's AUTH TLS): a <tls> on its service is
	 * left to it (px_session_starttls) unless implicit="yes". */
	bool		 starttls;
	/* It takes a service's <scan> (px_session_scan): its bodies go to
	 * the scanner named there. */
	bool		 scan;
	/* It takes a service's <auth> (px_session_auth): users prove who
	 * they are, and its rules may name them (user=, group=). */
	bool		 auth;
	/* Its users prove themselves by a password alone (FTP's USER and
	 * PASS): its <auth> must name an ldap authenticator. */
	bool		 auth_password;
	/* It judges its transfers by a service's <content> rules
	 * (px_session_scan()->content, sniff.h). */
	bool		 content;
	/* It writes audit records for its transfers (audit.h) as a
	 * service's <audit> asks. */
	bool		 audit;
	/* It serves requests (HTTP) and asks px_session_request_allowed()
	 * of each: a service's <source-limits requests=> applies. */
	bool		 requests;
	/* It moves files (FTP) and asks px_session_transfer_allowed() of
	 * each transfer: a service's <source-limits transfers=> applies. */
	bool		 transfers;
	/* It asks px_session_user_allowed() once its client proved who it
	 * is (<auth>): a service's <source-limits per="user"> applies. */
	bool		 user_limits;
	/* Its per-session state is its relay alone (plug): a rolling upgrade
	 * (core/handover.c) may pass a session to the new process while the
	 * relay holds no byte, and the new process calls on_open again on
	 * the same two sockets. */
	bool		 handover;
	/* With handover, an analyser with more state than its relay (or a
	 * driver's client conn): that state as bytes, into buf (at most
	 * len), at a point where the session can change processes (FTP:
	 * between commands, no data channel; HTTP: an idle keep-alive
	 * client); the length, or -1 when it is not at such a point now. It
	 * may let go of what is not passed (a driver's server connection:
	 * the new process opens its own); the session stays whole here if
	 * the hand-over then fails. Its kept data listeners stay and close
	 * with the old process's session. NULL: nothing to save (on_open
	 * opens it again). */
	ssize_t		(*handover_save)(struct px_session *s, void *st,
			    void *buf, size_t len);
	/* In the new process, instead of on_open: st (zeroed) from the bytes
	 * handover_save wrote, then relaying as on_open would. 0, or -1
	 * (the session ends). */
	int		(*handover_load)(struct px_session *s, void *st,
			    const void *buf, size_t len);
	/* What the protocol answers a client <source-limits> refuses at
	 * accept, before the connection closes (FTP's 421, R66's
	 * ConnectionError, HTTP's 429), on a service whose client speaks
	 * plain text first (no TLS from the first byte: there the refusal is
	 * a reset). pol: the service's analyser policy; limit: "sessions" or
	 * "connections"; whose: what the source is, as the text says it
	 * (px_session_limit_whose: "from your address", "from your
	 * network", ...); rule: the <source-limits> as FILE:LINE; retry_s:
	 * seconds until the source may come back (>= 1). Writes at most size
	 * bytes to buf and returns how many; 0: a reset. May be NULL (a
	 * reset). */
	size_t		(*limit_refusal)(const void *pol, const char *limit,
			    const char *whose, const char *rule,
			    uint32_t retry_s, uint64_t id, char *buf,
			    size_t size);
	/* On each worker thread as it ends: free per-thread state. May be NULL. */
	void		(*on_worker_exit)(void);
	/* A few words on what the session is doing now (the request or the
	 * transfer in progress) for the admin's session list, written to buf;
	 * on the session's worker. May be NULL. */
	void		(*describe)(const struct px_session *s, const void *st,
			    char *buf, size_t len);
	/* Who the session's client proved to be, for its session-end line:
	 * " user=NAME auth=METHOD" (NAME escaped for the log) written to
	 * buf, or nothing. Called just before on_close. May be NULL. */
	void		(*who)(const struct px_session *s, const void *st,
			    char *buf, size_t len);
};

/* ---- How a session ends (one model for every analyser) -----------------
 * Who ended it and in which phase, as HAProxy's termination codes; the
 * verdict in the session-end line is derived from those two, never from
 * the reason's text (see px_end_verdict()). */
enum px_end_by {
	PX_END_CLIENT = 0,	/* the client closed: a normal end */
	PX_END_SERVER,		/* the server closed: a normal end */
	PX_END_CLIENT_FAIL,	/* the client's connection failed (reset, error) */
	PX_END_SERVER_FAIL,	/* the server's failed, or could not be reached */
	PX_END_POLICY,		/* the policy refused (deny or abort) */
	PX_END_TIMEOUT,		/* one of the proxy's timeouts fired */
	PX_END_PROXY,		/* the proxy failed (resources, internal error) */
	PX_END_SHUTDOWN,	/* the daemon stopped */
};

enum px_end_phase {
	PX_PHASE_ACCEPT = 0,	/* admission checks, before any connect */
	PX_PHASE_CONNECT,	/* connecting to the server */
	PX_PHASE_DATA,		/* relaying and analysing */
};

enum px_end_verdict {
	PX_VERDICT_ACCEPT = 0,
	PX_VERDICT_DENY,
	PX_VERDICT_ERROR,
};

/* TLS started by the analyser (analyser->starttls: FTP's AUTH TLS). */
enum px_tls_use {
	PX_TLS_USE_NONE = 0,	/* no <tls> for that side: plain */
	PX_TLS_USE_IMPLICIT,	/* TLS from the first byte (the core's) */
	PX_TLS_USE_EXPLICIT,	/* the analyser starts it */
};

/* A data channel (analyser.h: px_channel_new) ends with this. */
struct px_channel;

struct px_chan_result {
	const struct px_channel *ch;	/* the one ending (freed after the call) */
	const char	*error;		/* NULL: ended normally */
	uint64_t	 bytes[2];	/* by px_dir: client->server, server->client */
	uint64_t	 duration_ms;	/* from the relay's start */
	bool		 relayed;	/* both ends connected and relaying began */
	unsigned	 refused;	/* connections refused by the peer check */
	const char	*note;		/* px_channel_note()'s, or "" */
	/* The peers of each end (enum px_chan_end), NULL: none connected. */
	const struct sockaddr *addr[2];
	bool		 tls[2];	/* that end was TLS (px_channel_tls) */
	bool		 resumed[2];	/* ... a resumed TLS session */
	/* The client end's JA4 (its ClientHello), the server end's JA4S
	 * (the server's ServerHello): "" when that end had no TLS or no
	 * hello came. */
	const char	*ja4, *ja4s;
	bool		 metered_out;	/* cut by px_channel_meter's limit */
};

typedef void	(*px_channel_cb)(struct px_session *s, void *arg,
		    const struct px_chan_result *r);

#endif
