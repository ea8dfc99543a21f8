/* The analyser interface: one const table per protocol, registered by name
 * in a registry generated from the folders of plugins/ (CMakeLists.txt).
 * The core owns sessions and sockets; an analyser owns only its policy
 * object (read-only once loaded) and its per-session state. */
#ifndef PX_ANALYSER_H
#define PX_ANALYSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyser-t.h"	/* and its forward declarations */
#include "event_want.h"	/* for analysers' own events */

/* NULL if no analyser has that name. */
const struct px_analyser *px_analyser_find(const char *name);
/* Fails (with a message on stderr) on duplicate or empty names, or an
 * analyser without its schema fragment. */
int	px_analyser_registry_check(void);
/* The service-file schema: policy/schema/service.rng with the section
 * of every registered analyser (plugins/NAME/NAME.rng) joined in. Built
 * at the first call (main thread), then shared. NULL: out of memory or a
 * malformed fragment. */
const char *px_service_schema(void);

/* The 64-bit slots one series takes in a service's block (a histogram:
 * its buckets and its sum per value), and where series i of a starts. */
size_t	px_series_slots(const struct px_series *s);
size_t	px_series_offset(const struct px_analyser *a, size_t i);
/* Slots of a histogram value: its buckets, then its sum. */
#define PX_SERIES_HIST_SLOTS	(PX_SERIES_HIST_BOUNDS + 2)
#define PX_SERIES_HIST_BOUNDS	18

/* Position in the registry, < PX_ANALYSERS_MAX. */
unsigned px_analyser_index(const struct px_analyser *a);
extern const struct px_analyser *const px_analysers[];

/* What an analyser may ask of the core for its session. */
const void	*px_session_policy(const struct px_session *s);
/* The service's <scan> (scan.h): its scanner is NULL when there is none. */
struct px_scan_policy;
const struct px_scan_policy *px_session_scan(const struct px_session *s);
/* The service's <auth> (auth.h); NULL: none. */
struct px_auth_use;
const struct px_auth_use *px_session_auth(const struct px_session *s);
/* Where the answers to the session's authentication checks come back
 * (px_auth_submit): its worker's box, drained on the worker's thread. */
struct px_auth_box;
struct px_auth_box *px_session_auth_box(struct px_session *s);
/* The zones of the client and of server (NULL: the session's), as the
 * session-end line names them ("-": in none). */
void		 px_session_zones(const struct px_session *s,
		    const struct sockaddr *server, const char **client_zone,
		    const char **server_zone);
/* The service's name (for the scan counters' labels). */
const char	*px_session_service(const struct px_session *s);
/* Fills an audit record's (audit.h) session fields: service, analyser,
 * session id, client, server (NULL: not known) and the zones as
 * px_session_zones names them for server; the others are left as they are. */
struct px_audit_info;
void		 px_session_audit_info(const struct px_session *s,
		    const char *analyser, const struct sockaddr *server,
		    struct px_audit_info *in);
int		 px_session_relay(struct px_session *s, enum px_relay_mode mode,
		    bool half_close);

/* ---- How a session ends (the model: analyser-t.h) ---------------------
 * policy: deny; the client's or server's failure, the proxy's own, a
 * timeout while connecting: error; everything else: accept. */
enum px_end_verdict px_end_verdict(enum px_end_by by, enum px_end_phase phase);
/* A reload replaced the configuration this session was accepted under:
 * its policy is no longer the one in force. */
bool		 px_session_config_stale(const struct px_session *s);

/* Their names in the session-end line (by=, phase=, verdict=). */
const char	*px_end_by_name(enum px_end_by by);
const char	*px_end_phase_name(enum px_end_phase phase);
const char	*px_end_verdict_name(enum px_end_verdict v);

/* Ends the session at once: one log line (end=reason), sockets closed,
 * state freed after on_close. Both sockets are reset, so no peer takes a
 * truncated stream for a whole one, unless the session ends because a
 * peer closed (PX_END_CLIENT, PX_END_SERVER) or a finish flushed. */
void		 px_session_end(struct px_session *s, enum px_end_by by,
		    const char *reason);
