/* ftp: the server's replies on the control channel, line by line: each
 * paired with the pending command it answers (ftp.c's queue), FEAT lines
 * filtered by the policy, a scanned transfer's reply held for the
 * scanner's verdict or replaced by the proxy's, the answer to the proxy's
 * own PWD after a login (ftp_home_ask) kept from the client, then the
 * client's held commands resumed. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "analyser.h"
#include "parse.h"
#include "scan.h"
#include "ftp/ftp_int.h"

/* ---- server replies --------------------------------------------------- */

/* A FEAT line: kept only when the policy accepts the command the feature
 * is used with, which is its first word (REST STREAM: REST, SITE MKDIR:
 * SITE, RANG STREAM: RANG; REST not on a scanned service that refuses
 * partial transfers), so that a client never sees offered what proxyd
 * would then refuse. A first word that no client could send as a
 * command is dropped, but for the few features that are no command. */
static bool
ftp_feat_keep(const struct px_session *s, const struct ftp_policy *p,
    const char *line, size_t len)
{
	char word[FTP_VERB_MAX + 1];
	size_t i = 0, k = 0;

	while (i < len && line[i] == ' ')
		i++;
	for (; i < len && line[i] != ' '; i++) {
		if (k == FTP_VERB_MAX || !((line[i] >= 'A' && line[i] <= 'Z') ||
		    (line[i] >= 'a' && line[i] <= 'z') ||
		    (k > 0 && line[i] >= '0' && line[i] <= '9')))
			return false;
		word[k++] = line[i] >= 'a' ? (char)(line[i] & ~0x20) : line[i];
	}
	word[k] = '\0';
	/* The server's TLS is proxyd's: the client hears of its own
	 * (ftp_tls_feat). */
	if (strcmp(word, "AUTH") == 0 || strcmp(word, "PBSZ") == 0 ||
	    strcmp(word, "PROT") == 0 || strcmp(word, "CCC") == 0)
		return false;
	/* Path names the server understands: no command of its own. */
	if (strcmp(word, "TVFS") == 0)
		return true;
	if (strcmp(word, "MLST") == 0)
		return ftp_cmd_allowed(p, "MLST") || ftp_cmd_allowed(p, "MLSD");
	if (strcmp(word, "UTF8") == 0)
		return ftp_cmd_allowed(p, "OPTS");
	/* <scan partial="refuse">: no restarts nor ranges to offer. */
	if ((strcmp(word, "REST") == 0 || strcmp(word, "RANG") == 0) &&
	    ftp_partial_refuses(s, NULL, word))
		return false;
	if ((strcmp(word, "EPRT") == 0 && p->client_data == FTP_PASSIVE) ||
	    ((strcmp(word, "EPSV") == 0 || strcmp(word, "PASV") == 0) &&
	    p->client_data == FTP_ACTIVE))
		return false;
	return k > 0 && ftp_cmd_allowed(p, word);
}

/* A reply line's code (its first three digits), -1: none. */
static int
ftp_line_code(const unsigned char *buf, size_t len)
{
	if (len < 3 || buf[0] < '1' || buf[0] > '5' || buf[1] < '0' ||
	    buf[1] > '9' || buf[2] < '0' || buf[2] > '9')
		return -1;
	return (buf[0] - '0') * 100 + (buf[1] - '0') * 10 + (buf[2] - '0');
}

/* The first line of a reply to a scanned transfer command: false when
 * the reply waits for the scanner's verdict (left in `in`: read again
 * once it came). */
static bool
ftp_scan_reply_start(struct ftp_state *st, const struct ftp_pending *q,
    const unsigned char *buf, size_t linelen)
{
	int code = ftp_line_code(buf, linelen);

	if (q == NULL || q->kind != FTP_P_FWD || q->scan == 0)
		return true;
	if (code >= 100 && code < 200)
		ftp_scan_announced(st, q->scan, (const char *)buf, linelen);
	if (code < 200)
		return true;
	switch (ftp_scan_reply(st, q->scan, code)) {
	case FTP_SCAN_HOLD:
		return false;
	case FTP_SCAN_REPLACE:
		st->scan_swallow = true;
		break;
	case FTP_SCAN_FORWARD:
		break;
	}
	return true;
}

/* The final reply to a scanned transfer command is through: a refused
 * one's replacement goes in its place. */
