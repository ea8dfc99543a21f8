/* ftp: the data channels. For each PASV/EPSV/PORT/EPRT the client sends,
 * the proxy sets up both ends itself as core channels (data_channel.c): the
 * client's end as the client asked (or as the policy forces), the server's
 * end in the policy's mode, with PORT/EPRT/PASV/EPSV and their replies
 * rewritten to the proxy's own addresses. A connect proxyd would make to
 * a port below 1024, on either side, or to a server's data host that
 * <servers> keeps out, is refused (FTP bounce). One
 * data-transfer line is logged per channel when it ends. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "analyser.h"
#include "parse.h"
#include "ftp/ftp_int.h"

/* The client's passive data port is kept while transfers follow each
 * other (no socket set-up per transfer), and given back to the range
 * after this long without one. */
#define FTP_LISTEN_IDLE_MS	2000

/* Forgets the current channel. One still relaying is left to finish on
 * its own (a client may send its next command before proxyd has seen the
 * end of the last transfer); one still waiting for a connection is closed,
 * and with it its listening port. */
static void
ftp_chan_drop(struct px_session *s, struct ftp_state *st)
{
	if (st->ch == NULL)
		return;
	if (!px_channel_relaying(st->ch)) {
		px_session_count(s, FTP_C_DATA_REFUSED,
		    px_channel_refused(st->ch));
		ftp_scan_chan_gone(st, st->ch, NULL);
		ftp_quota_chan_gone(s, st, st->ch);
		px_channel_free(st->ch);
	}
	st->ch = NULL;
}

static const char *
ftp_tls_word(const struct px_chan_result *r, enum px_chan_end end)
{
	if (!r->tls[end])
		return "no";
	return r->resumed[end] ? "resumed" : "yes";
}

static void
ftp_chan_done(struct px_session *s, void *arg, const struct px_chan_result *r)
{
	struct ftp_state *st = arg;
	char client[PX_ADDRSTRLEN], server[PX_ADDRSTRLEN];

	ftp_scan_chan_gone(st, r->ch, r);
	ftp_quota_chan_done(s, st, r);
	if (st->ch == r->ch) {
		st->ch = NULL;
		st->xfer[0] = '\0';
		/* Failed before it moved a byte (the server's end refused or
		 * timed out, the client never came) with the transfer command
		 * still to come: that command gets the 425. Forwarded, it
		 * would have the server wait for a connection nobody makes. */
		if (r->error != NULL && !r->relayed && !st->xfer_sent)
			st->data_lost = true;
		/* A transfer command waiting for the server's reply to our
		 * PASV/EPSV for it (ftp_data_wait) waits no more: with the
		 * channel gone (the data timeout, the server's end never
		 * named), it gets its 425 now. */
		if (!st->in_data && st->held != NULL &&
		    evbuffer_get_length(st->held) > 0)
			px_session_resume(s, PX_TO_SERVER);
	}
	/* A failed one at warning: a user's transfer did not happen, which
	 * must show at the level a busy gateway logs at. */
	px_session_log(s, r->error != NULL ? LOG_WARNING : LOG_INFO,
	    "data-transfer %s bytes=%llu to-server=%llu "
	    "to-client=%llu duration=%llu.%03llu tls-client=%s tls-server=%s"
	    "%s%s%s%s client=%s server=%s refused=%u end=%s",
	    r->note[0] != '\0' ? r->note :
	    "- cmd=- file=\"\"",
	    (unsigned long long)(r->bytes[0] + r->bytes[1]),
	    (unsigned long long)r->bytes[0], (unsigned long long)r->bytes[1],
	    (unsigned long long)(r->duration_ms / 1000),
	    (unsigned long long)(r->duration_ms % 1000),
	    ftp_tls_word(r, PX_CHAN_CLIENT), ftp_tls_word(r, PX_CHAN_SERVER),
	    r->ja4[0] != '\0' ? " ja4=" : "", r->ja4,
	    r->ja4s[0] != '\0' ? " ja4s=" : "", r->ja4s,
	    r->addr[PX_CHAN_CLIENT] != NULL ? px_sockaddr_str(
	    r->addr[PX_CHAN_CLIENT], client, sizeof(client)) : "-",
	    r->addr[PX_CHAN_SERVER] != NULL ? px_sockaddr_str(
	    r->addr[PX_CHAN_SERVER], server, sizeof(server)) : "-",
	    r->refused, r->error != NULL ? r->error : "ok");
	px_session_count(s, FTP_C_DATA_REFUSED, r->refused);
	px_session_count(s, r->error == NULL ? FTP_C_TRANSFERS :
	    FTP_C_DATA_FAILED, 1);
}

