/* ftp: the FTP control channel, command by command; the analyser itself.
 *
 * Every client line is parsed (ftp_proto.c) and judged by the policy
 * (ftp_policy.c) before anything reaches the server: a denied command is
 * answered by the proxy. Data-channel commands are never forwarded as
 * sent: ftp_data.c sets up both ends and speaks PORT/EPRT/PASV/EPSV to the
 * server itself. Server replies are tracked in a FIFO of what each
 * forwarded command expects, so proxy-made replies keep their place in
 * the stream. Where path rules are, a login is followed by a PWD of the
 * proxy's own (ftp_home_ask): relative paths are judged against the
 * directory the server names, never a guess. The server's replies are
 * read in ftp_reply.c. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "analyser.h"
#include "auth.h"
#include "parse.h"
#include "scan.h"
#include "ftp/ftp_int.h"

/* Replies queued for a client that does not read them: past this, the
 * session ends (each denied command costs the proxy a reply). */
#define FTP_CLIENT_OUT_MAX	(1024 * 1024)

/* Client bytes held while our PORT/EPRT (or, from a transfer command on,
 * our PASV/EPSV: ftp_data_wait) awaits its reply: a client that pipelines
 * has a few commands in flight, never this much. */
#define FTP_HOLD_MAX		(64 * 1024)

static const char *const ftp_counters[] = {
	"commands", "denied_command", "denied_user", "denied_path",
	"bounce_refused", "data_refused", "transfers", "data_failed",
	"bad_line", "too_long", "auth_tls", "tls_required", "data_tls", NULL,
};

/* Commands of RFC 959/2228/2389/2428/3659 and common extensions: a verb
 * outside this list is "unknown" (500), one in it "not allowed" (550 for
 * those taking a path, 500 otherwise). */
static const char *const ftp_known[] = {
	"ABOR", "ACCT", "ALLO", "APPE", "CDUP", "CWD", "DELE", "EPRT", "EPSV",
	"FEAT", "HELP", "LIST", "MDTM", "MKD", "MLSD", "MLST", "MODE", "NLST",
	"NOOP", "OPTS", "PASS", "PASV", "PORT", "PWD", "QUIT", "REIN", "REST",
	"RETR", "RMD", "RNFR", "RNTO", "SITE", "SIZE", "SMNT", "STAT", "STOR",
	"STOU", "STRU", "SYST", "TYPE", "USER", "XCUP", "XCWD", "XMKD", "XPWD",
	"XRMD", "AUTH", "PBSZ", "PROT", "CCC", "ADAT", "MIC", "CONF", "ENC",
	"LANG", "MFMT", NULL,
};

static const char *const ftp_path_cmds[] = {
	"APPE", "CWD", "DELE", "LIST", "MDTM", "MKD", "MLSD", "MLST", "NLST",
	"RETR", "RMD", "RNFR", "RNTO", "SIZE", "STOR", "STOU", "XCWD", "XMKD",
	"XRMD", "MFMT", NULL,
};

static bool
ftp_in(const char *const *list, const char *verb)
{
	size_t i;

	for (i = 0; list[i] != NULL; i++)
		if (strcmp(list[i], verb) == 0)
			return true;
	return false;
}

/* ---- replies and the pending queue -------------------------------------- */

struct ftp_pending *
ftp_q_push(struct ftp_state *st, enum ftp_pkind kind, const char *verb)
{
	struct ftp_pending *q;

	if (st->qlen == FTP_PENDING)
		return NULL;
	q = &st->q[(st->qhead + st->qlen++) % FTP_PENDING];
	memset(q, 0, sizeof(*q));
	q->kind = kind;
	snprintf(q->verb, sizeof(q->verb), "%s", verb);
	return q;
}

struct ftp_pending *
ftp_q_head(struct ftp_state *st)
{
	return st->qlen == 0 ? NULL : &st->q[st->qhead];
}

void
ftp_q_pop(struct ftp_state *st)
{
	if (st->qlen == 0)
		return;
	st->qhead = (st->qhead + 1) % FTP_PENDING;
	st->qlen--;
}

/* Whether nothing more may go to the server before the replies pending
 * come. Our PORT/EPRT: a server may answer PORT only once its data
 * connection is up (pyftpdlib does), after its 150 to a transfer command
 * sent meanwhile, and replies would then be paired with the wrong
 * commands. Where path rules are, a login command and our own PWD after
 * it: a relative path judged meanwhile would be resolved against a
 * directory the proxy does not know yet (ftp_home_ask). Inband
 * authentication's check and server login, and the FTPS setup towards
 * the server forward mode runs before that login: the client's next
 * commands are answered after its PASS. */
bool
ftp_must_wait(const struct ftp_state *st, const struct ftp_policy *p)
{
	const struct ftp_pending *q;
	bool rules = ftp_path_rules(p);
	unsigned i;

	/* The cluster's quota store has a transfer command's answer to give. */
	if (st->qwait.req != NULL)
		return true;
	for (i = 0; i < st->qlen; i++) {
		q = &st->q[(st->qhead + i) % FTP_PENDING];
		if (q->kind == FTP_P_PORT || q->kind == FTP_P_HOME ||
		    q->kind == FTP_P_AUTH || q->kind == FTP_P_SUSER ||
		    q->kind == FTP_P_SPASS || q->kind >= FTP_P_GREET)
			return true;
		if (rules && q->kind == FTP_P_FWD &&
		    (strcmp(q->verb, "USER") == 0 ||
		    strcmp(q->verb, "PASS") == 0 ||
		    strcmp(q->verb, "ACCT") == 0 ||
		    strcmp(q->verb, "REIN") == 0))
			return true;
	}
	return false;
}

