/* ftp: what the control channel (ftp.c) and the other files of the session
 * (the server's replies ftp_reply.c, the data channels ftp_data.c, FTPS ftp_tls.c, scanning ftp_scan.c, the
 * quotas ftp_quota.c, inband authentication ftp_auth.c) share: the per-session state, the queue of pending
 * replies and the analyser's counters. Internal to plugins/ftp. */
#ifndef FTP_INT_H
#define FTP_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "analyser.h"
#include "ftp/ftp_path.h"
#include "ftp/ftp_policy.h"
#include "ftp/ftp_proto.h"
#include "quota.h"
#include "quota_store.h"

/* Counter indexes, in ftp_counters[] (ftp.c) order. */
enum {
	FTP_C_COMMANDS = 0,
	FTP_C_DENIED_COMMAND,
	FTP_C_DENIED_USER,
	FTP_C_DENIED_PATH,
	FTP_C_BOUNCE,
	FTP_C_DATA_REFUSED,
	FTP_C_TRANSFERS,
	FTP_C_DATA_FAILED,
	FTP_C_BAD_LINE,
	FTP_C_TOO_LONG,
	FTP_C_AUTH_TLS,		/* AUTH TLS taken from a client */
	FTP_C_TLS_REQUIRED,	/* commands refused: TLS required first */
	FTP_C_DATA_TLS,		/* data channels with TLS on an end */
};

/* What the client asked for its data connection. */
enum ftp_creq {
	FTP_CREQ_PASV = 0,
	FTP_CREQ_EPSV,
	FTP_CREQ_PORT,
	FTP_CREQ_EPRT,
};

/* What the next final reply from the server is for. */
enum ftp_pkind {
	FTP_P_FWD = 0,		/* forward as it is */
	FTP_P_FEAT,		/* forward, features filtered */
	FTP_P_PASV,		/* our PASV/EPSV: connect, answer the client */
	FTP_P_PORT,		/* our PORT/EPRT: answer the client */
	FTP_P_LOCAL,		/* no server reply: send text when at the head */
	FTP_P_HOME,		/* our PWD after a login: the login directory,
				 * none of its reply forwarded */
	/* Inband authentication (ftp_auth.c): none forwarded. */
	FTP_P_AUTH,		/* the client's PASS, checked by the proxy: no
				 * server reply, ftp_auth_step() pops it */
	FTP_P_SUSER,		/* our USER of the mapped server login */
	FTP_P_SPASS,		/* ... and its PASS */
	/* FTPS towards the server (ftp_tls.c): none forwarded. */
	FTP_P_GREET,		/* the greeting, held until TLS is set up */
	FTP_P_SAUTH,		/* our AUTH TLS */
	FTP_P_SPBSZ,		/* our PBSZ 0 */
	FTP_P_SPROT,		/* our PROT P */
};

#define FTP_PENDING	16

/* The server's reply to our PASV/EPSV, line by line (ftp_data_reply_line):
 * the first address its lines name, and that line, escaped, for the log. */
struct ftp_pasv_reply {
	bool			 found;
	struct sockaddr_storage	 addr;		/* a 227's */
	uint16_t		 port;		/* a 229's */
	char			 line[80];
};

struct ftp_pending {
	enum ftp_pkind	kind;
	enum ftp_creq	creq;
	bool		answered;	/* PASV/PORT: the client has its reply */
	unsigned	scan;		/* a scanned transfer's (ftp_scan.c); 0 */
	unsigned	gen;		/* PASV/PORT: ftp_state's chan_gen then */
	char		verb[FTP_VERB_MAX + 1];
	char		text[192];
};

/* FTPS: each side's TLS, by px_chan_end (ftp_tls.c). */
struct ftp_tls {
	enum px_tls_use	 use[2];	/* what the service's <tls> says */
	bool		 on[2];		/* the control connection is TLS */
	bool		 pbsz;		/* the client sent PBSZ under TLS */
	bool		 cprot_p;	/* the client's PROT P */
	bool		 sprot_p;	/* the server took our PROT P */
	/* Towards the server: AUTH TLS, PBSZ, PROT under way; the greeting
	 * and whatever the client sends wait meanwhile. */
	bool		 setup;
	bool		 later;		/* forward mode: no server yet */
	struct evbuffer	*hold, *greet;
	unsigned	 data[3];	/* channels: all, TLS to client, to server */
};