static bool
ftp_is_v4(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET;
}

/* The client's side is set up: the reply it gets for its request. */
static void
ftp_client_answer(struct px_session *s, struct ftp_state *st,
    enum ftp_creq creq, const char *verb)
{
	char buf[192];

	switch (creq) {
	case FTP_CREQ_PASV:
		if (ftp_fmt_227((struct sockaddr *)&st->cbound, buf,
		    sizeof(buf)) == -1)
			snprintf(buf, sizeof(buf), "425 Cannot open data "
			    "connection\r\n");
		break;
	case FTP_CREQ_EPSV:
		if (ftp_fmt_229(px_sockaddr_port((struct sockaddr *)&st->cbound),
		    buf, sizeof(buf)) == -1)
			snprintf(buf, sizeof(buf), "425 Cannot open data "
			    "connection\r\n");
		break;
	default:
		snprintf(buf, sizeof(buf), "200 %s command successful\r\n", verb);
		break;
	}
	px_session_log(s, LOG_INFO, "ftp-reply code=%.3s cmd=%s by=proxy", buf,
	    verb);
	ftp_send(s, PX_TO_CLIENT, buf);
}

/* PASV/EPSV/PORT/EPRT from the client. Returns -1 to end the session. */
int
ftp_data_request(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_cmd *c)
{
	const struct sockaddr *client = px_session_client(s);
	const struct sockaddr *server = px_session_server(s);
	struct sockaddr_storage caddr, clocal, slocal, sbound;
	enum ftp_creq creq;
	enum ftp_mode smode;
	struct ftp_pending *q;
	char buf[160], arg[128];
	bool cpassive, early;
	int trc;

	if (strcmp(c->verb, "PASV") == 0)
		creq = FTP_CREQ_PASV;
	else if (strcmp(c->verb, "EPSV") == 0)
		creq = FTP_CREQ_EPSV;
	else if (strcmp(c->verb, "PORT") == 0)
		creq = FTP_CREQ_PORT;
	else
		creq = FTP_CREQ_EPRT;
	cpassive = creq == FTP_CREQ_PASV || creq == FTP_CREQ_EPSV;
	if (cpassive && p->client_data == FTP_ACTIVE)
		return ftp_reply_local(s, st, c->verb, "500 Passive mode not "
		    "allowed here; use PORT or EPRT");
	if (!cpassive && p->client_data == FTP_PASSIVE)
		return ftp_reply_local(s, st, c->verb, "500 Active mode not "
		    "allowed here; use PASV or EPSV");
	if (creq == FTP_CREQ_EPSV && c->has_arg) {
		/* "EPSV ALL" / "EPSV 1|2": the proxy decides the family. */
		if (strcasecmp(c->arg, "ALL") == 0)
			return ftp_reply_local(s, st, c->verb, "200 EPSV ALL ok");
	}
	if (!st->local_ok) {
		if (px_session_local(s, PX_CHAN_CLIENT, &st->clocal) == -1 ||
		    px_session_local(s, PX_CHAN_SERVER, &st->slocal) == -1)
			return ftp_reply_local(s, st, c->verb, "425 Cannot "
			    "open data connection");
		st->local_ok = true;
	}
	memcpy(&clocal, &st->clocal, sizeof(clocal));
	memcpy(&slocal, &st->slocal, sizeof(slocal));
	if (creq == FTP_CREQ_PASV && !ftp_is_v4(&clocal))
		return ftp_reply_local(s, st, c->verb, "500 PASV needs IPv4; "
		    "use EPSV");
	if (!cpassive) {
		int rc = creq == FTP_CREQ_PORT ?
		    ftp_parse_port(c->arg, c->arglen, &caddr) :
		    ftp_parse_eprt(c->arg, c->arglen, &caddr);

		if (!c->has_arg || rc == -1) {
			if (creq == FTP_CREQ_EPRT && c->arglen > 2 &&
			    c->arg[1] != '1' && c->arg[1] != '2')
				return ftp_reply_local(s, st, c->verb, "522 "
				    "Network protocol not supported, use (1,2)");
			return ftp_reply_local(s, st, c->verb, "501 Syntax "
			    "error in %s arguments", c->verb);
		}
		/* FTP bounce: a data connection to anyone but the client
		 * (strict-port-check), or to a privileged port, a service's
		 * (25, 80...) and never a client's data port (vsftpd and
		 * ProFTPD refuse it too), whatever the check says. */
		if (px_sockaddr_port((struct sockaddr *)&caddr) < 1024 ||
		    (p->strict && !px_sockaddr_same_host(
		    (struct sockaddr *)&caddr, client))) {
			px_session_count(s, FTP_C_BOUNCE, 1);
			px_session_log(s, LOG_WARNING, "ftp-bounce refused: %s "
			    "%.*s is not the client's host or uses a port "
			    "below 1024", c->verb, (int)(c->arglen > 64 ? 64 :
			    c->arglen), c->arg);
			return ftp_reply_local(s, st, c->verb, "500 Illegal %s "
			    "command", c->verb);
		}
	}
	if (!ftp_tls_data_allowed(s, st, c->verb, &trc))
		return trc;
	ftp_chan_drop(s, st);
	st->data_lost = st->xfer_sent = st->data_abort = false;
	/* Nothing pending before it and logged in (the server has no reason
	 * to refuse): the client's reply depends on the proxy's own end only,
	 * and goes at once, while the server's end is set up; should the
	 * server refuse after all, the transfer command gets the 425. */
	early = st->qlen == 0 && st->logged_in;
	st->chan_gen++;
	if ((st->ch = px_channel_new(s, p->timeout_ms, ftp_chan_done,
	    st)) == NULL)
		return ftp_reply_local(s, st, c->verb, "425 Cannot open data "
		    "connection");
	if (ftp_tls_data(s, st, st->ch) == -1) {
		ftp_chan_drop(s, st);
		return ftp_reply_local(s, st, c->verb, "425 Cannot open data "
		    "connection (TLS)");
	}
	/* The client's end. */
	if (cpassive) {
		if ((st->lst == NULL && (st->lst = px_data_listener_new(s,
		    (struct sockaddr *)&clocal, p->port_lo, p->port_hi,
		    p->strict ? client : NULL, FTP_LISTEN_IDLE_MS)) == NULL) ||
		    px_channel_listen_on(st->ch, PX_CHAN_CLIENT, st->lst,
		    &st->cbound) == -1) {
			px_session_log(s, LOG_WARNING, "ftp: no data port for "
			    "the client: %s", strerror(errno));
			ftp_chan_drop(s, st);
			return ftp_reply_local(s, st, c->verb, "425 Cannot open "
			    "data connection");
		}
		/* The client is told the address it reached us on. */
		px_sockaddr_set_port(&clocal, px_sockaddr_port(
		    (struct sockaddr *)&st->cbound));
		memcpy(&st->cbound, &clocal, sizeof(clocal));
	} else if (px_channel_connect(st->ch, PX_CHAN_CLIENT,
	    (struct sockaddr *)&caddr, (struct sockaddr *)&clocal) == -1) {
		ftp_chan_drop(s, st);
		return ftp_reply_local(s, st, c->verb, "425 Cannot open data "
		    "connection");
	}
	/* The server's end. */
	smode = p->server_data;
	if (smode == FTP_KEEP)
		smode = cpassive ? FTP_PASSIVE : FTP_ACTIVE;
	if (smode == FTP_PASSIVE) {
		snprintf(buf, sizeof(buf), "%s\r\n",
		    ftp_is_v4(&slocal) ? "PASV" : "EPSV");
		q = ftp_q_push(st, FTP_P_PASV, c->verb);
	} else {
		if (px_channel_listen(st->ch, PX_CHAN_SERVER,
		    (struct sockaddr *)&slocal, p->port_lo, p->port_hi,
		    p->strict ? server : NULL, &sbound) == -1) {
			ftp_chan_drop(s, st);
			return ftp_reply_local(s, st, c->verb, "425 Cannot open "
			    "data connection");
		}
		/* The server is told our address on its connection. */
		px_sockaddr_set_port(&slocal, px_sockaddr_port((struct sockaddr *)&sbound));
		if ((ftp_is_v4(&slocal) ? ftp_fmt_port((struct sockaddr *)&slocal,
		    arg, sizeof(arg)) : ftp_fmt_eprt((struct sockaddr *)&slocal,
		    arg, sizeof(arg))) == -1) {
			ftp_chan_drop(s, st);
			return ftp_reply_local(s, st, c->verb, "425 Cannot open "
			    "data connection");
		}
		snprintf(buf, sizeof(buf), "%s %s\r\n",
		    ftp_is_v4(&slocal) ? "PORT" : "EPRT", arg);
		q = ftp_q_push(st, FTP_P_PORT, c->verb);
	}
	if (q == NULL)
		return -1;
	q->creq = creq;
	q->gen = st->chan_gen;
	px_session_log(s, LOG_INFO, "ftp-data client=%s server=%s sent=\"%.*s\"",
	    cpassive ? "passive" : "active",
	    smode == FTP_PASSIVE ? "passive" : "active",
	    (int)strlen(buf) - 2, buf);
	ftp_send(s, PX_TO_SERVER, buf);
	if (early) {
		q->answered = true;
		ftp_client_answer(s, st, creq, c->verb);
	}
	return 0;
}