static void
ftp_scan_reply_end(struct px_session *s, struct ftp_state *st,
    const struct ftp_pending *q, int code, struct evbuffer *out)
{
	const char *text;

	if (q->scan == 0)
		return;
	if (st->scan_swallow) {
		st->scan_swallow = false;
		text = ftp_scan_reply_text(st, q->scan);
		px_session_log(s, LOG_INFO, "ftp-reply code=%.3s cmd=%s by=proxy "
		    "(content scan; the server said %d)", text, q->verb, code);
		evbuffer_add(out, text, strlen(text));
	}
	ftp_scan_reply_done(st, q->scan);
}

/* A login the server took: where path rules are, the proxy asks the
 * server for its directory itself (a PWD of its own, answered to nobody)
 * rather than take it for "/". Until the answer, the client's commands
 * wait (ftp_must_wait); a server that gives none leaves relative paths
 * refused (cwd-unknown) until one of the client's PWDs is answered. */
void
ftp_home_ask(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p)
{
	if (!ftp_path_rules(p))
		return;
	st->path.lost = true;
	if (ftp_q_push(st, FTP_P_HOME, "PWD") == NULL)
		return;		/* lost: relative paths refused */
	px_session_log(s, LOG_INFO, "ftp-command user=%s cmd=PWD arg=\"\" "
	    "verdict=accept by=proxy (the login directory, for the path "
	    "rules)", st->user[0] ? st->user : "-");
	ftp_send(s, PX_TO_SERVER, "PWD\r\n");
}

/* The final reply to our PWD (line: its last line). */
static void
ftp_home_reply(struct px_session *s, struct ftp_state *st, int code,
    const char *line, size_t len)
{
	char esc[FTP_PATH_MAX * 2];

	ftp_path_reply(&st->path, "PWD", code, line, len);
	if (st->path.lost) {
		px_session_log(s, LOG_WARNING, "ftp-home user=%s dir=- code=%d "
		    "(no directory in the answer to the proxy's PWD: relative "
		    "paths are refused until a PWD is answered)",
		    st->user[0] ? st->user : "-", code);
		return;
	}
	px_log_escape(esc, sizeof(esc), st->path.cwd, strlen(st->path.cwd),
	    true);
	px_session_log(s, LOG_INFO, "ftp-home user=%s dir=\"%s\"",
	    st->user[0] ? st->user : "-", esc);
}