/* Keeps in's bytes, in order, for when ftp_must_wait() is over. */
static enum px_verdict
ftp_hold(struct px_session *s, struct ftp_state *st, struct evbuffer *in)
{
	if (in == st->held)
		return PX_MORE;
	if (st->held == NULL && (st->held = evbuffer_new()) == NULL)
		return PX_ERROR;
	if (evbuffer_get_length(st->held) + evbuffer_get_length(in) >
	    FTP_HOLD_MAX) {
		evbuffer_drain(in, evbuffer_get_length(in));
		px_session_deny(s, "ftp: client sent too much while the server "
		    "had not answered");
		return PX_DENY;
	}
	evbuffer_add_buffer(st->held, in);
	return PX_MORE;
}

/* The client's held commands, once nothing stops them. */
enum px_verdict
ftp_resume(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p)
{
	if (st->held == NULL || evbuffer_get_length(st->held) == 0 ||
	    ftp_must_wait(st, p))
		return PX_MORE;
	return ftp_client_input(s, st, p, st->held);
}

void
ftp_send(struct px_session *s, enum px_dir dir, const char *text)
{
	evbuffer_add(px_session_output(s, dir), text, strlen(text));
}

/* Proxy-made replies queued behind the server's are sent once they are at
 * the head. */
void
ftp_q_flush_local(struct px_session *s, struct ftp_state *st)
{
	struct ftp_pending *q;

	while ((q = ftp_q_head(st)) != NULL && q->kind == FTP_P_LOCAL) {
		ftp_send(s, PX_TO_CLIENT, q->text);
		ftp_q_pop(st);
	}
}

/* Whether none of the replies pending is one the client will see: each
 * is our PASV/EPSV or PORT/EPRT the client had its answer to already
 * (ftp_data_reply then sends nothing, whatever the server says). */
static bool
ftp_q_silent(const struct ftp_state *st)
{
	const struct ftp_pending *q;
	unsigned i;

	for (i = 0; i < st->qlen; i++) {
		q = &st->q[(st->qhead + i) % FTP_PENDING];
		if ((q->kind != FTP_P_PASV && q->kind != FTP_P_PORT) ||
		    !q->answered)
			return false;
	}
	return true;
}

/* A reply of the proxy's own: now if no reply the client will see is
 * pending (ftp_q_silent: a server slow to answer our PASV does not hold
 * it back), else in turn. */
int
ftp_reply_local(struct px_session *s, struct ftp_state *st, const char *verb,
    const char *fmt, ...)
{
	struct ftp_pending *q;
	char text[192];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text) - 2, fmt, ap);
	va_end(ap);
	n = strlen(text);
	memcpy(text + n, "\r\n", 3);
	px_session_log(s, LOG_INFO, "ftp-reply code=%.3s cmd=%s by=proxy",
	    text, verb);
	if (ftp_q_silent(st)) {
		ftp_send(s, PX_TO_CLIENT, text);
		return 0;
	}
	if ((q = ftp_q_push(st, FTP_P_LOCAL, verb)) == NULL)
		return -1;
	memcpy(q->text, text, sizeof(q->text));
	return 0;
}


/* ---- client commands -------------------------------------------------- */

void
ftp_log_cmd(struct px_session *s, struct ftp_state *st, const struct ftp_cmd *c,
    const char *verdict)
{
	char arg[132];

	if (!c->has_arg)
		arg[0] = '\0';
	else if (strcmp(c->verb, "PASS") == 0 || strcmp(c->verb, "ACCT") == 0)
		snprintf(arg, sizeof(arg), "****");
	else
		px_log_escape(arg, sizeof(arg), c->arg, c->arglen, true);
	px_session_log(s, LOG_INFO, "ftp-command user=%s cmd=%s arg=\"%s\" %s",
	    st->user[0] ? st->user : "-", c->verb, arg, verdict);
}

/* ---- paths -------------------------------------------------------------- */

/* How a command names a path. */
enum ftp_arg {
	FTP_ARG_NONE = 0,
	FTP_ARG_PATH,		/* the argument; none: the directory */
	FTP_ARG_LIST,		/* LIST NLST MLSD STAT: options or a path */
	FTP_ARG_CWD,		/* CWD XCWD */
	FTP_ARG_CDUP,		/* CDUP XCUP: ".." */
	FTP_ARG_STOU,		/* a name, or one the server makes up */
	FTP_ARG_WORD_PATH,	/* MFMT TIME PATH */
	FTP_ARG_SITE,
};

static enum ftp_arg
ftp_arg_kind(const struct ftp_cmd *c)
{
	static const char *const on_path[] = {
		"RETR", "STOR", "APPE", "DELE", "RNFR", "RNTO", "MKD", "XMKD",
		"RMD", "XRMD", "SIZE", "MDTM", "MLST", NULL,
	};
	static const char *const listing[] = {
		"LIST", "NLST", "MLSD", NULL,
	};

	if (ftp_in(on_path, c->verb))
		return FTP_ARG_PATH;
	if (ftp_in(listing, c->verb) || (strcmp(c->verb, "STAT") == 0 &&
	    c->has_arg && c->arglen > 0))
		return FTP_ARG_LIST;
	if (strcmp(c->verb, "CWD") == 0 || strcmp(c->verb, "XCWD") == 0)
		return FTP_ARG_CWD;
	if (strcmp(c->verb, "CDUP") == 0 || strcmp(c->verb, "XCUP") == 0)
		return FTP_ARG_CDUP;
	if (strcmp(c->verb, "STOU") == 0)
		return FTP_ARG_STOU;
	if (strcmp(c->verb, "MFMT") == 0)
		return FTP_ARG_WORD_PATH;
	if (strcmp(c->verb, "SITE") == 0)
		return FTP_ARG_SITE;
	return FTP_ARG_NONE;
}