/* A channel metered against the byte quota with <cluster store>: with
 * the store's leases (leasing), its own count used against what it was
 * granted (leased), the next lease asked for (req) when it used them;
 * else what it moved goes to the store at its end. Until the channel's
 * end (ftp_quota_chan_done, ftp_quota_chan_gone). */
struct ftp_meter {
	struct ftp_meter	*next;
	struct ftp_state	*st;
	struct px_channel	*ch;
	struct px_qstore_req	*req;
	bool			 leasing;
	uint64_t		 leased;	/* the store's leases, summed */
	uint64_t		 taken;		/* this node's (store down) */
	uint64_t		 day;		/* the store counted it in */
	_Atomic uint64_t	 used;
};

struct ftp_state {
	struct ftp_pending	 q[FTP_PENDING];
	unsigned		 qhead, qlen;
	struct ftp_reply_state	 rs;
	bool			 in_reply;	/* lines of a reply under way */
	struct ftp_pasv_reply	 pasv;
	bool			 feat;		/* ... filtered (FEAT) */
	bool			 feat_multi;	/* ... in several lines */
	struct ftp_tls		 tls;
	struct px_channel	*ch;
	unsigned		 chan_gen;	/* ch's number */
	struct sockaddr_storage	 cbound;	/* our client-side listener */
	/* The client's passive data port, kept for the session. */
	struct px_data_listener	*lst;
	/* Our addresses on the control connections (getsockname once). */
	bool			 local_ok;
	struct sockaddr_storage	 clocal, slocal;
	bool			 logged_in;	/* the server said 230 */
	/* Our PASV/PORT answered the client at once, before the server did;
	 * xfer_sent: a transfer command went to the server since;
	 * data_lost: the server then refused, and the client's next
	 * transfer gets a 425 from the proxy. */
	bool			 xfer_sent;
	bool			 data_lost;
	bool			 data_abort;	/* ... given up: 426, not 425
						 * (ftp_data_abort) */
	/* Client bytes not yet read as commands: our PORT/EPRT, a login or
	 * our PWD after it awaits its reply (ftp_must_wait). NULL until
	 * first needed. */
	struct evbuffer		*held;
	bool			 user_ok;
	char			 user[72];
	/* The daily quota of the <user> rule that took the user, and its
	 * entry in the quota table once a transfer needed it. */
	struct px_quota_limit	 qlimit;
	struct px_quota		*quota;
	/* With <auth>: the <login> whose quota applies (NULL: a <user>'s). */
	const struct ftp_login	*qlogin;
	/* With cluster/@store (quota_store.h): the question under way (the
	 * client's commands wait meanwhile, ftp_must_wait), then its answer
	 * for the transfer command when it runs again; the channels metered
	 * against the byte quota, one ftp_meter each (a transfer may still
	 * run when the next one starts). */
	struct px_session	*qs;
	struct px_qstore_wait	 qwait;
	bool			 qreplay;	/* the next command is that one */
	struct ftp_meter	*qmeters;
	struct ftp_cmd		 cmd;
	struct ftp_path_state	 path;		/* the working directory */
	char			 xfer[256];	/* the data channel's note; "" */
	/* Scanned transfers (ftp_scan.c): the scan of the command being
	 * forwarded (for its pending entry), and those under way. */
	struct ftp_scan		*scans;
	unsigned		 scan_gen;
	unsigned		 scan_note;
	bool			 scan_swallow;	/* a reply replaced: its lines */
	bool			 in_data;	/* inside on_data */
	bool			 scan_held;	/* the server closed behind a reply
						 * held for a verdict: its end waits */
	/* The last SIZE sent (canonical) and its 213 answer (-1: none
	 * yet): a RETR of that file announces it in its audit record. */
	char			 size_path[FTP_PATH_MAX];
	int64_t			 size_val;
	bool			 rest;		/* a REST awaits its transfer */
	struct ftp_auth		*auth;		/* <auth>: NULL until USER */
};