enum px_verdict
ftp_server_replies(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, struct evbuffer *in)
{
	struct evbuffer *out = px_session_output(s, PX_TO_CLIENT);
	const unsigned char *buf;
	struct ftp_pending *q, cur;
	size_t len, used, linelen, want;
	enum ftp_rc rc;
	int fin, code;
	bool first;

	for (;;) {
		len = evbuffer_get_length(in);
		if (len == 0)
			return PX_MORE;
		want = len < FTP_LINE_MAX ? len : FTP_LINE_MAX;
		if ((buf = evbuffer_pullup(in, (ssize_t)want)) == NULL)
			return PX_ERROR;
		rc = ftp_line_get(buf, want, FTP_LINE_MAX, &linelen, &used);
		if (rc == FTP_MORE)
			return PX_MORE;
		if (rc != FTP_OK) {
			px_session_count(s, FTP_C_BAD_LINE, 1);
			px_session_end(s, PX_END_SERVER_FAIL, "error: ftp: "
			    "malformed reply line from the server");
			return PX_ERROR;
		}
		if (!st->in_reply && !ftp_scan_reply_start(st, ftp_q_head(st),
		    buf, linelen))
			return PX_MORE;
		fin = ftp_reply_feed(&st->rs, (const char *)buf, linelen, &code);
		if (fin == -1) {
			px_session_count(s, FTP_C_BAD_LINE, 1);
			px_session_end(s, PX_END_SERVER_FAIL, "error: ftp: "
			    "reply line without a code from the server");
			return PX_ERROR;
		}
		q = ftp_q_head(st);
		first = !st->in_reply;
		if (!st->in_reply) {
			/* First line of a reply: decide what to do with it. */
			st->in_reply = true;
			st->feat = q != NULL && q->kind == FTP_P_FEAT;
			st->feat_multi = fin == 0;
		}
		if (fin == 1) {
			st->in_reply = false;
			px_session_log(s, LOG_INFO, "ftp-reply code=%d cmd=%s",
			    code, q != NULL ? q->verb : "-");
			if (q != NULL && q->kind == FTP_P_FWD && code >= 200) {
				ftp_path_reply(&st->path, q->verb, code,
				    (const char *)buf, linelen);
				ftp_size_reply(st, q->verb, code,
				    (const char *)buf, linelen);
			}
		}
		if (q != NULL && q->kind == FTP_P_HOME) {
			/* Our own PWD: nothing forwarded. */
			if (fin == 1 && code >= 200)
				ftp_home_reply(s, st, code, (const char *)buf,
				    linelen);
			evbuffer_drain(in, used);
			if (fin != 1 || code < 200)
				continue;
			ftp_q_pop(st);
			ftp_q_flush_local(s, st);
			continue;
		}
		if (q != NULL && (q->kind == FTP_P_SUSER ||
		    q->kind == FTP_P_SPASS)) {
			/* Our login for an authenticated user: its replies
			 * are the proxy's business. */
			evbuffer_drain(in, used);
			if (fin != 1 || code < 200)
				continue;
			cur = *q;
			ftp_q_pop(st);
			ftp_auth_server_reply(s, st, p, &cur, code);
			ftp_q_flush_local(s, st);
			continue;
		}
		if (q != NULL && q->kind >= FTP_P_GREET) {
			enum px_verdict v;

			/* FTPS towards the server: nothing forwarded; the
			 * greeting waits for the client until it is done. */
			if (q->kind == FTP_P_GREET)
				evbuffer_add(st->tls.greet, buf, used);
			evbuffer_drain(in, used);
			if (fin != 1 || code < 200)
				continue;
			cur = *q;
			ftp_q_pop(st);
			v = ftp_tls_server_reply(s, st, p, &cur, code, in);
			if (v != PX_MORE)
				return v;
			continue;
		}
		if (q != NULL && (q->kind == FTP_P_PASV ||
		    q->kind == FTP_P_PORT)) {
			/* Our PASV/PORT: none of its reply goes to the
			 * client, whatever its lines (a multi-line 227 names
			 * the server's data port on any of them); its final
			 * line decides (ftp_data_reply), answered to the
			 * client already or not. */
			if (q->kind == FTP_P_PASV)
				ftp_data_reply_line(st, fin == 1 ? code :
				    st->rs.code, first, fin == 1,
				    (const char *)buf, linelen);
			if (fin == 1 && code >= 200) {
				cur = *q;
				ftp_q_pop(st);
				ftp_data_reply(s, st, p, &cur, code, buf, used);
			}
			evbuffer_drain(in, used);
			if (fin == 1 && code >= 200)
				ftp_q_flush_local(s, st);
			continue;
		}
		if (st->feat && fin == 1 && code == 211) {
			/* TLS features of the client's side, before the end
			 * line (a one-line reply becomes a list). */
			if (!st->feat_multi && st->tls.use[PX_CHAN_CLIENT] !=
			    PX_TLS_USE_NONE)
				evbuffer_add_printf(out, "211-Features:\r\n");
			ftp_tls_feat(st, out);
		}
		if (!(st->feat && fin == 0 && linelen > 0 && buf[0] == ' ' &&
		    !ftp_feat_keep(s, p, (const char *)buf, linelen)) &&
		    !st->scan_swallow)
			evbuffer_add(out, buf, used);
		evbuffer_drain(in, used);
		/* Preliminary (1xx) replies keep the command pending. */
		if (fin == 1 && code >= 200 && q != NULL) {
			ftp_scan_reply_end(s, st, q, code, out);
			bool login = code == 230 &&
			    (strcmp(q->verb, "USER") == 0 ||
			    strcmp(q->verb, "PASS") == 0 ||
			    strcmp(q->verb, "ACCT") == 0);

			if (login)
				st->logged_in = true;
			ftp_q_pop(st);
			if (login)
				ftp_home_ask(s, st, p);
			ftp_q_flush_local(s, st);
		}
	}
}

enum px_verdict
ftp_from_server(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, struct evbuffer *in)
{
	enum px_verdict v = ftp_server_replies(s, st, p, in);

	/* A check answered while the greeting was still on its way. */
	if (v == PX_MORE)
		v = ftp_auth_step(s, st, p);

	return v == PX_MORE ? ftp_resume(s, st, p) : v;
}