/* *arg, *len: past the first word and its space; false if none. */
static bool
ftp_skip_word(const char **arg, size_t *len)
{
	const char *sp = memchr(*arg, ' ', *len);

	if (sp == NULL)
		return false;
	*len -= (size_t)(sp + 1 - *arg);
	*arg = sp + 1;
	return true;
}

/* SITE: CHMOD MODE PATH is judged on PATH; HELP, UMASK and IDLE name no
 * path; any other (ProFTPD's CPFR/CPTO/SYMLINK, ...) may, in a syntax of
 * its own: refused while there are path rules. false: no path to judge. */
static bool
ftp_site_path(const char **arg, size_t *len, enum ftp_path_err *e)
{
	size_t wl = strcspn(*arg, " ");

	if (*len == 0 || (wl == 4 && (strncasecmp(*arg, "HELP", 4) == 0 ||
	    strncasecmp(*arg, "IDLE", 4) == 0)) ||
	    (wl == 5 && strncasecmp(*arg, "UMASK", 5) == 0))
		return false;
	if (wl == 5 && strncasecmp(*arg, "CHMOD", 5) == 0)
		return ftp_skip_word(arg, len) && ftp_skip_word(arg, len);
	*e = FTP_PATH_SITE;
	return true;
}

/* The argument of c as the path it names: *arg, *len adjusted; false
 * when it names none (the server judges the syntax). */
static bool
ftp_path_arg(enum ftp_arg kind, const char **arg,
    size_t *len, enum ftp_path_err *e)
{
	switch (kind) {
	case FTP_ARG_NONE:
		return false;
	case FTP_ARG_LIST:
		/* "-la": options, the directory; "-la dir": servers differ
		 * on what is an option and what a name. "-R" (ProFTPD,
		 * Pure-FTPd, vsftpd's ls_recurse_enable) lists every
		 * directory under it, names the rules never see; so might
		 * a long option. */
		if (*len > 0 && (*arg)[0] == '-') {
			if (memchr(*arg, ' ', *len) != NULL)
				*e = FTP_PATH_OPTIONS;
			else if (memchr(*arg, 'R', *len) != NULL ||
			    (*len > 1 && (*arg)[1] == '-'))
				*e = FTP_PATH_RECURSIVE;
			*len = 0;
		} else if (memchr(*arg, ' ', *len) != NULL)
			/* Pure-FTPd lists each word as a name of its own. */
			*e = FTP_PATH_NAMES;
		return true;
	case FTP_ARG_CWD:
		/* Some servers go home, some stay: not known. */
		if (*len == 0)
			*e = FTP_PATH_NO_ARG;
		return true;
	case FTP_ARG_CDUP:
		*arg = "..";
		*len = 2;
		return true;
	case FTP_ARG_WORD_PATH:
		return ftp_skip_word(arg, len);
	case FTP_ARG_SITE:
		return ftp_site_path(arg, len, e);
	default:
		return true;
	}
}

static int
ftp_path_deny(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_cmd *c, enum ftp_path_err e,
    const char *path)
{
	char verdict[FTP_PATH_MAX * 2 + PX_RULE_REF_MAX + 64];
	char esc[FTP_PATH_MAX * 2], ref[PX_RULE_REF_MAX];

	px_session_count(s, FTP_C_DENIED_PATH, 1);
	if (e != FTP_PATH_OK) {
		/* A path the proxy cannot judge, not one a rule refused. */
		snprintf(verdict, sizeof(verdict), "verdict=deny "
		    "reason=path-unsafe why=%s rule=builtin",
		    ftp_path_err_name(e));
		ftp_log_cmd(s, st, c, verdict);
		return ftp_reply_local(s, st, c->verb, "550 %s: path refused "
		    "by the proxy (%s)", c->verb, ftp_path_err_name(e));
	}
	px_log_escape(esc, sizeof(esc), path, strlen(path), true);
	snprintf(verdict, sizeof(verdict), "verdict=deny reason=path "
	    "path=\"%s\" rule=%s", esc, ftp_path_ref(p, st->path.home, path,
	    px_session_policy_file(s), ref, sizeof(ref)));
	ftp_log_cmd(s, st, c, verdict);
	return ftp_reply_local(s, st, c->verb, "550 %s: permission denied by "
	    "the proxy policy", c->verb);
}

/* The path rules on the canonical path c names: against the directory,
 * and against the target of a CWD in flight as well (whichever its answer
 * makes it, both must be allowed). Without rules, only tracks directory
 * changes. true: refused, *rc for ftp_command. */
static bool
ftp_path_refused(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_cmd *c, int *rc)
{
	struct ftp_path_state *ps = &st->path;
	enum ftp_arg kind = ftp_arg_kind(c);
	enum ftp_path_err e = FTP_PATH_OK;
	const char *arg = c->has_arg ? c->arg : "", *bases[2];
	size_t len = c->has_arg ? c->arglen : 0, nb = 0, i, pl;
	bool rules = ftp_path_rules(p), cwd = kind == FTP_ARG_CWD ||
	    kind == FTP_ARG_CDUP, denied = false;
	char path[FTP_PATH_MAX];

	path[0] = '\0';
	if (!ftp_path_arg(kind, &arg, &len, &e))
		return false;
	if (e == FTP_PATH_OK && cwd && ps->pending && rules)
		e = FTP_PATH_CWD_PENDING;
	if (len > 0 && arg[0] == '/')
		bases[nb++] = "/";
	else if (ps->lost)
		e = e != FTP_PATH_OK ? e : FTP_PATH_CWD_UNKNOWN;
	else {
		bases[nb++] = ps->cwd;
		if (ps->pending)
			bases[nb++] = ps->next;
	}
	for (i = 0; e == FTP_PATH_OK && !denied && i < nb; i++) {
		e = ftp_path_resolve(bases[i], arg, len, rules, path,
		    sizeof(path) - 1);
		/* STOU without a name: one the server picks, in there. */
		if (e == FTP_PATH_OK && kind == FTP_ARG_STOU && len == 0 &&
		    (pl = strlen(path)) > 1)
			memcpy(path + pl, "/", 2);
		if (e == FTP_PATH_OK && rules &&
		    !ftp_path_allowed(p, ps->home, path))
			denied = true;
	}
	if (!rules || (e == FTP_PATH_OK && !denied)) {
		if (cwd)
			ftp_path_cwd_sent(ps, e == FTP_PATH_OK && nb == 1 ?
			    path : NULL);
		return false;
	}
	*rc = ftp_path_deny(s, st, p, c, e, path);
	return true;
}