/* ---- ftp.c: replies and the pending queue ------------------------------ */

/* NULL when FTP_PENDING replies are pending already. */
struct ftp_pending *ftp_q_push(struct ftp_state *st, enum ftp_pkind kind,
	    const char *verb);
void	ftp_send(struct px_session *s, enum px_dir dir, const char *text);
/* A reply of the proxy's own: now if nothing is pending, else in turn.
 * -1 when the queue is full. */
int	ftp_reply_local(struct px_session *s, struct ftp_state *st,
	    const char *verb, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));

struct ftp_pending *ftp_q_head(struct ftp_state *st);
void	ftp_q_pop(struct ftp_state *st);
/* Proxy-made replies at the head of the queue go out. */
void	ftp_q_flush_local(struct px_session *s, struct ftp_state *st);
/* The ftp-command line of c, with verdict (PASS's argument hidden). */
void	ftp_log_cmd(struct px_session *s, struct ftp_state *st,
	    const struct ftp_cmd *c, const char *verdict);
/* Whether nothing more may go to the server before the replies pending
 * come (our PORT/EPRT, a login and our PWD after it) or the quota store
 * answers. */
bool	ftp_must_wait(const struct ftp_state *st, const struct ftp_policy *p);
/* The client's held commands, once nothing stops them. */
enum px_verdict ftp_resume(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p);
/* <scan partial="refuse">: verb would move a scanned file in pieces. */
bool	ftp_partial_refuses(const struct px_session *s,
	    const struct ftp_state *st, const char *verb);

/* ---- ftp_reply.c: the server's replies ---------------------------------- */

/* A login the server took: the login directory, where path rules are. */
void	ftp_home_ask(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p);
/* Server bytes, reply by reply, each paired with its pending command. */
enum px_verdict ftp_server_replies(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, struct evbuffer *in);
/* ftp_server_replies, then a check answered meanwhile, then the client's
 * held commands. */
enum px_verdict ftp_from_server(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, struct evbuffer *in);

/* ftp_command's results besides 0 and -1 (too many pending): the
 * session was denied, or ended, already. */
#define FTP_RC_DENIED	(-2)
#define FTP_RC_ENDED	(-3)
/* The command waits for the cluster's quota store: it goes back in front
 * of the client's held bytes and runs again once the answer came. */
#define FTP_RC_WAIT	(-4)

/* Client bytes, command by command (ftp.c). */
enum px_verdict ftp_client_input(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, struct evbuffer *in);

/* ---- ftp_tls.c: FTPS ---------------------------------------------------- */

/* At on_open: each side's TLS from the service. -1: out of memory. */
int	ftp_tls_open(struct px_session *s, struct ftp_state *st);
void	ftp_tls_close(struct px_session *s, struct ftp_state *st);
/* AUTH, PBSZ, PROT, CCC: answered by the proxy, never forwarded (the
 * server's TLS is proxyd's own business). true: c was one of them (*rc:
 * ftp_command's result). in: what the client sent after c (nothing may
 * follow AUTH TLS in plain). */
bool	ftp_tls_command(struct px_session *s, struct ftp_state *st,
	    const struct ftp_cmd *c, struct evbuffer *in, int *rc);
/* Before TLS where auth="required": false when c must wait for it (a
 * 530 is queued then). */
bool	ftp_tls_allowed(struct px_session *s, struct ftp_state *st,
	    const struct ftp_cmd *c, int *rc);
/* The final reply to one of FTP_P_GREET..FTP_P_SPROT; in: what the
 * server sent after it. */
enum px_verdict ftp_tls_server_reply(struct px_session *s,
	    struct ftp_state *st, const struct ftp_policy *p,
	    const struct ftp_pending *q, int code, struct evbuffer *in);
/* FEAT: the lines about TLS towards the client, before its last line. */
void	ftp_tls_feat(struct ftp_state *st, struct evbuffer *out);
/* A data channel about to be set up: -1 when the client must protect
 * it first (a 521 queued); else TLS put on the ends that need it. */