void		 px_session_endf(struct px_session *s, enum px_end_by by,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Stops reading both sides and closes with a FIN once both outputs are
 * written (at most PX_FINISH_GRACE_MS later, then a reset): a queued
 * reply reaches its peer. Only the first end or finish of a session
 * counts. */
#define PX_FINISH_GRACE_MS	5000
void		 px_session_finish(struct px_session *s, enum px_end_by by,
		    const char *reason);
/* The policy refuses: finish with end="denied: why" (verdict=deny). */
void		 px_session_deny(struct px_session *s, const char *why);
/* The policy aborts: end at once with resets, end="aborted: why"
 * (verdict=deny). */
void		 px_session_abort(struct px_session *s, const char *why);
/* The rule that makes the policy end the session, for rule= of its
 * session-end line (a px_rule_ref() text): set it just before
 * px_session_deny() or px_session_abort(). A deny without one is the
 * proxy's own: rule=builtin. */
void		 px_session_set_rule(struct px_session *s, const char *rule);
/* The base name of the service's policy file: the FILE of rule=FILE:LINE
 * (px_rule_ref). */
const char	*px_session_policy_file(const struct px_session *s);
/* What px_session_set_rule() (or the core, refusing) set; "": none. */
const char	*px_session_rule(const struct px_session *s);
/* Buffered relay only: where bytes for the server (PX_TO_SERVER) or the
 * client (PX_TO_CLIENT) are queued. */
struct evbuffer	*px_session_output(struct px_session *s, enum px_dir dir);
/* Buffered relay, from outside on_data (a callback of the analyser's
 * own): what on_data(dir) waited for came. It runs again over what it
 * left in `in`, what it queued is written, and dir's source is read
 * again. */
void		 px_session_resume(struct px_session *s, enum px_dir dir);
/* Buffered relay: dir's source's EOF is not passed on (half-closed to
 * its peer) while held; the analyser holds it from on_data, when what it
 * left in `in` must still go before it (a reply held for a verdict), and
 * lets it go (hold false) from on_data once that went: the EOF follows
 * what was queued, as unheld. */
void		 px_session_hold_end(struct px_session *s, enum px_dir dir,
		    bool hold);
/* That direction's source gave EOF. */
bool		 px_session_input_closed(const struct px_session *s,
		    enum px_dir dir);
/* From on_data(dir) only: after the bytes it leaves in `in` (passed on as
 * PX_PASS does), the next n bytes from dir's source go on without on_data
 * seeing them (a frame's payload whose length the header gave). They are
 * spliced, never entering user space, unless TLS or a bandwidth limit is
 * on or n is small; then they are copied. Until they are through, nothing
 * else is written in that direction: replies queued meanwhile follow
 * them. After a spliced pass the next read takes at most `head` bytes (0:
 * no limit): the size of the next frame's head, so that its body can be
 * spliced too instead of arriving in the same read. Returns true when the
 * n bytes will be spliced. */
bool		 px_session_pass(struct px_session *s, enum px_dir dir,
		    uint64_t n, size_t head);
/* From on_data(dir), with `in` at a frame boundary: the next read takes
 * at most `head` bytes, so that a big frame's head comes alone and its body
 * can be a spliced pass. Ignored where a pass could not splice. */
void		 px_session_read_head(struct px_session *s, enum px_dir dir,
		    size_t head);
/* Bytes of dir's current pass not yet read (0: none); at EOF, what the
 * source still owed. */
uint64_t	 px_session_pass_left(const struct px_session *s,
		    enum px_dir dir);
uint64_t	 px_session_id(const struct px_session *s);
const struct sockaddr *px_session_client(const struct px_session *s);
const struct sockaddr *px_session_server(const struct px_session *s);
struct event_base *px_session_base(struct px_session *s);
/* One log line tagged with the session id; level from <syslog.h>. */
void		 px_session_log(struct px_session *s, int level,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Bumps the analyser's counter `index` (into its counters[] names). */
void		 px_session_count(struct px_session *s, unsigned index,
		    uint64_t n);

/* The original destination (transparent, redirect) or target (fixed). */
const struct sockaddr *px_session_dst(const struct px_session *s);
/* transparent or redirect mode: the destination is the client's choice. */
bool		 px_session_is_transparent(const struct px_session *s);
/* The configured limits/@buffer: the backpressure threshold per direction. */
size_t		 px_session_buffer(const struct px_session *s);
/* The configured limits/@idle-timeout, ms (0: off). */
uint64_t	 px_session_idle_timeout(const struct px_session *s);
/* Whether the service's <servers> lets the session reach dst, its address
 * (allow=) and its port (ports=) (forward mode asks per request; the core
 * asks itself in the other modes): 0, or -1, counted as a denial, rule=
 * the <servers> element. zones gets "client-zone=A server-zone=B" for the
 * caller's log line, then " port=N refused-by=ports" when the address is
 * in and the port is not. */
int		 px_session_server_allowed(struct px_session *s,
		    const struct sockaddr *dst, char *zones, size_t zlen);
/* Whether the service's <servers allow=> takes host dst (its address
 * alone: the port of a data connection is none that ports= lists), as
 * px_session_server_allowed judges it, without changing what the
 * session-end line says: true, or false counted as a denial. */
bool		 px_session_server_host_allowed(struct px_session *s,
		    const struct sockaddr *dst);
/* Stream analysers in mode="forward": the client names the server (FTP's
 * USER name@server), so the core connects none first; until the analyser
 * does (px_session_server_connect) its relay's server side is a stand-in
 * that nothing comes from, and whatever the analyser queued for the
 * server waits there. */
bool		 px_session_server_later(const struct px_session *s);
/* Connects dst (checked by the analyser: px_session_server_allowed) and,
 * once connected, makes it the relay's server side, with what was queued
 * for it; a failed connect ends the session (connect-failed). Once per
 * session. 0 (under way), or -1 with errno. */
int		 px_session_server_connect(struct px_session *s,
		    const struct sockaddr *dst);
/* Records where the session's traffic goes now (for the session-end line). */
void		 px_session_set_server(struct px_session *s,
		    const struct sockaddr *server);

/* For driver analysers (struct px_driver). */
/* The core's conn of the client; NULL when there is none. */
struct px_conn	*px_session_client_conn(struct px_session *s);
/* A server connection to dst that the analyser owns, any number per
 * session: an idle one of the worker's pool if pooled_ok (*reused true;
 * connected already, its TLS too) or a new non-blocking connect under
 * way (*reused false: on_writable says it is done, then
 * px_session_upstream_result). Its source is the client's address when
 * the service spoofs (TPROXY), with the service's mark, its originating
 * TLS attached (the handshake runs on the first reads and writes);
 * counted as the service's connects and pool hits or misses; the
 * session-end line names dst as the server. Its events go to
 * on_readable and on_writable with arg (conn.h's px_conn_cb), never
 * through struct px_driver. The analyser gives it back with
 * px_session_upstream_park (or px_session_tunnel) by its on_close at the
 * latest; what it still holds then is closed. NULL with errno and
 * *stage on failure. */
struct px_conn	*px_session_upstream_take(struct px_session *s,
		    const struct sockaddr *dst, bool pooled_ok,
		    void (*on_readable)(struct px_conn *, void *),
		    void (*on_writable)(struct px_conn *, void *), void *arg,
		    bool *reused, const char **stage);
/* The connect px_session_upstream_take started on c is done: 0, or its
 * errno. Counted: the service's connect-time histogram or its connect
 * failures. */
int		 px_session_upstream_result(struct px_session *s,
		    struct px_conn *c);
/* Gives c (px_session_upstream_take's, to dst) back: parked in the
 * worker's pool (up to max per destination, for idle_ms; not while the
 * worker drains) when reusable, else closed. c is gone after. */
void		 px_session_upstream_park(struct px_session *s,
		    struct px_conn *c, const struct sockaddr *dst,
		    bool reusable, unsigned max, uint64_t idle_ms);
/* Gives c back to be closed once what its output holds is written (its
 * half-close too, if px_conn_shutdown asked for it): the worker keeps it
 * past s's end, reading nothing, and resets it (SO_LINGER 0) after
 * idle_ms without a byte going out (0: a minute). c is gone after. */
void		 px_session_upstream_flush(struct px_session *s,
		    struct px_conn *c, uint64_t idle_ms);
/* A connection to dst that the analyser owns and may share between
 * sessions of s's worker (HTTP/2 towards servers): a non-blocking connect
 * under way on the returned socket, with the service's mark; never the
 * client's address (it outlives the client) nor the pool's. Counted as
 * the service's upstream connects. The fd, or -1 with errno and *stage. */
int		 px_session_upstream_socket(struct px_session *s,
		    const struct sockaddr *dst, const char **stage);
/* Whether the service originates TLS towards its servers. */
bool		 px_session_tls_originates(const struct px_session *s);
/* What a server connection of s's service is made with beyond its
 * address (its originating TLS context's id, 0: none; its SO_MARK, -1:
 * none): an analyser's shared connection serves only sessions alike, as
 * the pool's do. The id is never one another context had (a pointer
 * would be: a reload frees contexts, the next may get their address). */
uint64_t	 px_session_upstream_tls(const struct px_session *s);
int64_t		 px_session_upstream_mark(const struct px_session *s);
/* Whether s's server connections may present a chain that does not
 * verify (keybridge: its client was shown the untrusted CA's leaf and
 * went on), px_session_tls_originate's too: a shared connection made so
 * serves only sessions alike, and one made for a session that requires
 * verification never serves these (the pool keys them apart as well). */
bool		 px_session_upstream_unverified(const struct px_session *s);
/* Puts the service's originating TLS on c (px_session_upstream_socket's,
 * an analyser's own conn) towards dst, offering alpn ("h2,http/1.1")
 * in place of the service's ALPN; the handshake runs on the first reads
 * and writes (px_conn_handshake). c may outlive s. 0, or -1. */
int		 px_session_tls_originate(struct px_session *s,
		    struct px_conn *c, const struct sockaddr *dst,
		    const char *alpn);
/* The name the service's originating TLS sends and checks for s's
 * server (NULL: none, the address is checked). */
const char	*px_session_tls_server_name(const struct px_session *s);
/* The TLS on c agreed on ALPN protocol proto. */
bool		 px_conn_alpn_is(const struct px_conn *c, const char *proto);
/* 0 when the connect on fd (px_session_upstream_socket's) succeeded,
 * else its errno. */
int		 px_upstream_error(int fd);
/* Adds n to value `value` of the analyser's counter series `series`
 * (an index into its series[]); out of range: nothing. */
void		 px_session_series_add(struct px_session *s, unsigned series,
		    unsigned value, uint64_t n);
/* Observes us microseconds in value `value` of histogram series
 * `series`; out of range: nothing. */
void		 px_session_series_observe(struct px_session *s,
		    unsigned series, unsigned value, uint64_t us);
/* Bytes a driver analyser delivered, for the log and counters. */
void		 px_session_account(struct px_session *s, enum px_dir dir,
		    uint64_t n);
/* n of those bytes never went after all (held, then dropped: a refused
 * or cancelled body): off the session's totals, which say what reached
 * the peer (the counters, which only grow, keep them). */
void		 px_session_unsent(struct px_session *s, enum px_dir dir,
		    uint64_t n);
/* Arms the session's analyser timer (0: stops it); on_timer when it fires. */
void		 px_session_timer(struct px_session *s, uint64_t ms);
/* Everything from here on is a plain byte stream between the client and
 * server, a conn px_session_upstream_take gave (CONNECT, Upgrade): the
 * core closes the client's conn and server (its socket the session's
 * now, closed at its end) and relays the two sockets (splice when it
 * can); a side's TLS goes on in the relay, the same session. Both conns
 * must be empty. Once per session. 0, or -1. */
int		 px_session_tunnel(struct px_session *s, struct px_conn *server);
/* Keeps the idle timer from firing while bytes move. */
void		 px_session_active(struct px_session *s);
/* One request (analyser->requests: HTTP/1.x or an HTTP/2 stream)
 * under <source-limits requests=> of s's service, of user (the client's
 * proven user, counted by it under per="user"; NULL: none yet, counted by
 * address): true when it may go on
 * (a token of its source's bucket taken, or no such limit). false: over
 * the limit, counted (proxyd_limited_total{limit="requests"}) and logged
 * at most once a second per source by the core; *retry_s is then the
 * whole seconds until the source has a token again (>= 1) and rule
 * (size bytes) the <source-limits> that decided, as rule= writes it. */
bool		 px_session_request_allowed(struct px_session *s,
		    const char *user, uint32_t *retry_s, char *rule,
		    size_t size);
/* The request of s that proved its client is user (<auth>): under
 * <source-limits per="user"> the connection is judged then, once, as a
 * new connection of that user (sessions= and connections=; a connection
 * taken holds its slot until it ends). false: over a limit, counted and
 * logged as px_session_request_allowed; the analyser refuses the request
 * (HTTP: 429, Connection: close; FTP: the login, 421, before the server
 * sees it). true otherwise. */
bool		 px_session_user_allowed(struct px_session *s,
		    const char *user, uint32_t *retry_s, char *rule,
		    size_t size);
/* One file transfer (analyser->transfers: FTP's RETR, STOR, APPE, STOU)
 * under <source-limits transfers=> of s's service, of user (as
 * px_session_request_allowed: under per="user" the proven user's bucket,
 * NULL: by address): as px_session_request_allowed, counted in
 * proxyd_limited_total{limit="transfers"}. */
bool		 px_session_transfer_allowed(struct px_session *s,
		    const char *user, uint32_t *retry_s, char *rule,
		    size_t size);
/* What the source s's <source-limits> counts s by is, for a refusal's
 * text (of user, as px_session_request_allowed): "from your address",
 * "from your network" (per="prefix"), "from your zone", "from your TLS
 * client" (per="ja4": its fingerprint), "of yours" (per="user", user
 * proven); where that source is not known yet (no JA4, no user, a client
 * in no zone), the address, as the count does. */
const char	*px_session_limit_whose(const struct px_session *s,
		    const char *user);
/* The client's connection carries TLS (a Host without a port then means
 * 443). */
bool		 px_session_client_via_tls(const struct px_session *s);
/* The client's TLS handshake agreed on ALPN protocol proto ("h2"). */
bool		 px_session_client_alpn_is(const struct px_session *s,
		    const char *proto);

/* ---- TLS started by the analyser (analyser->starttls: FTP's AUTH TLS) ---- */
enum px_tls_use	 px_session_tls_use(const struct px_session *s,
		    enum px_chan_end side);
/* That side's <tls> says auth="optional": the peer may stay in plain. */
bool		 px_session_tls_optional(const struct px_session *s,
		    enum px_chan_end side);
/* The session's connection on that side carries TLS now (or will, once
 * what is queued for it is written). */
bool		 px_session_tls_on(const struct px_session *s,
		    enum px_chan_end side);
/* The subject (RFC 2253) of the certificate the peer on that side gave
 * the session's TLS (the client's only when it presented one) into buf:
 * true, or false with buf "" (no TLS there, no certificate). */
bool		 px_session_tls_peer_subject(const struct px_session *s,
		    enum px_chan_end side, char *buf, size_t len);
/* The user the client's certificate names (<tls side="client"
 * identity=>, a verified certificate only) into buf: true, or false with
 * buf "". */
bool		 px_session_client_identity(const struct px_session *s,
		    char *buf, size_t len);
/* Buffered relay, PX_TLS_USE_EXPLICIT: TLS starts on that side's
 * connection once what is queued for it is written (the "234" to the
 * client; nothing for the server, whose handshake starts at once: we
 * are its TLS client). Nothing is read from that side meanwhile. A
 * failed handshake ends the session. 0, or -1 (a server's handshake that
 * failed at once has ended the session already, by=server-fail). */
int		 px_session_starttls(struct px_session *s, enum px_chan_end side);

/* ---- Data channels (proxyd/relay/data_channel.c) ------------------------------------
 * Extra connections a session opens for its analyser (FTP data), on the
 * session's own worker. A channel joins one connection on the client end
 * with one on the server end; each end is either a listener the peer
 * connects to (passive, from the policy's port range) or an outgoing
 * connect (active). Once both ends are connected the core relays them with
 * the splice path (one direction's FIN passed on as a FIN) and counts the
 * bytes into the session's totals; the analyser logs it from the result.
 *
 * The callback runs exactly once: when the relay ended (r->error NULL) or
 * the channel failed (timeout before both ends connected, connect error,
 * relay error: r->error says which). The channel is freed right after the
 * callback returns. px_channel_free() cancels one without a callback; the
 * session's close frees those still open (no callback: the analyser's
 * on_close ran first), resetting connections still relaying; one that
 * never relayed resets its connected end (it moved nothing: no peer takes
 * the close for an empty file). A relaying channel keeps its session from
 * idling out; its own timeout ends it when neither proxyd nor the kernel
 * moved a byte for that long (with a plain close, counted as done, once one
 * direction has passed its EOF on). A channel's own listening port
 * (px_channel_listen) is closed as soon as it accepted its connection or
 * the channel ends; a kept one (px_data_listener_new) is the session's. */

/* timeout_ms: how long both ends may take to connect, and how long the
 * relay may then go without moving a byte. NULL on failure (errno). */
struct px_channel *px_channel_new(struct px_session *s, uint64_t timeout_ms,
		    px_channel_cb cb, void *arg);
/* Listens for `end` on the address of `local` (port ignored; the wildcard
 * address for transparent services, where `local` is the server's) with a
 * port from [lo, hi] (0, 0: any), filling *bound. With `peer` non-NULL only a
 * connection from peer's host is taken: one from anywhere else is reset and
 * counted as refused (px_channel_refused()), and the listener keeps
 * waiting. 0, or -1 with errno (EADDRINUSE: every port of the range busy). */
int		 px_channel_listen(struct px_channel *ch, enum px_chan_end end,
		    const struct sockaddr *local, uint16_t lo, uint16_t hi,
		    const struct sockaddr *peer, struct sockaddr_storage *bound);
/* A listener kept across the channels of a session (FTP passive data: one
 * port per session rather than one per transfer, no socket set-up per
 * transfer). Arguments as px_channel_listen's; no socket yet. It listens
 * from a px_channel_listen_on() until idle_ms pass after it handed its
 * connection over with no channel waiting again (0: no limit), or at once
 * when the waiting channel ends without one (as a channel's own port
 * would); then it opens a port again (maybe another) for the next
 * channel. While open, each
 * connection it accepts goes to the channel waiting on it, after the peer
 * check; one from another host, or one that comes while no channel waits,
 * is reset and counted as refused (the waiting channel's, else
 * px_data_listener_refused()): a port left open between transfers gives nobody
 * a connection. Freed with the session. NULL on failure (errno). */
struct px_data_listener;
struct px_data_listener *px_data_listener_new(struct px_session *s,
		    const struct sockaddr *local, uint16_t lo, uint16_t hi,
		    const struct sockaddr *peer, uint64_t idle_ms);
/* `end` of ch takes the next connection l accepts; *bound: l's address
 * (its port; the address as px_channel_listen's). One channel waits on a
 * listener at a time (EBUSY). 0, or -1 with errno. */
int		 px_channel_listen_on(struct px_channel *ch,
		    enum px_chan_end end, struct px_data_listener *l,
		    struct sockaddr_storage *bound);
unsigned	 px_data_listener_refused(const struct px_data_listener *l);
/* Connects `end` to dst from src's host (NULL: the kernel's choice). The
 * source port is chosen at connect time (IP_BIND_ADDRESS_NO_PORT): ports
 * are then shared across destinations and TIME_WAIT entries can be reused
 * for a new 4-tuple, so active mode does not run out of ports under load
 * as a bind-time choice (or vsftpd's fixed port 20) does. 0 or -1. */
int		 px_channel_connect(struct px_channel *ch, enum px_chan_end end,
		    const struct sockaddr *dst, const struct sockaddr *src);
/* The analyser's own note on the channel (what the transfer is), handed
 * back in its result for the analyser's log line; copied, cut to 255. */
void		 px_channel_note(struct px_channel *ch, const char *note);
/* Only `dir` carries data (an FTP transfer): once its end is passed on,
 * the other side is not waited for. Its peer gets our FIN at once (a
 * server's lingering close waits for it before it replies), and the
 * channel ends there when the kernel holds none of its bytes any more;
 * else it ends as before, when the other side closes. Spliced channels
 * only; a TLS channel ends as before. */
void		 px_channel_oneway(struct px_channel *ch, enum px_dir dir);
/* Every byte delivered in dir is counted in *used (an atomic others may
 * share, on any worker: a partner's daily quota, quota.h); once *used
 * goes past limit the receiver's connection is reset (error "denied: over
 * the byte quota", the result's metered_out). Spliced, bytes are charged
 * to *used before they are read, a buffer at a time and no further than
 * one byte past the limit, and what a channel charged but did not move
 * goes back when it ends: all the channels sharing *used together stop
 * one byte past the limit, however many run at once. Through the
 * buffered relay (TLS, inspection) they are counted as they pass: each
 * channel goes up to a buffer's worth past it. */
void		 px_channel_meter(struct px_channel *ch, enum px_dir dir,
		    _Atomic uint64_t *used, uint64_t limit);
/* The meter's limit is a lease (a cluster's quota store charges bytes
 * ahead, quota_store.h): when the direction's bytes reach it, instead of
 * the reset, more(arg, ch) runs once and the direction waits for the
 * answer, px_channel_meter_grow (its source is not read meanwhile; through
 * the buffered relay, what was read goes on).
 * After px_channel_meter. */
typedef void	(*px_channel_lease_cb)(void *arg, struct px_channel *ch);
void		 px_channel_meter_lease(struct px_channel *ch,
		    px_channel_lease_cb more, void *arg);
/* The answer to more: the limit raised by n bytes and the direction goes
 * on, or n == 0: no more, the receiver's connection is reset as past the
 * limit. From the channel's own loop, while the channel lives. */
void		 px_channel_meter_grow(struct px_channel *ch, uint64_t n);
/* Connections refused by the peer check so far. */
unsigned	 px_channel_refused(const struct px_channel *ch);
/* Both ends connected: bytes are (or were) moving. */
bool		 px_channel_relaying(const struct px_channel *ch);
void		 px_channel_free(struct px_channel *ch);
/* ---- A data channel's bytes seen by the analyser (content scanning) ----
 * After px_channel_inspect() the channel is relayed through the buffered
 * path (not spliced, bounded by the session's buffer per direction) and
 * cb sees what each direction's source sends, as on_data sees a
 * session's: PX_PASS passes on what it leaves in `in`, PX_MORE keeps it
 * there (reading stops once `buffer` bytes wait), PX_DENY and PX_ERROR
 * end the channel with resets. What cb queues on px_channel_output()
 * goes on. cb never ends the channel itself: px_channel_abort() is
 * carried out after it returns. Called before a byte moved (the channel
 * may be relaying already: it leaves the splice path then); -1 (EBUSY)
 * once one did. */
typedef enum px_verdict (*px_channel_data_cb)(void *arg, enum px_dir dir,
		    struct evbuffer *in);
int		 px_channel_inspect(struct px_channel *ch, px_channel_data_cb cb,
		    void *arg);
/* Where bytes for dir's peer are queued; NULL before relaying. */
struct evbuffer	*px_channel_output(struct px_channel *ch, enum px_dir dir);
bool		 px_channel_input_closed(const struct px_channel *ch,
		    enum px_dir dir);
/* From cb, once dir's source ended: the end is not passed on (no FIN for
 * the receiver) until px_channel_resume(..., true). Meanwhile the
 * channel's own timeout does not run (the analyser's wait is bounded by
 * its own). */
void		 px_channel_hold_end(struct px_channel *ch, enum px_dir dir);
/* From outside cb: what cb waited for came; cb runs again over what it
 * left, what it queued is written, reading goes on; release_end passes a
 * held end on. May end the channel (its callback runs inside). */
void		 px_channel_resume(struct px_channel *ch, enum px_dir dir,
		    bool release_end);
/* Ends the channel with error `why` (static text), soon after the call
 * returns (never inside it): the connection of end `reset` is reset (the
 * receiver never takes what it got for a whole file), the other closed. */
void		 px_channel_abort(struct px_channel *ch, enum px_chan_end reset,
		    const char *why);
/* That end of the channel speaks TLS, with the session's <tls> of that
 * side (implicit or explicit): proxyd is the TLS server towards the
 * client and the TLS client towards the server, resuming the session's
 * TLS session with the server (servers that demand reuse check it). The
 * channel is then relayed through the buffered path (bounded by the
 * session's buffer), not spliced. Before both ends are connected. 0, or
 * -1 (no <tls> for that side). */
int		 px_channel_tls(struct px_session *s, struct px_channel *ch,
		    enum px_chan_end end);
/* Our own address on the client or server connection of the session. */
int		 px_session_local(struct px_session *s, enum px_chan_end end,
		    struct sockaddr_storage *ss);

#endif