/* <scan partial="refuse"> (the default): a file is scanned whole or not
 * moved. Pieces would each be scanned alone and pass (STOR one byte,
 * APPE the rest; RETR with REST, twice): APPE of a scanned upload, a
 * REST other than 0 and RANG (a byte range, ProFTPD's) on a scanned
 * service are refused. st: the session whose user <scan user= group=>
 * may leave unscanned; NULL: anyone's (FEAT, which a client may read
 * before it logs in). */
bool
ftp_partial_refuses(const struct px_session *s, const struct ftp_state *st,
    const char *verb)
{
	const struct px_scan_policy *sp = px_session_scan(s);
	struct px_content_who who;
	unsigned dir = PX_SCAN_UPLOAD | PX_SCAN_DOWNLOAD;

	if (strcmp(verb, "APPE") == 0)
		dir = PX_SCAN_UPLOAD;
	else if (strcmp(verb, "REST") != 0 && strcmp(verb, "RANG") != 0)
		return false;
	if (sp->partial_allow)
		return false;
	if (st == NULL)
		return sp->scanner != NULL && (sp->direction & dir) != 0;
	return px_scan_on(sp, dir, px_auth_content_who(ftp_auth_id(st), &who));
}

/* <source-limits transfers=>: a transfer command over its source's rate
 * gets 450 (RFC 959: requested file action not taken, a transient
 * failure the client may try again; not 421, which would end the
 * session) with the rule and the wait, before any quota is charged;
 * the data connection the client opened for it is reset. The core
 * counted and logged it. */
static bool
ftp_xfer_limited(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, int *rc)
{
	char rule[PX_RULE_REF_MAX], verdict[PX_RULE_REF_MAX + 48];
	uint32_t retry;

	if (strcmp(c->verb, "RETR") != 0 && strcmp(c->verb, "STOR") != 0 &&
	    strcmp(c->verb, "APPE") != 0 && strcmp(c->verb, "STOU") != 0)
		return false;
	/* No data can move: the 425 follows, nothing to count. */
	if (st->ch == NULL || st->data_lost)
		return false;
	if (px_session_transfer_allowed(s, ftp_auth_id(st) != NULL ?
	    ftp_auth_id(st)->user : NULL, &retry, rule, sizeof(rule)))
		return false;
	snprintf(verdict, sizeof(verdict), "verdict=deny reason=source-limit "
	    "rule=%s", rule);
	ftp_log_cmd(s, st, c, verdict);
	px_channel_abort(st->ch, PX_CHAN_CLIENT, "denied: source-limits");
	px_channel_abort(st->ch, PX_CHAN_SERVER, "denied: source-limits");
	st->ch = NULL;
	st->xfer[0] = '\0';
	*rc = ftp_reply_local(s, st, c->verb, "450 %s: too many transfers "
	    "%s (source limit: transfers, rule %s), try again in %u s",
	    c->verb, px_session_limit_whose(s, ftp_auth_id(st) != NULL ?
	    ftp_auth_id(st)->user : NULL), rule, (unsigned)retry);
	return true;
}

static bool
ftp_partial_refused(const struct px_session *s, const struct ftp_state *st,
    const struct ftp_cmd *c)
{
	size_t i;

	if (!ftp_partial_refuses(s, st, c->verb))
		return false;
	if (strcmp(c->verb, "REST") != 0)
		return true;
	/* "REST 0" starts over: the whole file moves (RANG always
	 * names a range). */
	for (i = 0; i < c->arglen; i++)
		if (c->arg[i] != '0')
			return true;
	return c->arglen == 0;
}

/* A command the proxy refuses: counted, logged with verdict, answered
 * "500 Unknown command" when the policy refuses a verb it does not know
 * (unknown), "550 VERB: path_why" when it names a path (a client shows
 * that as the file's error), else "code VERB why". */
static int
ftp_deny_command(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, const char *verdict, bool unknown, int code,
    const char *why, const char *path_why)
{
	px_session_count(s, FTP_C_DENIED_COMMAND, 1);
	ftp_log_cmd(s, st, c, verdict);
	if (unknown)
		return ftp_reply_local(s, st, c->verb, "500 Unknown command");
	if (ftp_in(ftp_path_cmds, c->verb))
		return ftp_reply_local(s, st, c->verb, "550 %s: %s", c->verb,
		    path_why);
	return ftp_reply_local(s, st, c->verb, "%d %s %s", code, c->verb, why);
}

/* One client command; in: what follows it. -1: end the session (after
 * what was queued); FTP_RC_DENIED, FTP_RC_ENDED: done already. */