/* RFC 959 4.2: every line of a multi-line reply is its text, and clients
 * (Python ftplib, curl, lftp) take a 227's or 229's address wherever in
 * it: "227-Entering Passive Mode (h1,...,p2)" then "227 OK" names its
 * port on the first line alone. So the first address the reply's lines
 * name is the reply's, the one a client talking to the server would use,
 * and ftp_data_reply judges it as it does a one-line reply's (a line
 * naming another further on changes nothing). A preliminary reply before
 * (120) names none: each reply starts afresh. */
void
ftp_data_reply_line(struct ftp_state *st, int code, bool first, bool last,
    const char *line, size_t len)
{
	struct ftp_pasv_reply *r = &st->pasv;
	size_t skip = first || last ? 3 : 0;

	if (first)
		r->found = false;
	if (r->found || len < skip)
		return;
	if (code == 227)
		r->found = ftp_parse_227(line + skip, len - skip, &r->addr) == 0;
	else if (code == 229)
		r->found = ftp_parse_229(line + skip, len - skip, &r->port) == 0;
	if (r->found)
		px_log_escape(r->line, sizeof(r->line), line, len, true);
}

/* The final reply to our PASV/EPSV or PORT/EPRT. */
void
ftp_data_reply(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_pending *q, int code,
    const unsigned char *raw, size_t rawlen)
{
	struct sockaddr_storage sa;
	bool ok, mine = st->ch != NULL && q->gen == st->chan_gen;

	/* (Not mine: the client asked again meanwhile; that channel is the
	 * later request's.) */
	if (q->kind == FTP_P_PORT) {
		if (code / 100 == 2 && mine) {
			if (!q->answered)
				ftp_client_answer(s, st, q->creq, q->verb);
			return;
		}
		goto fail;
	}
	memcpy(&sa, px_session_server(s), px_sockaddr_len(px_session_server(s)));
	ok = (code == 227 || code == 229) && st->pasv.found;
	if (ok && code == 227) {
		/* With the strict check only the server's own host, whatever
		 * the reply says: no bounce through the server either. */
		if (!p->strict)
			memcpy(&sa, &st->pasv.addr, sizeof(sa));
		else
			px_sockaddr_set_port(&sa, px_sockaddr_port(
			    (struct sockaddr *)&st->pasv.addr));
	} else if (ok)
		px_sockaddr_set_port(&sa, st->pasv.port);
	/* strict-port-check="no" takes the reply's address: where the
	 * client picks the server, <servers> must take that host too, or a
	 * server would lead proxyd to hosts the policy keeps out. */
	if (ok && !p->strict && (px_session_is_transparent(s) ||
	    px_session_server_later(s)) &&
	    !px_session_server_host_allowed(s, (struct sockaddr *)&sa)) {
		px_session_count(s, FTP_C_BOUNCE, 1);
		px_session_log(s, LOG_WARNING, "ftp-bounce refused: the "
		    "server's %d reply names a host <servers> does not "
		    "allow: \"%s\"", code, st->pasv.line);
		ok = false;
	}
	/* The bounce through proxyd, the other way: a server naming a
	 * privileged port (its host's SMTP, say) would have proxyd write the
	 * client's STOR into it. No FTP server's data port is one. */
	if (ok && px_sockaddr_port((struct sockaddr *)&sa) < 1024) {
		px_session_count(s, FTP_C_BOUNCE, 1);
		px_session_log(s, LOG_WARNING, "ftp-bounce refused: the "
		    "server's %d reply names port %u, below 1024: \"%s\"",
		    code, (unsigned)px_sockaddr_port((struct sockaddr *)&sa),
		    st->pasv.line);
		ok = false;
	}
	if (ok && mine && px_channel_connect(st->ch, PX_CHAN_SERVER,
	    (struct sockaddr *)&sa, (struct sockaddr *)&st->slocal) == 0) {
		if (!q->answered)
			ftp_client_answer(s, st, q->creq, q->verb);
		return;
	}
fail:
	if (mine)
		ftp_chan_drop(s, st);
	if (q->answered) {
		/* The client has its 227/229/200: its next transfer command
		 * hears of it, unless it went to the server already (which
		 * then answers it itself). */
		px_session_log(s, LOG_NOTICE, "ftp-data the server's end of "
		    "the data connection failed (reply %d to our %s) after "
		    "the client had its reply", code, q->kind == FTP_P_PORT ?
		    "PORT/EPRT" : "PASV/EPSV");
		if (mine && !st->xfer_sent)
			st->data_lost = true;
		return;
	}
	if (code / 100 == 4 || code / 100 == 5) {
		/* The server's own refusal means as much to the client. */
		evbuffer_add(px_session_output(s, PX_TO_CLIENT), raw, rawlen);
		return;
	}
	px_session_log(s, LOG_INFO, "ftp-reply code=425 cmd=%s by=proxy",
	    q->verb);
	ftp_send(s, PX_TO_CLIENT, "425 Cannot open data connection\r\n");
}

