/* ftp: what the control channel (ftp.c) and the data channels (ftp_data.c)
 * share: the per-session state, the queue of pending replies and the
 * analyser's counters. Internal to plugins/ftp. */
#ifndef FTP_INT_H
#define FTP_INT_H

#include <stdbool.h>
#include <sys/socket.h>

#include "analyser.h"
#include "ftp/ftp_policy.h"
#include "ftp/ftp_proto.h"

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
};

#define FTP_PENDING	16

struct ftp_pending {
	enum ftp_pkind	kind;
	enum ftp_creq	creq;
	char		verb[FTP_VERB_MAX + 1];
	char		text[192];
};

struct ftp_state {
	struct ftp_pending	 q[FTP_PENDING];
	unsigned		 qhead, qlen;
	struct ftp_reply_state	 rs;
	bool			 in_reply;	/* lines of a reply under way */
	bool			 swallow;	/* ... not forwarded */
	bool			 feat;		/* ... filtered (FEAT) */
	struct px_channel	*ch;
	struct sockaddr_storage	 cbound;	/* our client-side listener */
	bool			 user_ok;
	char			 user[72];
	struct ftp_cmd		 cmd;
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

/* ---- ftp_data.c: data channels ----------------------------------------- */

/* PASV/EPSV/PORT/EPRT from the client, accepted by the policy. -1: end
 * the session. */
int	ftp_data_request(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, const struct ftp_cmd *c);
/* The final reply to our PASV/EPSV or PORT/EPRT (q, popped already): line
 * is its text, raw[0..rawlen) the bytes as they came. */
void	ftp_data_reply(struct px_session *s, struct ftp_state *st,
	    const struct ftp_policy *p, const struct ftp_pending *q, int code,
	    const char *line, size_t len, const unsigned char *raw,
	    size_t rawlen);
/* A command about to be forwarded: when it is a transfer on the current
 * channel, what its data-transfer log line says of it. */
void	ftp_data_note(struct ftp_state *st, const struct ftp_cmd *c);

#endif