static int
ftp_command(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_cmd *c, struct evbuffer *in)
{
	struct ftp_pending *q;
	char line[FTP_LINE_MAX + 16], ref[PX_RULE_REF_MAX];
	char verdict[PX_RULE_REF_MAX + 64];
	struct ftp_cmd uc;
	bool replay = st->qreplay;
	int n, rc;

	/* A command that waited for the quota store was counted then. */
	if (!replay)
		px_session_count(s, FTP_C_COMMANDS, 1);
	st->qreplay = false;
	/* FTPS is the proxy's own, on each side: not the command rules'. */
	if (ftp_tls_command(s, st, c, in, &rc) || !ftp_tls_allowed(s, st, c,
	    &rc))
		return rc;
	if (!ftp_cmd_allowed(p, c->verb)) {
		snprintf(verdict, sizeof(verdict), "verdict=deny reason=command "
		    "rule=%s", ftp_cmd_ref(p, c->verb, px_session_policy_file(s),
		    ref, sizeof(ref)));
		return ftp_deny_command(s, st, c, verdict,
		    !ftp_in(ftp_known, c->verb), 500,
		    "not allowed by the proxy policy",
		    "permission denied by the proxy policy");
	}
	if (ftp_auth_on(s) && ftp_auth_gate(s, st, c, &rc))
		return rc;
	if (strcmp(c->verb, "USER") == 0 && ftp_auth_on(s) &&
	    px_session_server_later(s)) {
		/* USER name@server: the server kept, the name judged. */
		if (ftp_auth_user_server(s, st, c, &uc, &rc))
			return rc;
		c = &uc;
	}
	if (strcmp(c->verb, "USER") == 0) {
		st->user_ok = false;
		st->user[0] = '\0';
		st->quota = NULL;
		st->qlimit.bytes = st->qlimit.transfers = 0;
		if (c->arglen == 0 || c->arglen > p->max_user) {
			px_session_count(s, FTP_C_DENIED_USER, 1);
			ftp_log_cmd(s, st, c, "verdict=deny reason=user-length "
			    "rule=limits/@max-username");
			return ftp_reply_local(s, st, c->verb, "501 User name "
			    "empty or too long");
		}
		snprintf(st->user, sizeof(st->user), "%.*s", (int)(c->arglen >
		    sizeof(st->user) - 1 ? sizeof(st->user) - 1 : c->arglen),
		    c->arg);
		for (n = 0; st->user[n] != '\0'; n++)
			if (st->user[n] == ' ' || st->user[n] == '"')
				st->user[n] = '_';
		if (!ftp_user_allowed(p, c->arg)) {
			px_session_count(s, FTP_C_DENIED_USER, 1);
			snprintf(verdict, sizeof(verdict), "verdict=deny "
			    "reason=user rule=%s", ftp_user_ref(p, c->arg,
			    px_session_policy_file(s), ref, sizeof(ref)));
			ftp_log_cmd(s, st, c, verdict);
			return ftp_reply_local(s, st, c->verb, "530 User %s not "
			    "allowed by the proxy policy", st->user);
		}
		st->user_ok = true;
		/* Under <auth> the quota waits for the proven name. */
		if (ftp_auth_on(s))
			return ftp_auth_user(s, st, c);
		ftp_quota_user(st, p, c->arg);
	} else if (strcmp(c->verb, "PASS") == 0) {
		if (!st->user_ok) {
			ftp_log_cmd(s, st, c, "verdict=deny reason=no-user "
			    "rule=builtin");
			return ftp_reply_local(s, st, c->verb, "503 Login with "
			    "USER first");
		}
		if (c->arglen > p->max_pass) {
			px_session_count(s, FTP_C_DENIED_USER, 1);
			ftp_log_cmd(s, st, c, "verdict=deny "
			    "reason=password-length rule=limits/@max-password");
			return ftp_reply_local(s, st, c->verb, "501 Password too "
			    "long");
		}
		if (ftp_auth_on(s))
			return ftp_auth_pass(s, st, p, c);
	}
	if (ftp_path_refused(s, st, p, c, &rc))
		return rc;
	/* Its transfer was taken from the source's transfers= then too:
	 * once, not again as it runs with the store's answer. */
	if (!replay && ftp_xfer_limited(s, st, c, &rc))
		return rc;
	if (ftp_quota_refused(s, st, p, c, &rc)) {
		if (rc != FTP_RC_WAIT)
			ftp_log_cmd(s, st, c, "verdict=deny reason=quota");
		return rc;
	}
	if (ftp_partial_refused(s, st, c))
		return ftp_deny_command(s, st, c, "verdict=deny "
		    "reason=scan-partial rule=scan/@partial", false, 502,
		    "refused by the proxy: a scanned file moves whole",
		    "refused by the proxy: a scanned file moves whole");
	ftp_log_cmd(s, st, c, "verdict=accept");
	if (strcmp(c->verb, "PASV") == 0 || strcmp(c->verb, "EPSV") == 0 ||
	    strcmp(c->verb, "PORT") == 0 || strcmp(c->verb, "EPRT") == 0)
		return ftp_data_request(s, st, p, c);
	if (ftp_data_note(s, st, c))
		return ftp_reply_local(s, st, c->verb, "%s", st->data_abort ?
		    "426 Connection closed; transfer aborted" :
		    "425 Cannot open data connection");
	/* A new login: PASV/PORT wait for the server's word again. */
	if (strcmp(c->verb, "USER") == 0 || strcmp(c->verb, "REIN") == 0)
		st->logged_in = false;
	q = ftp_q_push(st, strcmp(c->verb, "FEAT") == 0 ? FTP_P_FEAT :
	    FTP_P_FWD, c->verb);
	if (q == NULL)
		return -1;
	q->scan = st->scan_note;
	st->scan_note = 0;
	if (strcmp(c->verb, "SIZE") == 0)
		ftp_size_sent(st, c);
	else if (strcmp(c->verb, "REST") == 0)
		/* The next transfer moves part of its file: its size is not
		 * the announced one ("REST 0" starts over). */
		st->rest = !(c->arglen == 1 && c->arg[0] == '0');
	/* Rebuilt from what was parsed: Telnet sequences stay behind. */
	n = snprintf(line, sizeof(line), "%s%s%s\r\n", c->verb,
	    c->has_arg ? " " : "", c->arg);
	evbuffer_add(px_session_output(s, PX_TO_SERVER), line, (size_t)n);
	return 0;
}