int	ftp_tls_data(struct px_session *s, struct ftp_state *st,
	    struct px_channel *ch);
bool	ftp_tls_data_allowed(struct px_session *s, struct ftp_state *st,
	    const char *verb, int *rc);
/* Forward mode: the server is connected. true: its greeting is
 * FTP_P_GREET's, TLS set up before the login; false: no TLS to it. */
bool	ftp_tls_server_connected(struct ftp_state *st);
/* Client bytes while the server's setup runs: held (bounded). */
enum px_verdict ftp_tls_hold(struct px_session *s, struct ftp_state *st,
	    struct evbuffer *in);

/* ---- ftp_data.c: data channels ----------------------------------------- */

/* PASV/EPSV/PORT/EPRT from the client, accepted by the policy. -1: end
 * the session. */
int	ftp_data_request(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, const struct ftp_cmd *c);
/* A line of the server's reply (code) to our PASV/EPSV; first, last: the
 * reply's first and last lines (which begin with its code). */
void	ftp_data_reply_line(struct ftp_state *st, int code, bool first,
	    bool last, const char *line, size_t len);
/* The final reply to our PASV/EPSV (the address its lines named) or
 * PORT/EPRT (q, popped already): raw[0..rawlen) its last line as it
 * came. */
void	ftp_data_reply(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, const struct ftp_pending *q, int code,
	    const unsigned char *raw, size_t rawlen);
/* A command about to be forwarded: when it is a transfer on the current
 * channel, what its data-transfer log line says of it, and its scan
 * (st->scan_note) when <scan> covers it. true: not to be forwarded (the
 * caller answers 425): a transfer whose data connection the server
 * refused after the client had its reply to PASV/PORT, or one to be
 * scanned whose data moved before the command. */
bool	ftp_data_note(struct px_session *s, struct ftp_state *st,
	    const struct ftp_cmd *c);
/* A transfer command (verb) that must wait for our PASV/EPSV's reply. */
bool	ftp_data_wait(const struct ftp_state *st, const char *verb);
/* The transfer command waiting so is given up before it reached the
 * server (an ABOR or QUIT came behind it): its channel goes, and
 * ftp_data_note() refuses it, with a 426. */
void	ftp_data_abort(struct px_session *s, struct ftp_state *st);

/* ---- ftp_auth.c: inband authentication (the service's <auth>) ---------- */

struct px_auth_id;
bool	ftp_auth_on(const struct px_session *s);
/* A command the proxy answers itself before/after the proven login (USER
 * again, REIN, anything before it): true, *rc ftp_command's result. */
bool	ftp_auth_gate(struct px_session *s, struct ftp_state *st,
	    const struct ftp_cmd *c, int *rc);
/* Forward mode's greeting, the proxy's own: due (later, from on_open;
 * -1: out of memory), then sent by the next on_data (later false). */
int	ftp_auth_greet(struct px_session *s, struct ftp_state *st, bool later);
/* Forward mode's USER name@server: the server kept and uc made the USER
 * of name alone (false); true: answered (530, *rc ftp_command's result),
 * no server named or not an address. */
bool	ftp_auth_user_server(struct px_session *s, struct ftp_state *st,
	    const struct ftp_cmd *c, struct ftp_cmd *uc, int *rc);
/* USER and PASS from the client, accepted by the policy: never sent on;
 * ftp_command's results. */
int	ftp_auth_user(struct px_session *s, struct ftp_state *st,
	    const struct ftp_cmd *c);
int	ftp_auth_pass(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, const struct ftp_cmd *c);
/* A check's answer, once FTP_P_AUTH is at the head: the client's 530,
 * a 421 (PX_DENY), or the server login begins. */
enum px_verdict ftp_auth_step(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p);
/* Forward mode: the server connected greeted (code), its TLS set up
 * (220): the login begins, or the client gets a 530. */
void	ftp_auth_server_greeted(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, int code);
/* The server's final reply to FTP_P_SUSER or FTP_P_SPASS (q, popped). */
void	ftp_auth_server_reply(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, const struct ftp_pending *q, int code);
/* Who the client proved to be; NULL: nobody. */
const struct px_auth_id *ftp_auth_id(const struct ftp_state *st);
/* px_analyser.who: " user=NAME auth=password" once proven. */
void	ftp_auth_who(const struct px_session *s, const void *st, char *buf,
	    size_t len);
