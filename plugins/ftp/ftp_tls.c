/* ftp: FTPS (RFC 4217), each side on its own. Towards the client proxyd
 * answers AUTH TLS, PBSZ and PROT itself; towards the server it speaks
 * them itself, right after the greeting (which the client sees only once
 * that is done). So the client may use TLS and the server not, or the
 * other way round, or both; the command policy sees the plain commands
 * either way. The TLS itself lives in the core (px_session_starttls,
 * px_channel_tls); a side whose <tls> says implicit="yes" is TLS from the
 * first byte and skips AUTH. In forward mode the server's side is set up
 * once the login named and connected it, before the proxy's login there
 * (ftp_auth.c); the client had the proxy's own greeting. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "analyser.h"
#include "ftp/ftp_int.h"

/* Client bytes held while the server's TLS is set up: a few commands. */
#define FTP_TLS_HOLD_MAX	8192

static const char *
ftp_tls_state_name(const struct ftp_tls *t, enum px_chan_end side)
{
	if (t->use[side] == PX_TLS_USE_NONE)
		return "no";
	if (side == PX_CHAN_SERVER && t->later)
		return "-";
	if (!t->on[side])
		return "plain";
	return t->use[side] == PX_TLS_USE_IMPLICIT ? "implicit" : "explicit";
}

int
ftp_tls_open(struct px_session *s, struct ftp_state *st)
{
	struct ftp_tls *t = &st->tls;
	int i;

	for (i = 0; i < 2; i++) {
		t->use[i] = px_session_tls_use(s, (enum px_chan_end)i);
		t->on[i] = t->use[i] == PX_TLS_USE_IMPLICIT;
	}
	/* Implicit FTPS protects data unless the client says PROT C. */
	t->cprot_p = t->pbsz = t->on[PX_CHAN_CLIENT];
	if (t->use[PX_CHAN_SERVER] != PX_TLS_USE_NONE) {
		/* Forward mode: no server until the login names one
		 * (ftp_tls_server_connected). */
		if (px_session_server_later(s)) {
			t->on[PX_CHAN_SERVER] = false;
			t->later = true;
		} else
			t->setup = true;
		if ((t->hold = evbuffer_new()) == NULL ||
		    (t->greet = evbuffer_new()) == NULL)
			return -1;
	}
	return 0;
}

bool
ftp_tls_server_connected(struct ftp_state *st)
{
	struct ftp_tls *t = &st->tls;

	if (t->use[PX_CHAN_SERVER] == PX_TLS_USE_NONE)
		return false;
	t->on[PX_CHAN_SERVER] = t->use[PX_CHAN_SERVER] == PX_TLS_USE_IMPLICIT;
	t->later = false;
	return true;
}

void
ftp_tls_close(struct px_session *s, struct ftp_state *st)
{
	struct ftp_tls *t = &st->tls;

	if (t->use[0] != PX_TLS_USE_NONE || t->use[1] != PX_TLS_USE_NONE)
		px_session_log(s, LOG_INFO, "ftp-tls control-client=%s "
		    "control-server=%s data=%u data-tls-client=%u "
		    "data-tls-server=%u", ftp_tls_state_name(t, PX_CHAN_CLIENT),
		    ftp_tls_state_name(t, PX_CHAN_SERVER), t->data[0],
		    t->data[1], t->data[2]);
	if (t->hold != NULL)
		evbuffer_free(t->hold);
	if (t->greet != NULL)
		evbuffer_free(t->greet);
	t->hold = t->greet = NULL;
}

static void
ftp_tls_log(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, const char *verdict)
{
	px_session_log(s, LOG_INFO, "ftp-command user=%s cmd=%s arg=\"%.*s\" %s",
	    st->user[0] ? st->user : "-", c->verb,
	    (int)(c->arglen > 16 ? 16 : c->arglen), c->arg, verdict);
}