/* A transfer command (st->cmd, the first `used` bytes of in) waits for
 * the server's reply to our PASV/EPSV (ftp_data_wait), and so does what
 * follows it. RFC 959 lets a client send ABOR or QUIT while its transfer
 * is in progress, and a server slow to answer (or that never does) must
 * not keep them waiting until the data timeout or the session's idle
 * timeout. So when the command right behind it is one of them (and the
 * policy takes it), the wait ends there. The transfer never reached the
 * server: proxyd gives it up itself (its channel goes) and answers it
 * 426, as RFC 959 4.1.3 has a server answer a command an ABOR aborts in
 * progress; then
 *  - ABOR: 226 from proxyd, not forwarded (the server has nothing of the
 *    client's to abort; forwarded, its answer would come behind that to
 *    our PASV, and would have to be kept from the client);
 *  - QUIT: when no reply the client will see is pending (ftp_q_silent:
 *    our PASV answered to it already, the usual case), proxyd answers
 *    221, passes the QUIT on, and finishes the session: the server owes
 *    the client nothing more. Else the QUIT goes on in turn, the server
 *    answering it after the replies it owes (as it would without proxyd).
 * A pipelining client's "RETR f" "QUIT" sent together to a slow server
 * thus loses the transfer: it quit before it began. An ABOR the policy
 * refuses waits its turn, and its refusal with it. true: both commands
 * taken (*rc: ftp_command's results); false: wait (the next command is
 * neither, or not whole yet: parsed again as more comes). */
static bool
ftp_wait_cut(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, struct evbuffer *in, size_t used, int *rc)
{
	struct ftp_cmd next;
	unsigned char *buf;
	size_t len = evbuffer_get_length(in), want, nused;

	if (len <= used)
		return false;
	want = len - used < p->max_line ? len : used + p->max_line;
	if ((buf = evbuffer_pullup(in, (ssize_t)want)) == NULL ||
	    ftp_cmd_parse(buf + used, want - used, p->max_line, &next,
	    &nused) != FTP_OK)
		return false;
	if ((strcmp(next.verb, "ABOR") != 0 && strcmp(next.verb, "QUIT") != 0) ||
	    !ftp_cmd_allowed(p, next.verb))
		return false;
	evbuffer_drain(in, used + nused);
	px_session_log(s, LOG_INFO, "ftp-data %s came before the server's "
	    "reply to our PASV/EPSV: the transfer command behind it is given "
	    "up", next.verb);
	ftp_data_abort(s, st);
	*rc = ftp_command(s, st, p, &st->cmd, in);
	st->data_abort = false;
	if (*rc != 0)
		return true;
	if (strcmp(next.verb, "QUIT") == 0 && !ftp_q_silent(st)) {
		*rc = ftp_command(s, st, p, &next, in);
		return true;
	}
	px_session_count(s, FTP_C_COMMANDS, 1);
	ftp_log_cmd(s, st, &next, "verdict=accept by=proxy (the transfer "
	    "never reached the server)");
	if (strcmp(next.verb, "ABOR") == 0) {
		*rc = ftp_reply_local(s, st, next.verb, "226 Abort successful");
		return true;
	}
	ftp_send(s, PX_TO_SERVER, "QUIT\r\n");
	px_session_log(s, LOG_INFO, "ftp-reply code=221 cmd=QUIT by=proxy");
	ftp_send(s, PX_TO_CLIENT, "221 Goodbye\r\n");
	px_session_finish(s, PX_END_CLIENT, "quit");
	*rc = FTP_RC_DENIED;	/* (finished: the first end counts) */
	return true;
}

enum px_verdict
ftp_client_input(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, struct evbuffer *in)
{
	int crc;

	unsigned char *buf;
	size_t len, used, want;
	enum ftp_rc rc;

	for (;;) {
		len = evbuffer_get_length(in);
		if (len == 0)
			return PX_MORE;
		if (ftp_must_wait(st, p))
			return ftp_hold(s, st, in);
		if (evbuffer_get_length(px_session_output(s, PX_TO_CLIENT)) >
		    FTP_CLIENT_OUT_MAX) {
			evbuffer_drain(in, len);
			px_session_deny(s, "client does not read its replies");
			return PX_DENY;
		}
		want = len < p->max_line ? len : p->max_line;
		if ((buf = evbuffer_pullup(in, (ssize_t)want)) == NULL)
			return PX_ERROR;
		rc = ftp_cmd_parse(buf, want, p->max_line, &st->cmd, &used);
		if (rc == FTP_MORE)
			return PX_MORE;
		if (rc == FTP_TOO_LONG || rc == FTP_BAD) {
			bool long_line = rc == FTP_TOO_LONG;

			px_session_count(s, long_line ? FTP_C_TOO_LONG :
			    FTP_C_BAD_LINE, 1);
			/* Sent at once, even ahead of pending replies: the
			 * session ends with it. */
			px_session_log(s, LOG_WARNING, "ftp-reply code=500 "
			    "cmd=- by=proxy (%s)", long_line ?
			    "line too long" : "malformed line");
			ftp_send(s, PX_TO_CLIENT, long_line ?
			    "500 Command line too long\r\n" :
			    "500 Malformed command line\r\n");
			evbuffer_drain(in, len);
			if (long_line)
				px_session_set_rule(s, "limits/@max-line");
			px_session_deny(s, long_line ? "command line too long" :
			    "malformed command line");
			return PX_DENY;
		}
		/* Left in, parsed again once the reply came (unless an ABOR
		 * or QUIT is right behind it). */
		if (ftp_data_wait(st, st->cmd.verb)) {
			if (!ftp_wait_cut(s, st, p, in, used, &crc))
				return ftp_hold(s, st, in);
		} else {
			evbuffer_drain(in, used);
			crc = ftp_command(s, st, p, &st->cmd, in);
		}
		if (crc == FTP_RC_DENIED)
			return PX_DENY;
		if (crc == FTP_RC_ENDED)
			return PX_ERROR;
		if (crc == FTP_RC_WAIT) {
			/* Back in front of what follows, as parsed, for when
			 * the store answered (ftp_resume). */
			char line[FTP_LINE_MAX + 16];
			int n = snprintf(line, sizeof(line), "%s%s%s\r\n",
			    st->cmd.verb, st->cmd.has_arg ? " " : "",
			    st->cmd.arg);

			if (evbuffer_prepend(in, line, (size_t)n) == -1)
				return PX_ERROR;
			return ftp_hold(s, st, in);
		}
		if (crc == -1) {
			ftp_send(s, PX_TO_CLIENT,
			    "421 Too many commands pending\r\n");
			evbuffer_drain(in, evbuffer_get_length(in));
			px_session_deny(s, "too many commands pending");
			return PX_DENY;
		}
	}
}

