/* ftp: the FTP control channel, command by command, and its data channels.
 *
 * Every client line is parsed (ftp_proto.c) and judged by the policy before
 * anything reaches the server: a denied command is answered by the proxy.
 * Data-channel commands are never forwarded as sent: the proxy sets up both
 * ends itself (core channels, channel.c), each side in the mode the policy
 * asks for, and rewrites PORT/EPRT/PASV/EPSV and their replies with its own
 * addresses. Server replies are tracked in a FIFO of what each forwarded
 * command expects, so proxy-made replies keep their place in the stream. */
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include <event2/buffer.h>
#include <libxml/tree.h>

#include "analyser.h"
#include "config.h"
#include "parse.h"
#include "ftp/ftp_proto.h"

enum ftp_mode {
	FTP_KEEP = 0,
	FTP_ACTIVE,
	FTP_PASSIVE,
};

static const char *const ftp_mode_names[] = { "keep", "active", "passive" };

struct ftp_rule {
	char	*name;		/* verb, user name or path pattern */
	bool	 accept;
};

struct ftp_policy {
	enum ftp_mode	 client_data, server_data;
	uint16_t	 port_lo, port_hi;	/* 0, 0: any */
	bool		 strict;
	uint64_t	 max_line, max_user, max_pass;
	uint64_t	 timeout_ms;
	struct ftp_rule	*cmds;
	size_t		 ncmds;
	int		 cmd_default;		/* "*": 1 accept, 0 deny */
	struct ftp_rule	*users;
	size_t		 nusers;
	struct ftp_rule	*paths;
	size_t		 npaths;
};

/* Counter indexes, in ftp_counters[] order. */
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