void	ftp_auth_close(struct ftp_state *st);

/* ---- ftp_quota.c: per-user daily quotas --------------------------------- */

/* USER accepted (or, with <auth>, the user proven): the quota its
 * <user> rule sets. */
void	ftp_quota_user(struct ftp_state *st, const struct ftp_policy *p,
	    const char *user);
/* A transfer command about to go to the server on st->ch: refused when
 * the user's day is used up (true, *rc for ftp_command: the 550 or 552
 * queued, the data channel reset), else counted, and its data channel
 * metered against the byte quota. With the cluster's store: true with
 * *rc FTP_RC_WAIT while the store is asked; a store that cannot answer
 * refuses it with a 451 (on-store-error="refuse") or leaves it to this
 * node's own count ("local"). */
bool	ftp_quota_refused(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, const struct ftp_cmd *c, int *rc);
/* A data channel ended: one its byte quota cut is logged and counted. */
void	ftp_quota_chan_done(struct px_session *s, struct ftp_state *st,
	    const struct px_chan_result *r);
/* The metered channel goes without its callback (dropped before it
 * relayed, or freed with the session): the leases it did not use go
 * back to the store, and it is no longer the metered one. */
void	ftp_quota_chan_gone(struct px_session *s, struct ftp_state *st,
	    const struct px_channel *ch);
/* The session ends: a question to the store is forgotten, the metered
 * channel's leases not used go back (ftp_quota_chan_gone). */
void	ftp_quota_close(struct px_session *s, struct ftp_state *st);

/* ---- ftp_scan.c: files through the service's scanner, <content> and
 * <audit> ------------------------------------------------------------- */

struct ftp_cmd;
/* A transfer command (upload or download) about to go to the server on
 * st->ch: when the service's <scan> covers it, its data goes through the
 * scanner. The scan's id (for the command's pending entry), 0: not
 * scanned, -1: cannot be (bytes moved already, out of memory). */
int	ftp_scan_begin(struct px_session *s, struct ftp_state *st,
	    const struct ftp_cmd *c, bool upload);
enum ftp_scan_reply {
	FTP_SCAN_FORWARD = 0,	/* as it is */
	FTP_SCAN_HOLD,		/* not yet: the verdict is awaited */
	FTP_SCAN_REPLACE,	/* by ftp_scan_reply_text(): refused */
};
/* The first line of the server's final reply (code) to scan id's
 * command. HOLD: leave it unread; px_session_resume() comes with the
 * verdict. */
enum ftp_scan_reply ftp_scan_reply(struct ftp_state *st, unsigned id,
	    int code);
const char *ftp_scan_reply_text(const struct ftp_state *st, unsigned id);
/* A 1xx reply line to id's command: its "(N bytes)", the size the
 * server announces, goes in the audit record and the size check (STOU:
 * "FILE: name", the file's name); a download's end held for the check
 * is checked then. */
void	ftp_scan_announced(struct ftp_state *st, unsigned id,
	    const char *line, size_t len);
/* The final reply to id's command went (its own or the replacement). */
void	ftp_scan_reply_done(struct ftp_state *st, unsigned id);
/* A transfer's final reply is held for its verdict. */
bool	ftp_scan_reply_held(const struct ftp_state *st);
/* SIZE forwarded to the server, and the final reply to a command: a
 * file's size as the server tells it, for the audit record. */
void	ftp_size_sent(struct ftp_state *st, const struct ftp_cmd *c);
void	ftp_size_reply(struct ftp_state *st, const char *verb, int code,
	    const char *line, size_t len);
/* A data channel ended (r: what it relayed and its TLS ends'
 * fingerprints, for the audit record) or was dropped (r NULL: it never
 * relayed): its scan, if any, hears of it. */
void	ftp_scan_chan_gone(struct ftp_state *st, const struct px_channel *ch,
	    const struct px_chan_result *r);
void	ftp_scan_close(struct ftp_state *st);

#endif