/* ---- vtable ----------------------------------------------------------- */

static int
ftp_on_open(struct px_session *s, void *state)
{
	struct ftp_state *st = state;

	ftp_path_reset(&st->path);
	st->size_val = -1;
	if (ftp_tls_open(s, st) == -1)
		return -1;
	/* Forward mode: no server yet, the proxy greets (ftp_auth.c). Its
	 * stand-in never ends: the client's FIN ends the session. */
	if (px_session_server_later(s)) {
		if (px_session_relay(s, PX_RELAY_BUFFERED, false) == -1)
			return -1;
		/* Sent from on_data, where what it queues is counted. */
		if (ftp_auth_greet(s, st, true) == -1)
			return -1;
		px_session_resume(s, PX_TO_CLIENT);
		return 0;
	}
	/* The greeting is the first reply. */
	if (ftp_q_push(st, st->tls.setup ? FTP_P_GREET : FTP_P_FWD,
	    "-") == NULL)
		return -1;
	return px_session_relay(s, PX_RELAY_BUFFERED, true);
}

static enum px_verdict
ftp_on_data_in(struct px_session *s, struct ftp_state *st, enum px_dir dir,
    struct evbuffer *in)
{
	const struct ftp_policy *p = px_session_policy(s);
	enum px_verdict v;

	if ((v = ftp_auth_step(s, st, p)) != PX_MORE)
		return v;
	if (dir == PX_TO_CLIENT)
		(void)ftp_auth_greet(s, st, false);
	if (px_session_input_closed(s, dir) && dir == PX_TO_CLIENT &&
	    (st->scan_held || ftp_scan_reply_held(st))) {
		/* The server closed (after its 221 to a QUIT sent meanwhile)
		 * while a transfer's final reply waits for the verdict: the
		 * replies and the server's end wait with it (the scanner's
		 * timeout bounds that), so the verdict is logged, the reply
		 * (or its replacement) and the 221 reach the client, and the
		 * session ends on the end passed on. */
		st->scan_held = ftp_scan_reply_held(st);
		px_session_hold_end(s, dir, st->scan_held);
		v = ftp_server_replies(s, st, p, in);
		if (v != PX_MORE || st->scan_held)
			return v;
	}
	if (px_session_input_closed(s, dir)) {
		/* An unterminated last line: not a command, not a reply. */
		evbuffer_drain(in, evbuffer_get_length(in));
		return PX_MORE;
	}
	if (dir == PX_TO_SERVER && st->tls.setup)
		return ftp_tls_hold(s, st, in);
	if (dir == PX_TO_SERVER && st->held != NULL &&
	    evbuffer_get_length(st->held) > 0) {
		/* Behind the held ones, in order. */
		v = ftp_hold(s, st, in);
		return v == PX_MORE ? ftp_resume(s, st, p) : v;
	}
	if (dir == PX_TO_SERVER)
		return ftp_client_input(s, st, p, in);
	return ftp_from_server(s, st, p, in);
}

/* (px_session_resume() from a scan's verdict must not run inside it.) */
static enum px_verdict
ftp_on_data(struct px_session *s, void *state, enum px_dir dir,
    struct evbuffer *in)
{
	struct ftp_state *st = state;
	enum px_verdict v;

	st->in_data = true;
	ftp_policy_who(ftp_auth_id(st));
	v = ftp_on_data_in(s, st, dir, in);
	ftp_policy_who(NULL);
	st->in_data = false;
	return v;
}

static void
ftp_on_close(struct px_session *s, void *state)
{
	struct ftp_state *st = state;

	if (st->ch != NULL)
		px_session_count(s, FTP_C_DATA_REFUSED,
		    px_channel_refused(st->ch));
	if (st->lst != NULL)
		px_session_count(s, FTP_C_DATA_REFUSED,
		    px_data_listener_refused(st->lst));
	st->ch = NULL;		/* the core frees it */
	st->lst = NULL;
	if (st->held != NULL)
		evbuffer_free(st->held);
	st->held = NULL;
	ftp_quota_close(s, st);
	ftp_scan_close(st);
	ftp_tls_close(s, st);
	ftp_auth_close(st);
}

/* ---- a rolling upgrade's hand-over (core/handover.h) ------------------- */