static const char *const ftp_counters[] = {
	"commands", "denied_command", "denied_user", "denied_path",
	"bounce_refused", "data_refused", "transfers", "data_failed",
	"bad_line", "too_long", NULL,
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
/* Replies queued for a client that does not read them: past this, the
 * session ends (each denied command costs the proxy a reply). */
#define FTP_CLIENT_OUT_MAX	(1024 * 1024)

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

/* ---- policy ----------------------------------------------------------- */

static int
ftp_attr_mode(const xmlNode *n, const char *name, enum ftp_mode *out,
    struct px_cfgerr *e)
{
	char *v = px_attr(n, name);
	int i, rc = -1;

	if (v == NULL)
		return 0;
	for (i = 0; i < 3; i++)
		if (strcmp(v, ftp_mode_names[i]) == 0) {
			*out = (enum ftp_mode)i;
			rc = 0;
		}
	if (rc == -1)
		px_cfg_error(e, n, "%s=\"%s\": expected keep, active or passive",
		    name, v);
	xmlFree(v);
	return rc;
}

static int
ftp_attr_ports(const xmlNode *n, struct ftp_policy *p, struct px_cfgerr *e)
{
	char *v = px_attr(n, "data-ports"), *dash;
	uint64_t lo, hi;
	const char *why = "expected LOW-HIGH, 1024..65535";
	int rc = -1;

	if (v == NULL)
		return 0;
	if ((dash = strchr(v, '-')) != NULL) {
		*dash = '\0';
		if (px_parse_uint(v, 1024, 65535, &lo, &why) == 0 &&
		    px_parse_uint(dash + 1, 1024, 65535, &hi, &why) == 0) {
			if (lo <= hi) {
				p->port_lo = (uint16_t)lo;
				p->port_hi = (uint16_t)hi;
				rc = 0;
			} else
				why = "the low port is above the high one";
		}
		*dash = '-';
	}
	if (rc == -1)
		px_cfg_error(e, n, "data-ports=\"%s\": %s (expected LOW-HIGH "
		    "within 1024..65535)", v, why);
	xmlFree(v);
	return rc;
}

static int
ftp_attr_action(const xmlNode *n, bool *accept, struct px_cfgerr *e)
{
	char *v = px_attr(n, "action");
	int rc = 0;

	if (v == NULL) {
		px_cfg_error(e, n, "<%s> needs action=\"accept\" or \"deny\"",
		    (const char *)n->name);
		return -1;
	}
	if (strcmp(v, "accept") == 0)
		*accept = true;
	else if (strcmp(v, "deny") == 0)
		*accept = false;
	else {
		px_cfg_error(e, n, "action=\"%s\": expected accept or deny", v);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

static int
ftp_rule_add(struct ftp_rule **list, size_t *n, const char *name,
    size_t len, bool accept)
{
	struct ftp_rule *r;

	if ((r = realloc(*list, (*n + 1) * sizeof(**list))) == NULL)
		return -1;
	*list = r;
	if ((r[*n].name = strndup(name, len)) == NULL)
		return -1;
	r[*n].accept = accept;
	(*n)++;
	return 0;
}

static bool
ftp_verb_ok(const char *v, size_t len)
{
	size_t i;

	if (len == 0 || len > FTP_VERB_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (!((v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z')))
			return false;
	return true;
}

/* <command name="USER PASS ..." action=.../>: space-separated verbs. */
static int
ftp_load_command(const xmlNode *n, struct ftp_policy *p, struct px_cfgerr *e)
{
	char *v = px_attr(n, "name"), *w;
	bool accept;
	size_t len, i, k;
	int rc = 0, added = 0;

	if (ftp_attr_action(n, &accept, e) == -1) {
		xmlFree(v);
		return -1;
	}
	for (w = v; rc == 0 && w != NULL && *w != '\0'; w += len) {
		while (*w == ' ' || *w == '\t' || *w == '\n')
			w++;
		len = strcspn(w, " \t\n");
		if (len == 0)
			break;
		if (len == 1 && *w == '*') {
			if (p->cmd_default != -1) {
				px_cfg_error(e, n, "command \"*\" given twice");
				rc = -1;
			}
			p->cmd_default = accept;
			added++;
			continue;
		}
		if (!ftp_verb_ok(w, len)) {
			px_cfg_error(e, n, "command \"%.*s\": expected 1 to %d "
			    "letters or *", (int)len, w, FTP_VERB_MAX);
			rc = -1;
			break;
		}
		for (i = 0; i < len; i++)
			w[i] = (char)(w[i] & ~0x20);
		for (k = 0; k < p->ncmds; k++)
			if (strlen(p->cmds[k].name) == len &&
			    memcmp(p->cmds[k].name, w, len) == 0) {
				px_cfg_error(e, n, "command %.*s has a rule "
				    "already", (int)len, w);
				rc = -1;
			}
		if (rc == 0 && ftp_rule_add(&p->cmds, &p->ncmds, w, len,
		    accept) == -1) {
			px_cfg_error(e, n, "out of memory");
			rc = -1;
		}
		added++;
	}
	if (rc == 0 && added == 0) {
		px_cfg_error(e, n, "<command> needs name=\"VERB ...\"");
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

/* <user name="a b"/> (space-separated, shell patterns) and <path
 * pattern="*.exe"/> (one shell pattern). */
static int
ftp_load_names(const xmlNode *n, const char *attr, bool split,
    struct ftp_rule **list, size_t *cnt, struct px_cfgerr *e)
{
	char *v = px_attr(n, attr), *w;
	bool accept;
	size_t len;
	int rc = 0, added = 0;

	if (v == NULL || v[0] == '\0') {
		px_cfg_error(e, n, "<%s> needs a non-empty %s", (const char *)n->name,
		    attr);
		xmlFree(v);
		return -1;
	}
	if (ftp_attr_action(n, &accept, e) == -1) {
		xmlFree(v);
		return -1;
	}
	for (w = v; *w != '\0'; w += len) {
		if (split)
			while (*w == ' ' || *w == '\t' || *w == '\n')
				w++;
		len = split ? strcspn(w, " \t\n") : strlen(w);
		if (len == 0)
			break;
		if (len > 255) {
			px_cfg_error(e, n, "%s: longer than 255 bytes", attr);
			rc = -1;
			break;
		}
		if (ftp_rule_add(list, cnt, w, len, accept) == -1) {
			px_cfg_error(e, n, "out of memory");
			rc = -1;
			break;
		}
		added++;
	}
	if (rc == 0 && added == 0) {
		px_cfg_error(e, n, "<%s> needs a non-empty %s", (const char *)n->name,
		    attr);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

static void
ftp_rules_free(struct ftp_rule *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(r[i].name);
	free(r);
}

static void
ftp_policy_free(void *pol)
{
	struct ftp_policy *p = pol;

	if (p == NULL)
		return;
	ftp_rules_free(p->cmds, p->ncmds);
	ftp_rules_free(p->users, p->nusers);
	ftp_rules_free(p->paths, p->npaths);
	free(p);
}

static int
ftp_load_limits(const xmlNode *n, struct ftp_policy *p, struct px_cfgerr *e)
{
	int rc = 0;

	if (px_attr_uint(e, n, "max-line", 64, FTP_LINE_MAX, &p->max_line) == -1 ||
	    px_attr_uint(e, n, "max-username", 1, 255, &p->max_user) == -1 ||
	    px_attr_uint(e, n, "max-password", 1, 1024, &p->max_pass) == -1 ||
	    px_attr_duration(e, n, "timeout", false, 100, 3600 * 1000,
	    &p->timeout_ms) == -1)
		rc = -1;
	return rc;
}

static int
ftp_policy_load(const xmlNode *sec, void **pol, struct px_cfgerr *e)
{
	struct ftp_policy *p;
	const xmlNode *n;
	int rc = 0, nlimits = 0;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		px_cfg_error(e, sec, "out of memory");
		return -1;
	}
	p->client_data = FTP_KEEP;
	p->server_data = FTP_KEEP;
	p->strict = true;
	p->max_line = 512;
	p->max_user = 64;
	p->max_pass = 128;
	p->timeout_ms = 30000;
	p->cmd_default = -1;
	if (sec == NULL)
		goto done;
	if (ftp_attr_mode(sec, "client-data", &p->client_data, e) == -1 ||
	    ftp_attr_mode(sec, "server-data", &p->server_data, e) == -1 ||
	    ftp_attr_ports(sec, p, e) == -1)
		rc = -1;
	if (px_attr_bool(e, sec, "strict-port-check", &p->strict) == -1)
		rc = -1;
	for (n = sec->children; n != NULL; n = n->next) {
		const char *name = (const char *)n->name;

		if (n->type != XML_ELEMENT_NODE)
			continue;
		if (strcmp(name, "limits") == 0) {
			if (nlimits++ > 0) {
				px_cfg_error(e, n, "<limits> given twice");
				rc = -1;
			} else if (ftp_load_limits(n, p, e) == -1)
				rc = -1;
		} else if (strcmp(name, "command") == 0) {
			if (ftp_load_command(n, p, e) == -1)
				rc = -1;
		} else if (strcmp(name, "user") == 0) {
			if (ftp_load_names(n, "name", true, &p->users,
			    &p->nusers, e) == -1)
				rc = -1;
		} else if (strcmp(name, "path") == 0) {
			if (ftp_load_names(n, "pattern", false, &p->paths,
			    &p->npaths, e) == -1)
				rc = -1;
		} else {
			px_cfg_error(e, n, "<%s>: unknown in <ftp>", name);
			rc = -1;
		}
	}
done:
	if (rc == -1) {
		ftp_policy_free(p);
		return -1;
	}
	*pol = p;
	return 0;
}

/* ---- policy decisions ------------------------------------------------- */

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

static bool
ftp_cmd_allowed(const struct ftp_policy *p, const char *verb)
{
	size_t i;

	/* TLS on the control channel would hide it from the proxy. */
	if (strcmp(verb, "AUTH") == 0 || strcmp(verb, "PBSZ") == 0 ||
	    strcmp(verb, "PROT") == 0 || strcmp(verb, "CCC") == 0 ||
	    strcmp(verb, "ADAT") == 0)
		return false;
	for (i = 0; i < p->ncmds; i++)
		if (strcmp(p->cmds[i].name, verb) == 0)
			return p->cmds[i].accept;
	return p->cmd_default == 1;
}

/* First matching rule wins; no rule: accepted when there are none. */
static bool
ftp_match(const struct ftp_rule *r, size_t n, const char *s, bool dflt)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (fnmatch(r[i].name, s, 0) == 0)
			return r[i].accept;
	return dflt;
}

/* ---- replies and the pending queue -------------------------------------- */

static struct ftp_pending *
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

static struct ftp_pending *
ftp_q_head(struct ftp_state *st)
{
	return st->qlen == 0 ? NULL : &st->q[st->qhead];
}

static void
ftp_q_pop(struct ftp_state *st)
{
	if (st->qlen == 0)
		return;
	st->qhead = (st->qhead + 1) % FTP_PENDING;
	st->qlen--;
}

static void
ftp_send(struct px_session *s, enum px_dir dir, const char *text)
{
	evbuffer_add(px_session_output(s, dir), text, strlen(text));
}

/* Proxy-made replies queued behind the server's are sent once they are at
 * the head. */
static void
ftp_q_flush_local(struct px_session *s, struct ftp_state *st)
{
	struct ftp_pending *q;

	while ((q = ftp_q_head(st)) != NULL && q->kind == FTP_P_LOCAL) {
		ftp_send(s, PX_TO_CLIENT, q->text);
		ftp_q_pop(st);
	}
}

/* A reply of the proxy's own: now if nothing is pending, else in turn. */
static int
ftp_reply_local(struct px_session *s, struct ftp_state *st, const char *verb,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int
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
	if (st->qlen == 0) {
		ftp_send(s, PX_TO_CLIENT, text);
		return 0;
	}
	if ((q = ftp_q_push(st, FTP_P_LOCAL, verb)) == NULL)
		return -1;
	memcpy(q->text, text, sizeof(q->text));
	return 0;
}

/* ---- data channels ---------------------------------------------------- */

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
		px_channel_free(st->ch);
	}
	st->ch = NULL;
}

static void
ftp_chan_done(struct px_session *s, void *arg, const struct px_chan_result *r)
{
	struct ftp_state *st = arg;
	char client[PX_ADDRSTRLEN], server[PX_ADDRSTRLEN];

	if (st->ch == r->ch)
		st->ch = NULL;
	px_session_log(s, LOG_INFO, "data-transfer %s bytes=%llu to-server=%llu "
	    "to-client=%llu duration=%llu.%03llu client=%s server=%s "
	    "refused=%u end=%s", r->note[0] != '\0' ? r->note :
	    "- cmd=- file=\"\"",
	    (unsigned long long)(r->bytes[0] + r->bytes[1]),
	    (unsigned long long)r->bytes[0], (unsigned long long)r->bytes[1],
	    (unsigned long long)(r->duration_ms / 1000),
	    (unsigned long long)(r->duration_ms % 1000),
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
static int
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
	bool cpassive;

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
	if (px_session_local(s, PX_CHAN_CLIENT, &clocal) == -1 ||
	    px_session_local(s, PX_CHAN_SERVER, &slocal) == -1)
		return ftp_reply_local(s, st, c->verb, "425 Cannot open data "
		    "connection");
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
		/* FTP bounce: a data connection to anyone but the client. */
		if (p->strict && (!px_sockaddr_same_host(
		    (struct sockaddr *)&caddr, client) ||
		    px_sockaddr_port((struct sockaddr *)&caddr) < 1024)) {
			px_session_count(s, FTP_C_BOUNCE, 1);
			px_session_log(s, LOG_WARNING, "ftp-bounce refused: %s "
			    "%.*s is not the client's host or uses a port "
			    "below 1024", c->verb, (int)(c->arglen > 64 ? 64 :
			    c->arglen), c->arg);
			return ftp_reply_local(s, st, c->verb, "500 Illegal %s "
			    "command", c->verb);
		}
	}
	ftp_chan_drop(s, st);
	if ((st->ch = px_channel_new(s, p->timeout_ms, ftp_chan_done,
	    st)) == NULL)
		return ftp_reply_local(s, st, c->verb, "425 Cannot open data "
		    "connection");
	/* The client's end. */
	if (cpassive) {
		if (px_channel_listen(st->ch, PX_CHAN_CLIENT,
		    (struct sockaddr *)&clocal, p->port_lo, p->port_hi,
		    p->strict ? client : NULL, &st->cbound) == -1) {
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
	px_session_log(s, LOG_INFO, "ftp-data client=%s server=%s sent=\"%.*s\"",
	    cpassive ? "passive" : "active",
	    smode == FTP_PASSIVE ? "passive" : "active",
	    (int)strlen(buf) - 2, buf);
	ftp_send(s, PX_TO_SERVER, buf);
	return 0;
}

/* The final reply to our PASV/EPSV or PORT/EPRT. */
static void
ftp_data_reply(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_pending *q, int code,
    const char *line, size_t len, const unsigned char *raw, size_t rawlen)
{
	struct sockaddr_storage sa;
	uint16_t port;
	bool ok;

	if (q->kind == FTP_P_PORT) {
		if (code / 100 == 2 && st->ch != NULL) {
			ftp_client_answer(s, st, q->creq, q->verb);
			return;
		}
		goto fail;
	}
	memcpy(&sa, px_session_server(s), px_sockaddr_len(px_session_server(s)));
	if (code == 227) {
		struct sockaddr_storage a;

		ok = ftp_parse_227(line + 3, len - 3, &a) == 0;
		/* With the strict check only the server's own host, whatever
		 * the reply says: no bounce through the server either. */
		if (ok && !p->strict)
			memcpy(&sa, &a, sizeof(a));
		else if (ok)
			px_sockaddr_set_port(&sa, px_sockaddr_port((struct sockaddr *)&a));
	} else if (code == 229) {
		ok = ftp_parse_229(line + 3, len - 3, &port) == 0;
		if (ok)
			px_sockaddr_set_port(&sa, port);
	} else
		ok = false;
	if (ok && st->ch != NULL) {
		struct sockaddr_storage slocal;

		if (px_session_local(s, PX_CHAN_SERVER, &slocal) == 0 &&
		    px_channel_connect(st->ch, PX_CHAN_SERVER,
		    (struct sockaddr *)&sa, (struct sockaddr *)&slocal) == 0) {
			ftp_client_answer(s, st, q->creq, q->verb);
			return;
		}
	}
fail:
	ftp_chan_drop(s, st);
	if (code / 100 == 4 || code / 100 == 5) {
		/* The server's own refusal means as much to the client. */
		evbuffer_add(px_session_output(s, PX_TO_CLIENT), raw, rawlen);
		return;
	}
	px_session_log(s, LOG_INFO, "ftp-reply code=425 cmd=%s by=proxy",
	    q->verb);
	ftp_send(s, PX_TO_CLIENT, "425 Cannot open data connection\r\n");
}

/* ---- client commands -------------------------------------------------- */

static void
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

/* One client command. -1: end the session (after what was queued). */
static int
ftp_command(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_cmd *c)
{
	const char *kind;
	struct ftp_pending *q;
	bool path_cmd = ftp_in(ftp_path_cmds, c->verb);
	char line[FTP_LINE_MAX + 16];
	int n;

	px_session_count(s, FTP_C_COMMANDS, 1);
	if (!ftp_cmd_allowed(p, c->verb)) {
		px_session_count(s, FTP_C_DENIED_COMMAND, 1);
		ftp_log_cmd(s, st, c, "verdict=deny reason=command");
		if (!ftp_in(ftp_known, c->verb))
			return ftp_reply_local(s, st, c->verb, "500 Unknown "
			    "command");
		if (path_cmd)
			return ftp_reply_local(s, st, c->verb, "550 %s: "
			    "permission denied by the proxy policy", c->verb);
		return ftp_reply_local(s, st, c->verb, "500 %s not allowed by "
		    "the proxy policy", c->verb);
	}
	if (strcmp(c->verb, "USER") == 0) {
		st->user_ok = false;
		st->user[0] = '\0';
		if (c->arglen == 0 || c->arglen > p->max_user) {
			px_session_count(s, FTP_C_DENIED_USER, 1);
			ftp_log_cmd(s, st, c, "verdict=deny reason=user-length");
			return ftp_reply_local(s, st, c->verb, "501 User name "
			    "empty or too long");
		}
		snprintf(st->user, sizeof(st->user), "%.*s", (int)(c->arglen >
		    sizeof(st->user) - 1 ? sizeof(st->user) - 1 : c->arglen),
		    c->arg);
		for (n = 0; st->user[n] != '\0'; n++)
			if (st->user[n] == ' ' || st->user[n] == '"')
				st->user[n] = '_';
		if (!ftp_match(p->users, p->nusers, c->arg, p->nusers == 0)) {
			px_session_count(s, FTP_C_DENIED_USER, 1);
			ftp_log_cmd(s, st, c, "verdict=deny reason=user");
			return ftp_reply_local(s, st, c->verb, "530 User %s not "
			    "allowed by the proxy policy", st->user);
		}
		st->user_ok = true;
	} else if (strcmp(c->verb, "PASS") == 0) {
		if (!st->user_ok) {
			ftp_log_cmd(s, st, c, "verdict=deny reason=no-user");
			return ftp_reply_local(s, st, c->verb, "503 Login with "
			    "USER first");
		}
		if (c->arglen > p->max_pass) {
			px_session_count(s, FTP_C_DENIED_USER, 1);
			ftp_log_cmd(s, st, c, "verdict=deny reason=password-length");
			return ftp_reply_local(s, st, c->verb, "501 Password too "
			    "long");
		}
	}
	if (path_cmd && c->has_arg && c->arglen > 0 &&
	    !ftp_match(p->paths, p->npaths, c->arg, true)) {
		px_session_count(s, FTP_C_DENIED_PATH, 1);
		ftp_log_cmd(s, st, c, "verdict=deny reason=path");
		return ftp_reply_local(s, st, c->verb, "550 %s: permission "
		    "denied by the proxy policy", c->verb);
	}
	ftp_log_cmd(s, st, c, "verdict=accept");
	if (strcmp(c->verb, "PASV") == 0 || strcmp(c->verb, "EPSV") == 0 ||
	    strcmp(c->verb, "PORT") == 0 || strcmp(c->verb, "EPRT") == 0)
		return ftp_data_request(s, st, p, c);
	if ((kind = ftp_transfer_kind(c->verb)) != NULL && st->ch != NULL) {
		char note[256], file[200];

		px_log_escape(file, sizeof(file), c->arg, c->arglen, true);
		snprintf(note, sizeof(note), "%s cmd=%s file=\"%s\"", kind,
		    c->verb, file);
		px_channel_note(st->ch, note);
	}
	q = ftp_q_push(st, strcmp(c->verb, "FEAT") == 0 ? FTP_P_FEAT :
	    FTP_P_FWD, c->verb);
	if (q == NULL)
		return -1;
	/* Rebuilt from what was parsed: Telnet sequences stay behind. */
	n = snprintf(line, sizeof(line), "%s%s%s\r\n", c->verb,
	    c->has_arg ? " " : "", c->arg);
	evbuffer_add(px_session_output(s, PX_TO_SERVER), line, (size_t)n);
	return 0;
}

static enum px_verdict
ftp_from_client(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, struct evbuffer *in)
{
	unsigned char *buf;
	size_t len, used, want;
	enum ftp_rc rc;

	for (;;) {
		len = evbuffer_get_length(in);
		if (len == 0)
			return PX_MORE;
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
			px_session_deny(s, long_line ? "command line too long" :
			    "malformed command line");
			return PX_DENY;
		}
		evbuffer_drain(in, used);
		if (ftp_command(s, st, p, &st->cmd) == -1) {
			ftp_send(s, PX_TO_CLIENT,
			    "421 Too many commands pending\r\n");
			evbuffer_drain(in, evbuffer_get_length(in));
			px_session_deny(s, "too many commands pending");
			return PX_DENY;
		}
	}
}

/* ---- server replies --------------------------------------------------- */

/* A FEAT line: keep it when the proxy lets its feature through. */
static bool
ftp_feat_keep(const struct ftp_policy *p, const char *line, size_t len)
{
	char word[FTP_VERB_MAX + 1];
	size_t i = 0, k = 0;

	while (i < len && line[i] == ' ')
		i++;
	while (i < len && line[i] != ' ' && k < FTP_VERB_MAX)
		word[k++] = (char)(line[i++] & ~0x20);
	word[k] = '\0';
	if (strcmp(word, "MLST") == 0)
		return ftp_cmd_allowed(p, "MLST") || ftp_cmd_allowed(p, "MLSD");
	if (strcmp(word, "UTF8") == 0)
		return ftp_cmd_allowed(p, "OPTS");
	if ((strcmp(word, "EPRT") == 0 && p->client_data == FTP_PASSIVE) ||
	    ((strcmp(word, "EPSV") == 0 || strcmp(word, "PASV") == 0) &&
	    p->client_data == FTP_ACTIVE))
		return false;
	if (ftp_in(ftp_known, word))
		return ftp_cmd_allowed(p, word);
	return true;
}

static enum px_verdict
ftp_from_server(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, struct evbuffer *in)
{
	struct evbuffer *out = px_session_output(s, PX_TO_CLIENT);
	const unsigned char *buf;
	struct ftp_pending *q, cur;
	size_t len, used, linelen, want;
	enum ftp_rc rc;
	int fin, code;

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
		fin = ftp_reply_feed(&st->rs, (const char *)buf, linelen, &code);
		if (fin == -1) {
			px_session_count(s, FTP_C_BAD_LINE, 1);
			px_session_end(s, PX_END_SERVER_FAIL, "error: ftp: "
			    "reply line without a code from the server");
			return PX_ERROR;
		}
		q = ftp_q_head(st);
		if (!st->in_reply) {
			/* First line of a reply: decide what to do with it. */
			st->in_reply = true;
			st->feat = q != NULL && q->kind == FTP_P_FEAT;
			st->swallow = q != NULL && (q->kind == FTP_P_PASV ||
			    q->kind == FTP_P_PORT) && fin == 1 &&
			    (code / 100 == 2 || code / 100 >= 4);
		}
		if (fin == 1) {
			st->in_reply = false;
			px_session_log(s, LOG_INFO, "ftp-reply code=%d cmd=%s",
			    code, q != NULL ? q->verb : "-");
		}
		if (st->swallow && fin == 1 && q != NULL) {
			cur = *q;
			ftp_q_pop(st);
			ftp_data_reply(s, st, p, &cur, code, (const char *)buf,
			    linelen, buf, used);
			evbuffer_drain(in, used);
			ftp_q_flush_local(s, st);
			continue;
		}
		if (!(st->feat && fin == 0 && linelen > 0 && buf[0] == ' ' &&
		    !ftp_feat_keep(p, (const char *)buf, linelen)))
			evbuffer_add(out, buf, used);
		evbuffer_drain(in, used);
		/* Preliminary (1xx) replies keep the command pending. */
		if (fin == 1 && code >= 200 && q != NULL) {
			ftp_q_pop(st);
			ftp_q_flush_local(s, st);
		}
	}
}

/* ---- vtable ----------------------------------------------------------- */

static int
ftp_on_open(struct px_session *s, void *state)
{
	struct ftp_state *st = state;

	/* The greeting is the first reply. */
	if (ftp_q_push(st, FTP_P_FWD, "-") == NULL)
		return -1;
	return px_session_relay(s, PX_RELAY_BUFFERED, true);
}

static enum px_verdict
ftp_on_data(struct px_session *s, void *state, enum px_dir dir,
    struct evbuffer *in)
{
	struct ftp_state *st = state;
	const struct ftp_policy *p = px_session_policy(s);

	if (px_session_input_closed(s, dir)) {
		/* An unterminated last line: not a command, not a reply. */
		evbuffer_drain(in, evbuffer_get_length(in));
		return PX_MORE;
	}
	if (dir == PX_TO_SERVER)
		return ftp_from_client(s, st, p, in);
	return ftp_from_server(s, st, p, in);
}

static void
ftp_on_close(struct px_session *s, void *state)
{
	struct ftp_state *st = state;

	if (st->ch != NULL)
		px_session_count(s, FTP_C_DATA_REFUSED,
		    px_channel_refused(st->ch));
	st->ch = NULL;		/* the core frees it */
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
};