bool
ftp_tls_command(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, struct evbuffer *in, int *rc)
{
	struct ftp_tls *t = &st->tls;
	bool client_tls = t->use[PX_CHAN_CLIENT] != PX_TLS_USE_NONE;

	if (strcmp(c->verb, "AUTH") == 0) {
		if (!client_tls) {
			ftp_tls_log(s, st, c, "verdict=deny reason=no-tls "
			    "rule=builtin");
			*rc = ftp_reply_local(s, st, c->verb, "502 AUTH not "
			    "available here");
		} else if (t->on[PX_CHAN_CLIENT]) {
			ftp_tls_log(s, st, c, "verdict=deny reason=tls-already "
			    "rule=builtin");
			*rc = ftp_reply_local(s, st, c->verb, "503 Already "
			    "using TLS");
		} else if (strcasecmp(c->arg, "TLS") != 0 &&
		    strcasecmp(c->arg, "TLS-C") != 0 &&
		    strcasecmp(c->arg, "SSL") != 0) {
			ftp_tls_log(s, st, c, "verdict=deny reason=auth-type "
			    "rule=builtin");
			*rc = ftp_reply_local(s, st, c->verb, "504 AUTH type "
			    "not supported (AUTH TLS)");
		} else if (st->qlen != 0) {
			/* The 234 must be the last thing in plain. */
			ftp_tls_log(s, st, c, "verdict=deny reason=pending "
			    "rule=builtin");
			*rc = ftp_reply_local(s, st, c->verb, "503 AUTH with "
			    "replies pending");
		} else if (evbuffer_get_length(in) != 0) {
			/* Plain bytes after AUTH TLS would be taken for
			 * commands sent under TLS (STARTTLS injection). */
			ftp_tls_log(s, st, c, "verdict=deny reason=pipelined "
			    "rule=builtin");
			evbuffer_drain(in, evbuffer_get_length(in));
			ftp_send(s, PX_TO_CLIENT, "421 Commands pipelined after "
			    "AUTH TLS\r\n");
			px_session_deny(s, "ftp: bytes after AUTH TLS in plain");
			*rc = FTP_RC_DENIED;
		} else {
			ftp_tls_log(s, st, c, "verdict=accept");
			*rc = ftp_reply_local(s, st, c->verb, "234 AUTH TLS "
			    "successful");
			if (*rc == 0 && px_session_starttls(s,
			    PX_CHAN_CLIENT) == -1) {
				px_session_end(s, PX_END_PROXY, "error: ftp: "
				    "cannot start TLS with the client");
				*rc = FTP_RC_ENDED;
				return true;
			}
			t->on[PX_CHAN_CLIENT] = true;
			px_session_count(s, FTP_C_AUTH_TLS, 1);
		}
		return true;
	}
	if (strcmp(c->verb, "PBSZ") == 0) {
		if (!t->on[PX_CHAN_CLIENT]) {
			ftp_tls_log(s, st, c, "verdict=deny reason=no-tls "
			    "rule=builtin");
			*rc = ftp_reply_local(s, st, c->verb, "503 PBSZ needs "
			    "AUTH TLS first");
			return true;
		}
		ftp_tls_log(s, st, c, "verdict=accept");
		t->pbsz = true;
		*rc = ftp_reply_local(s, st, c->verb, "200 PBSZ=0");
		return true;
	}
	if (strcmp(c->verb, "PROT") == 0) {
		char level = c->arglen == 1 ? (char)(c->arg[0] & ~0x20) : '?';

		if (!t->on[PX_CHAN_CLIENT] || !t->pbsz) {
			ftp_tls_log(s, st, c, "verdict=deny reason=no-pbsz "
			    "rule=builtin");
			*rc = ftp_reply_local(s, st, c->verb, "503 PROT needs "
			    "AUTH TLS and PBSZ first");
		} else if (level == 'P') {
			ftp_tls_log(s, st, c, "verdict=accept");
			t->cprot_p = true;
			*rc = ftp_reply_local(s, st, c->verb, "200 Protection "
			    "level set to P");
		} else if (level == 'C' && !px_session_tls_optional(s,
		    PX_CHAN_CLIENT)) {
			ftp_tls_log(s, st, c, "verdict=deny reason=tls-required "
			    "rule=tls/@auth");
			*rc = ftp_reply_local(s, st, c->verb, "534 PROT C not "
			    "allowed by the proxy policy");
		} else if (level == 'C') {
			ftp_tls_log(s, st, c, "verdict=accept");
			t->cprot_p = false;
			*rc = ftp_reply_local(s, st, c->verb, "200 Protection "
			    "level set to C");
		} else {
			ftp_tls_log(s, st, c, "verdict=deny reason=prot-level "
			    "rule=builtin");
			*rc = ftp_reply_local(s, st, c->verb, "536 Protection "
			    "level not supported (P or C)");
		}
		return true;
	}
	if (strcmp(c->verb, "CCC") == 0) {
		/* Back to plain would hide the commands that follow from no
		 * one but the policy's auditor: refused. */
		ftp_tls_log(s, st, c, "verdict=deny reason=ccc "
		    "rule=builtin");
		*rc = ftp_reply_local(s, st, c->verb, "534 CCC not allowed by "
		    "the proxy policy");
		return true;
	}
	return false;
}