/* What of a session between commands the new process needs: the login,
 * the working directory, the last SIZE, a REST waiting for its transfer.
 * Everything else is empty at that point, or made again when needed (our
 * addresses, the quota entry, a passive data port: the next PASV opens
 * one). */
#define FTP_HO_VERSION	1

struct ftp_ho {
	uint32_t		version;
	bool			logged_in, user_ok, rest, xfer_sent, data_lost;
	char			user[72];
	struct px_quota_limit	qlimit;
	struct ftp_path_state	path;
	char			size_path[FTP_PATH_MAX];
	int64_t			size_val;
	unsigned		chan_gen, scan_gen;
};

static ssize_t
ftp_handover_save(struct px_session *s, void *state, void *buf, size_t len)
{
	const struct ftp_state *st = state;
	struct ftp_ho *h = buf;

	(void)s;
	/* Between commands: no reply awaited or under way, no channel, no
	 * scan, nothing held, no TLS (its keys stay in this process). */
	if (len < sizeof(*h) || st->qlen != 0 || st->in_reply ||
	    st->feat || st->ch != NULL || st->scans != NULL ||
	    st->scan_held || st->scan_swallow || st->path.pending ||
	    (st->held != NULL && evbuffer_get_length(st->held) != 0) ||
	    st->tls.use[0] != PX_TLS_USE_NONE ||
	    st->tls.use[1] != PX_TLS_USE_NONE || st->tls.setup ||
	    st->auth != NULL || st->qlogin != NULL)
		return -1;	/* (<auth>: the proven login is not passed) */
	memset(h, 0, sizeof(*h));
	h->version = FTP_HO_VERSION;
	h->logged_in = st->logged_in;
	h->user_ok = st->user_ok;
	h->rest = st->rest;
	h->xfer_sent = st->xfer_sent;
	h->data_lost = st->data_lost;
	memcpy(h->user, st->user, sizeof(h->user));
	h->qlimit = st->qlimit;
	h->path = st->path;
	memcpy(h->size_path, st->size_path, sizeof(h->size_path));
	h->size_val = st->size_val;
	h->chan_gen = st->chan_gen;
	h->scan_gen = st->scan_gen;
	return (ssize_t)sizeof(*h);
}

static int
ftp_handover_load(struct px_session *s, void *state, const void *buf,
    size_t len)
{
	struct ftp_state *st = state;
	const struct ftp_ho *h = buf;

	if (len != sizeof(*h) || h->version != FTP_HO_VERSION ||
	    ftp_tls_open(s, st) == -1)
		return -1;
	/* The service took TLS meanwhile: this plain session is not its. */
	if (st->tls.use[0] != PX_TLS_USE_NONE ||
	    st->tls.use[1] != PX_TLS_USE_NONE)
		return -1;
	st->logged_in = h->logged_in;
	st->user_ok = h->user_ok;
	st->rest = h->rest;
	st->xfer_sent = h->xfer_sent;
	st->data_lost = h->data_lost;
	memcpy(st->user, h->user, sizeof(st->user));
	st->user[sizeof(st->user) - 1] = '\0';
	st->qlimit = h->qlimit;
	st->path = h->path;
	st->path.cwd[sizeof(st->path.cwd) - 1] = '\0';
	st->path.next[sizeof(st->path.next) - 1] = '\0';
	st->path.home[sizeof(st->path.home) - 1] = '\0';
	memcpy(st->size_path, h->size_path, sizeof(st->size_path));
	st->size_path[sizeof(st->size_path) - 1] = '\0';
	st->size_val = h->size_val;
	st->chan_gen = h->chan_gen;
	st->scan_gen = h->scan_gen;
	return px_session_relay(s, PX_RELAY_BUFFERED, true);
}

/* The admin's session list: who, and the transfer under way. */
static void
ftp_describe(const struct px_session *s, const void *arg, char *buf,
    size_t len)
{
	const struct ftp_state *st = arg;

	(void)s;
	if (st->ch != NULL && st->xfer[0] != '\0')
		snprintf(buf, len, "user=%s %s", st->user[0] ? st->user : "-",
		    st->xfer);
	else if (st->ch != NULL)
		snprintf(buf, len, "user=%s data channel open",
		    st->user[0] ? st->user : "-");
	else
		snprintf(buf, len, "user=%s%s", st->user[0] ? st->user : "-",
		    st->user_ok ? "" : " (not logged in)");
}

/* A client <source-limits> refuses at accept: 421 (RFC 959: service not
 * available, closing control connection) instead of the greeting, with
 * the limit that decided. */
static size_t
ftp_limit_refusal(const void *pol, const char *limit, const char *whose,
    const char *rule, uint32_t retry_s, uint64_t id, char *buf, size_t size)
{
	int n;

	(void)pol;
	(void)rule;
	(void)id;
	n = snprintf(buf, size, "421 Too many %s %s (source limit: %s), "
	    "try again in %u s.\r\n", limit, whose, limit, (unsigned)retry_s);
	return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

const struct px_analyser ftp_analyser = {
	.name = "ftp",
	.state_size = sizeof(struct ftp_state),
	.policy_load = ftp_policy_load,
	.policy_free = ftp_policy_free,
	.on_open = ftp_on_open,
	.on_data = ftp_on_data,
	.on_close = ftp_on_close,
	.counters = ftp_counters,
	.starttls = true,
	.forward_mode = true,
	.scan = true,
	.content = true,
	.audit = true,
	.transfers = true,
	.describe = ftp_describe,
	.who = ftp_auth_who,
	.auth = true,
	.auth_password = true,
	.user_limits = true,
	.limit_refusal = ftp_limit_refusal,
	.handover = true,
	.handover_save = ftp_handover_save,
	.handover_load = ftp_handover_load,
	.on_worker_exit = px_qstore_thread_exit,
};