/* What a transfer command moves, for its data-transfer line; NULL: it
 * moves nothing. */
static const char *
ftp_transfer_kind(const char *verb)
{
	if (strcmp(verb, "RETR") == 0)
		return "download";
	if (strcmp(verb, "STOR") == 0 || strcmp(verb, "STOU") == 0 ||
	    strcmp(verb, "APPE") == 0)
		return "upload";
	if (strcmp(verb, "LIST") == 0 || strcmp(verb, "NLST") == 0 ||
	    strcmp(verb, "MLSD") == 0)
		return "listing";
	return NULL;
}

/* Our PASV/EPSV still unanswered: the server's reply decides whether
 * proxyd connects the server's end, and a transfer command forwarded
 * before it would have the server answer (150, then wait) a transfer
 * nobody connects, where a refused 227/229 should cost that command its
 * 425. It waits in ftp.c's held bytes, as everything does behind our
 * PORT/EPRT; commands other than transfers do not wait. The wait is for
 * the current channel's PASV/EPSV alone, and ends with that channel: at
 * the data timeout (limits/@timeout) a server that never answered leaves
 * the command its 425 (ftp_chan_done); an ABOR or QUIT behind it ends it
 * at once (ftp.c's ftp_wait_cut, ftp_data_abort). */
bool
ftp_data_wait(const struct ftp_state *st, const char *verb)
{
	const struct ftp_pending *q;
	unsigned i;

	if (ftp_transfer_kind(verb) == NULL || st->ch == NULL)
		return false;
	for (i = 0; i < st->qlen; i++) {
		q = &st->q[(st->qhead + i) % FTP_PENDING];
		if (q->kind == FTP_P_PASV && q->gen == st->chan_gen)
			return true;
	}
	return false;
}