bool
ftp_tls_allowed(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, int *rc)
{
	static const char *const plain_ok[] = { "FEAT", "SYST", "QUIT",
	    "NOOP", "HELP", NULL };
	struct ftp_tls *t = &st->tls;
	size_t i;

	if (t->use[PX_CHAN_CLIENT] == PX_TLS_USE_NONE || t->on[PX_CHAN_CLIENT] ||
	    px_session_tls_optional(s, PX_CHAN_CLIENT))
		return true;
	for (i = 0; plain_ok[i] != NULL; i++)
		if (strcmp(plain_ok[i], c->verb) == 0)
			return true;
	px_session_count(s, FTP_C_TLS_REQUIRED, 1);
	px_session_log(s, LOG_NOTICE, "ftp-command user=%s cmd=%s "
	    "verdict=deny reason=tls-required rule=tls/@auth (the client "
	    "must send AUTH TLS first)", st->user[0] ? st->user : "-", c->verb);
	*rc = ftp_reply_local(s, st, c->verb, strcmp(c->verb, "USER") == 0 ?
	    "530 TLS required: send AUTH TLS before USER" :
	    "530 Please log in over TLS (AUTH TLS) first");
	return false;
}

bool
ftp_tls_data_allowed(struct px_session *s, struct ftp_state *st,
    const char *verb, int *rc)
{
	struct ftp_tls *t = &st->tls;

	if (t->use[PX_CHAN_CLIENT] == PX_TLS_USE_NONE || t->cprot_p ||
	    px_session_tls_optional(s, PX_CHAN_CLIENT))
		return true;
	px_session_count(s, FTP_C_TLS_REQUIRED, 1);
	px_session_log(s, LOG_NOTICE, "ftp-command user=%s cmd=%s "
	    "verdict=deny reason=tls-required rule=tls/@auth (data needs "
	    "PROT P)",
	    st->user[0] ? st->user : "-", verb);
	*rc = ftp_reply_local(s, st, verb, "521 Data connections must be "
	    "protected: send PROT P first");
	return false;
}

int
ftp_tls_data(struct px_session *s, struct ftp_state *st, struct px_channel *ch)
{
	struct ftp_tls *t = &st->tls;
	bool c = t->on[PX_CHAN_CLIENT] && t->cprot_p;
	bool v = t->on[PX_CHAN_SERVER] && t->sprot_p;

	t->data[0]++;
	if (c) {
		if (px_channel_tls(s, ch, PX_CHAN_CLIENT) == -1)
			return -1;
		t->data[1]++;
	}
	if (v) {
		if (px_channel_tls(s, ch, PX_CHAN_SERVER) == -1)
			return -1;
		t->data[2]++;
	}
	if (c || v)
		px_session_count(s, FTP_C_DATA_TLS, 1);
	return 0;
}

/* Setup towards the server is over (code: the greeting's, 220 once it
 * took TLS): the client sees the greeting, and what it sent meanwhile is
 * taken now. Forward mode: the client had the proxy's greeting and waits
 * for its PASS's reply; the server's is swallowed, the proven user's
 * login goes on (ftp_auth_server_greeted). */
static enum px_verdict
ftp_tls_release(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, int code)
{
	struct ftp_tls *t = &st->tls;

	t->setup = false;
	if (px_session_server_later(s)) {
		evbuffer_drain(t->greet, evbuffer_get_length(t->greet));
		ftp_auth_server_greeted(s, st, p, code);
		ftp_q_flush_local(s, st);
		return PX_MORE;
	}
	evbuffer_add_buffer(px_session_output(s, PX_TO_CLIENT), t->greet);
	if (evbuffer_get_length(t->hold) == 0)
		return PX_MORE;
	return ftp_client_input(s, st, p, t->hold);
}

/* The server's setup failed: the client gets a 421, as from a server
 * that is not available. */
static enum px_verdict
ftp_tls_server_fail(struct px_session *s, struct ftp_state *st,
    const char *why)
{
	px_session_log(s, LOG_WARNING, "ftp-tls side=server %s", why);
	ftp_send(s, PX_TO_CLIENT, "421 Service not available: no TLS with "
	    "the server\r\n");
	evbuffer_drain(st->tls.hold, evbuffer_get_length(st->tls.hold));
	px_session_deny(s, "ftp: no TLS with the server");
	return PX_DENY;
}

enum px_verdict
ftp_tls_server_reply(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_pending *q, int code,
    struct evbuffer *in)
{
	struct ftp_tls *t = &st->tls;
	char why[96];

	switch (q->kind) {
	case FTP_P_GREET:
		if (code != 220)
			return ftp_tls_release(s, st, p, code);
		if (t->use[PX_CHAN_SERVER] == PX_TLS_USE_EXPLICIT) {
			if (ftp_q_push(st, FTP_P_SAUTH, "AUTH") == NULL)
				return PX_ERROR;
			ftp_send(s, PX_TO_SERVER, "AUTH TLS\r\n");
			return PX_MORE;
		}
		break;	/* implicit: PBSZ and PROT */
	case FTP_P_SAUTH:
		if (code != 234) {
			if (!px_session_tls_optional(s, PX_CHAN_SERVER)) {
				snprintf(why, sizeof(why), "refused AUTH TLS "
				    "(%d)", code);
				return ftp_tls_server_fail(s, st, why);
			}
			px_session_log(s, LOG_NOTICE, "ftp-tls side=server "
			    "refused AUTH TLS (%d): plain (auth=\"optional\")",
			    code);
			return ftp_tls_release(s, st, p, 220);
		}
		if (evbuffer_get_length(in) != 0)
			return ftp_tls_server_fail(s, st, "sent bytes after "
			    "234 in plain");
		if (px_session_starttls(s, PX_CHAN_SERVER) == -1) {
			px_session_end(s, PX_END_PROXY, "error: ftp: cannot "
			    "start TLS with the server");
			return PX_ERROR;
		}
		t->on[PX_CHAN_SERVER] = true;
		break;
	case FTP_P_SPBSZ:
		return PX_MORE;
	case FTP_P_SPROT:
		t->sprot_p = code / 100 == 2;
		if (!t->sprot_p)
			px_session_log(s, LOG_NOTICE, "ftp-tls side=server "
			    "refused PROT P (%d): data in plain towards it",
			    code);
		return ftp_tls_release(s, st, p, 220);
	default:
		return PX_MORE;
	}
	if (ftp_q_push(st, FTP_P_SPBSZ, "PBSZ") == NULL ||
	    ftp_q_push(st, FTP_P_SPROT, "PROT") == NULL)
		return PX_ERROR;
	ftp_send(s, PX_TO_SERVER, "PBSZ 0\r\nPROT P\r\n");
	return PX_MORE;
}

void
ftp_tls_feat(struct ftp_state *st, struct evbuffer *out)
{
	switch (st->tls.use[PX_CHAN_CLIENT]) {
	case PX_TLS_USE_EXPLICIT:
		evbuffer_add_printf(out, " AUTH TLS\r\n PBSZ\r\n PROT\r\n");
		break;
	case PX_TLS_USE_IMPLICIT:
		evbuffer_add_printf(out, " PBSZ\r\n PROT\r\n");
		break;
	default:
		break;
	}
}

enum px_verdict
ftp_tls_hold(struct px_session *s, struct ftp_state *st, struct evbuffer *in)
{
	if (evbuffer_get_length(st->tls.hold) + evbuffer_get_length(in) >
	    FTP_TLS_HOLD_MAX) {
		evbuffer_drain(in, evbuffer_get_length(in));
		px_session_deny(s, "ftp: client sent too much before the "
		    "greeting");
		return PX_DENY;
	}
	evbuffer_add_buffer(st->tls.hold, in);
	return PX_MORE;
}