void
ftp_data_abort(struct px_session *s, struct ftp_state *st)
{
	ftp_chan_drop(s, st);
	st->data_lost = st->data_abort = true;
}

bool
ftp_data_note(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c)
{
	const char *kind;
	char note[256], file[200];
	int id;

	if ((kind = ftp_transfer_kind(c->verb)) == NULL)
		return false;
	if (st->data_lost) {
		st->data_lost = false;
		return true;
	}
	st->xfer_sent = true;
	if (st->ch == NULL)
		return false;
	px_log_escape(file, sizeof(file), c->arg, c->arglen, true);
	snprintf(note, sizeof(note), "%s cmd=%s file=\"%s\"", kind, c->verb,
	    file);
	px_channel_note(st->ch, note);
	/* A data connection carries one way: its end is the transfer's. */
	px_channel_oneway(st->ch, strcmp(kind, "upload") == 0 ? PX_TO_SERVER :
	    PX_TO_CLIENT);
	snprintf(st->xfer, sizeof(st->xfer), "%s", note);
	if (strcmp(kind, "listing") == 0)
		return false;
	if ((id = ftp_scan_begin(s, st, c, strcmp(kind, "upload") == 0)) == -1) {
		/* Not to be scanned, not to pass unscanned: the channel
		 * goes, the command gets the 425. */
		px_session_log(s, LOG_WARNING, "ftp-scan %s cannot be scanned "
		    "(data moved before the command, or out of memory): "
		    "refused", note);
		px_channel_abort(st->ch, PX_CHAN_CLIENT, "denied: data before "
		    "the transfer command (content scan)");
		px_channel_abort(st->ch, PX_CHAN_SERVER, "denied: data before "
		    "the transfer command (content scan)");
		st->ch = NULL;
		st->xfer[0] = '\0';
		return true;
	}
	st->scan_note = (unsigned)id;
	return false;
}
