/* ftp: inband authentication (Zorp's way, for intercepted FTP), on a
 * service with <auth>. The client's USER and PASS never reach the server:
 * USER is answered 331 by the proxy, PASS goes to the service's ldap
 * authenticator (auth.h) on an auth thread while the client's further
 * commands wait (FTP_P_AUTH at the head of the pending queue; the worker
 * goes on with other sessions). A proven user then gets the server login
 * its <login> rule maps it to (ftp_login_for): proxyd sends that USER and,
 * when the server asks, that PASS, and answers the client 230 itself; the
 * user's own password goes on only where the rule says pass-password.
 * A wrong password or an unknown user: 530; a directory that is down,
 * too slow or too busy: 421 and the session ends (the user did nothing
 * wrong, and cannot log in now). USER and PASS are taken only over the
 * client's TLS unless <auth basic-without-tls="yes"> (ftp_auth_gate).
 * In mode="forward" the client names the server too, Zorp's way: USER
 * alice@192.0.2.7 (or @192.0.2.7:2121, @[2001:db8::7]:21). The proxy
 * greets, checks the password, judges the server by <servers>, then
 * connects it (px_session_server_connect) and logs in there as <login>
 * says, the server's greeting swallowed (with FTPS towards it, after
 * ftp_tls.c set up its TLS); until the user is proven, nothing reaches
 * any server and only USER, PASS and QUIT are taken (and FTPS's AUTH,
 * PBSZ, PROT, which ftp_tls.c answers before). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <syslog.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>

#include "analyser.h"
#include "auth.h"
#include "log.h"
#include "parse.h"
#include "ftp/ftp_int.h"

struct ftp_auth {
	struct px_session	*s;
	struct px_auth_req	*pending;	/* a check under way */
	struct px_auth_req	*answer;	/* its answer, not yet used */
	struct px_auth_id	 id;
	bool			 have_id;
	const struct ftp_login	*login;		/* the server login under way */
	char			*pw;		/* pass-password: until sent */
	/* Forward mode: the server USER named, and the one connected. */
	struct sockaddr_storage	 server;
	char			 server_name[64];	/* as typed, escaped */
	bool			 connected;
	bool			 greet;		/* the proxy's greeting is due */
};

bool
ftp_auth_on(const struct px_session *s)
{
	return px_session_auth(s) != NULL;
}

static struct ftp_auth *
ftp_auth_state(struct px_session *s, struct ftp_state *st)
{
	if (st->auth == NULL && (st->auth = calloc(1, sizeof(*st->auth))) !=
	    NULL)
		st->auth->s = s;
	return st->auth;
}

static void
ftp_auth_forget(struct ftp_auth *a)
{
	if (a->pw != NULL) {
		explicit_bzero(a->pw, strlen(a->pw));
		free(a->pw);
		a->pw = NULL;
	}
	px_auth_id_clear(&a->id);
	a->have_id = false;
	a->login = NULL;
}

const struct px_auth_id *
ftp_auth_id(const struct ftp_state *st)
{
	return st->auth != NULL && st->auth->have_id ? &st->auth->id : NULL;
}

/* Before the USER branch of every command under <auth>: true (rc set) when
 * the proxy answers it itself. Once a proven user is logged in, USER and
 * REIN are refused: the server stays logged in as the mapped login and
 * the identity, its quota and its rules must stay with it. Until then
 * only the login's own commands (and those a client sends before it,
 * answered by the server or by ftp_tls_command) go on: nothing reaches
 * the server in the name of a user not proven yet. */
bool
ftp_auth_gate(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, int *rc)
{
	static const char *const before_login[] = { "USER", "PASS", "QUIT",
	    "FEAT", "SYST", "OPTS", "HELP", "NOOP", "AUTH", "PBSZ", "PROT",
	    NULL };
	bool in = st->auth != NULL && st->auth->have_id && st->logged_in;
	size_t i;

	if (in && (strcmp(c->verb, "USER") == 0 ||
	    strcmp(c->verb, "REIN") == 0)) {
		px_session_count(s, FTP_C_DENIED_USER, 1);
		ftp_log_cmd(s, st, c, "verdict=deny reason=relogin "
		    "rule=builtin (inband authentication)");
		*rc = ftp_reply_local(s, st, c->verb, "503 Already logged in "
		    "as %s", st->user);
		return true;
	}
	if (in)
		return false;
	/* Forward mode: no server to ask before the login, nor one to quit. */
	if (px_session_server_later(s) && strcmp(c->verb, "QUIT") == 0) {
		ftp_log_cmd(s, st, c, "verdict=accept by=proxy (no server yet)");
		ftp_send(s, PX_TO_CLIENT, "221 Goodbye\r\n");
		px_session_finish(s, PX_END_CLIENT, "quit");
		*rc = FTP_RC_DENIED;	/* (finished: the first end counts) */
		return true;
	}
	/* <auth basic-without-tls="no">, the default: a password is taken
	 * only over the client's TLS (AUTH TLS, or implicit), never in clear
	 * (the load refuses such an <auth> where no <tls side="client"> could
	 * ever give it; here, auth="optional" let the client stay in plain). */
	if ((strcmp(c->verb, "USER") == 0 || strcmp(c->verb, "PASS") == 0) &&
	    !px_session_auth(s)->basic_plain && !st->tls.on[PX_CHAN_CLIENT]) {
		px_session_count(s, FTP_C_TLS_REQUIRED, 1);
		ftp_log_cmd(s, st, c, "verdict=deny reason=tls-required "
		    "rule=auth/@basic-without-tls (a password only over TLS)");
		*rc = ftp_reply_local(s, st, c->verb, "530 TLS required: send "
		    "AUTH TLS before USER (no password in clear)");
		return true;
	}
	for (i = 0; before_login[i] != NULL && (!px_session_server_later(s) ||
	    i < 2); i++)
		if (strcmp(c->verb, before_login[i]) == 0)
			return false;
	ftp_log_cmd(s, st, c, "verdict=deny reason=not-logged-in "
	    "rule=builtin (inband authentication)");
	*rc = ftp_reply_local(s, st, c->verb, "530 Please login with USER "
	    "and PASS");
	return true;
}

int
ftp_auth_greet(struct px_session *s, struct ftp_state *st, bool later)
{
	struct ftp_auth *a = later ? ftp_auth_state(s, st) : st->auth;

	if (a == NULL)
		return later ? -1 : 0;
	if (later)
		a->greet = true;
	else if (a->greet) {
		a->greet = false;
		ftp_send(s, PX_TO_CLIENT, "220 proxyd FTP proxy: log in as "
		    "USER name@server\r\n");
	}
	return 0;
}

/* 0.0.0.0, :: or ::ffff:0.0.0.0: an address connect() takes for this
 * host's own. */
static bool
ftp_auth_unspecified(const struct sockaddr *sa)
{
	const struct in6_addr *a6;

	if (px_sockaddr_is_wildcard(sa))
		return true;
	if (sa->sa_family != AF_INET6)
		return false;
	a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	return IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 0 &&
	    a6->s6_addr[13] == 0 && a6->s6_addr[14] == 0 &&
	    a6->s6_addr[15] == 0;
}

bool
ftp_auth_user_server(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, struct ftp_cmd *uc, int *rc)
{
	struct ftp_auth *a = ftp_auth_state(s, st);
	const char *at = NULL, *why;
	char hp[80];
	socklen_t sl;
	size_t i, n;
	bool v6;

	if (a == NULL) {
		*rc = -1;
		return true;
	}
	for (i = c->arglen; i > 0 && at == NULL; i--)
		if (c->arg[i - 1] == '@')
			at = c->arg + i - 1;
	a->server.ss_family = AF_UNSPEC;
	a->server_name[0] = '\0';
	n = at != NULL ? c->arglen - (size_t)(at + 1 - c->arg) : 0;
	if (at == NULL || at == c->arg || n == 0 || n >= sizeof(hp) - 4) {
		ftp_log_cmd(s, st, c, "verdict=deny reason=no-server "
		    "rule=builtin (forward mode: USER name@server)");
		*rc = ftp_reply_local(s, st, c->verb, "530 Name the server: "
		    "USER name@server");
		return true;
	}
	memcpy(hp, at + 1, n);
	hp[n] = '\0';
	px_log_escape(a->server_name, sizeof(a->server_name), hp, n, true);
	/* No port: FTP's. An IPv6 literal is bracketed with one. */
	v6 = hp[0] == '[';
	if ((v6 && hp[n - 1] == ']') || (!v6 && strchr(hp, ':') == NULL))
		strcat(hp, ":21");
	if (px_parse_hostport(hp, &a->server, &sl, &why) == -1) {
		a->server.ss_family = AF_UNSPEC;
		ftp_log_cmd(s, st, c, "verdict=deny reason=server-name "
		    "rule=builtin (forward mode: an address, not a name)");
		*rc = ftp_reply_local(s, st, c->verb, "530 Server \"%s\": "
		    "give its address (%s)", a->server_name, why);
		return true;
	}
	if (ftp_auth_unspecified((const struct sockaddr *)&a->server)) {
		/* <servers> would judge 0.0.0.0 (or ::) as itself, while
		 * connect() takes it for this host: a way to the proxy's own
		 * loopback services past a policy that keeps them out. */
		a->server.ss_family = AF_UNSPEC;
		ftp_log_cmd(s, st, c, "verdict=deny reason=server-name "
		    "rule=builtin (forward mode: the unspecified address)");
		*rc = ftp_reply_local(s, st, c->verb, "530 Server \"%s\": "
		    "give its address (not one to connect to)",
		    a->server_name);
		return true;
	}
	*uc = *c;
	uc->arglen = (size_t)(at - c->arg);
	uc->arg[uc->arglen] = '\0';
	return false;
}

/* USER: kept, answered by the proxy. */
int
ftp_auth_user(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c)
{
	struct ftp_auth *a = ftp_auth_state(s, st);

	if (a == NULL)
		return -1;
	ftp_auth_forget(a);
	st->logged_in = false;
	ftp_log_cmd(s, st, c, "verdict=accept by=proxy (inband "
	    "authentication)");
	return ftp_reply_local(s, st, c->verb, "331 Password required for %s",
	    st->user);
}

static void
ftp_auth_done(struct px_auth_req *r, void *arg)
{
	struct ftp_auth *a = arg;

	a->pending = NULL;
	a->answer = r;
	/* On the worker: ftp_auth_step() runs from the analyser. */
	px_session_resume(a->s, PX_TO_SERVER);
}

/* PASS: the check goes to an auth thread; FTP_P_AUTH holds the client's
 * next commands until it is answered. */
int
ftp_auth_pass(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_cmd *c)
{
	const struct px_auth_use *u = px_session_auth(s);
	struct ftp_auth *a = ftp_auth_state(s, st);
	struct px_auth_req *r;
	const struct ftp_login *l;

	if (a == NULL || a->pending != NULL || a->answer != NULL)
		return -1;
	ftp_auth_forget(a);
	if (ftp_q_push(st, FTP_P_AUTH, "PASS") == NULL)
		return -1;
	ftp_log_cmd(s, st, c, "verdict=accept by=proxy (inband "
	    "authentication)");
	/* Kept only where a rule may pass it on, and only until then. */
	for (l = p->logins; l < p->logins + p->nlogins; l++)
		if (l->pass_password) {
			if ((a->pw = strndup(c->arg, c->arglen)) == NULL)
				return -1;
			break;		/* one copy, zeroed by ftp_auth_forget */
		}
	r = px_auth_req_new(PX_AUTH_PASSWORD, u->ldap, NULL, st->user,
	    c->arg, c->arglen);
	if (r == NULL)
		return -1;
	r->session = px_session_id(s);
	a->pending = r;
	px_auth_submit(r, px_session_auth_box(s), ftp_auth_done, a);
	return 0;
}

/* The pending queue's head is our FTP_P_AUTH. */
static bool
ftp_auth_at_head(struct ftp_state *st)
{
	const struct ftp_pending *q = ftp_q_head(st);

	return q != NULL && q->kind == FTP_P_AUTH;
}

static void
ftp_auth_login_send(struct px_session *s, struct ftp_state *st,
    const char *verb, const char *arg, bool secret)
{
	char esc[160];

	if (ftp_q_push(st, strcmp(verb, "USER") == 0 ? FTP_P_SUSER :
	    FTP_P_SPASS, verb) == NULL)
		return;		/* cannot be: the head was just popped */
	px_log_escape(esc, sizeof(esc), arg, strlen(arg), true);
	px_session_log(s, LOG_INFO, "ftp-command user=%s cmd=%s arg=\"%s\" "
	    "verdict=accept by=proxy (the server login of rule %s:%ld)",
	    st->user, verb, secret ? "****" : esc, px_session_policy_file(s),
	    st->auth->login->line);
	evbuffer_add_printf(px_session_output(s, PX_TO_SERVER), "%s %s\r\n",
	    verb, arg);
}

/* A PASS the proxy refuses with text (a 530): the user forgotten, USER
 * again, the commands that waited answered in order. */
static enum px_verdict
ftp_auth_refuse(struct px_session *s, struct ftp_state *st, const char *text)
{
	ftp_auth_forget(st->auth);
	st->user_ok = false;
	px_session_count(s, FTP_C_DENIED_USER, 1);
	if (ftp_reply_local(s, st, "PASS", "%s", text) == -1)
		return PX_ERROR;
	ftp_q_flush_local(s, st);
	return PX_MORE;
}

/* A proven user's <login> mapped, the client's commands waiting: forward
 * mode's server judged by <servers>, then connected; the login follows
 * its greeting (ftp_auth_server_reply). One server a session. */
static enum px_verdict
ftp_auth_connect(struct px_session *s, struct ftp_state *st)
{
	struct ftp_auth *a = st->auth;
	const struct sockaddr *dst = (const struct sockaddr *)&a->server;
	const struct sockaddr *now = px_session_server(s);
	char zones[160], text[160];

	if (a->connected) {
		if (now != NULL && px_sockaddr_same_host(now, dst) &&
		    px_sockaddr_port(now) == px_sockaddr_port(dst)) {
			ftp_auth_login_send(s, st, "USER",
			    a->login->server_user != NULL ?
			    a->login->server_user : st->user, false);
			return PX_MORE;
		}
		zones[0] = '\0';
	} else if (px_session_server_allowed(s, dst, zones,
	    sizeof(zones)) == 0) {
		if (px_session_server_connect(s, dst) == -1) {
			px_session_log(s, LOG_WARNING, "ftp-auth user=%s "
			    "result=ok server=%s verdict=error reason=\"%s\"",
			    st->user, a->server_name, strerror(errno));
			ftp_send(s, PX_TO_CLIENT, "421 Cannot reach the server, "
			    "closing control connection\r\n");
			px_session_endf(s, PX_END_PROXY, "error: connect: %s",
			    strerror(errno));
			return PX_DENY;
		}
		a->connected = true;
		px_session_log(s, LOG_INFO, "ftp-connect user=%s server=%s %s",
		    st->user, a->server_name, zones);
		/* Its greeting, swallowed, then our USER; with FTPS towards
		 * it, its TLS first (ftp_tls_server_reply). */
		if (ftp_q_push(st, ftp_tls_server_connected(st) ?
		    FTP_P_GREET : FTP_P_SUSER, "GREET") == NULL)
			return PX_ERROR;
		return PX_MORE;
	}
	px_session_log(s, LOG_NOTICE, "ftp-auth user=%s result=ok "
	    "auth=password server=%s verdict=deny reason=server%s%s%s%s",
	    st->user, a->server_name, zones[0] != '\0' ? " " : "",
	    zones[0] != '\0' ? zones : "(one server a session)",
	    zones[0] != '\0' ? " rule=" : "",
	    zones[0] != '\0' ? px_session_rule(s) : "");
	snprintf(text, sizeof(text), "530 Login incorrect: server %s not "
	    "allowed by the proxy policy", a->server_name);
	return ftp_auth_refuse(s, st, text);
}

enum px_verdict
ftp_auth_step(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p)
{
	struct ftp_auth *a = st->auth;
	struct px_auth_req *r;
	const struct ftp_login *l;
	char rule[PX_RULE_REF_MAX], msg[PX_RULE_REF_MAX + 400];
	uint32_t retry;

	if (a == NULL || a->answer == NULL || !ftp_auth_at_head(st))
		return PX_MORE;
	r = a->answer;
	a->answer = NULL;
	ftp_q_pop(st);
	if (r->result != PX_AUTH_OK) {
		px_session_log(s, LOG_NOTICE, "ftp-auth user=%s result=%s",
		    st->user, px_auth_result_name(r->result));
		if (px_auth_result_unavailable(r->result)) {
			px_auth_req_free(r);
			ftp_auth_forget(a);
			px_session_log(s, LOG_WARNING, "ftp-reply code=421 "
			    "cmd=PASS by=proxy (authentication unavailable)");
			ftp_send(s, PX_TO_CLIENT, "421 Authentication service "
			    "not available, closing control connection\r\n");
			px_session_set_rule(s, "auth");
			px_session_deny(s, "ftp: authentication unavailable");
			return PX_DENY;
		}
		px_auth_req_free(r);
		return ftp_auth_refuse(s, st, "530 Login incorrect");
	}
	a->id = r->id;
	memset(&r->id, 0, sizeof(r->id));	/* moved */
	a->have_id = true;
	px_auth_req_free(r);
	snprintf(st->user, sizeof(st->user), "%.*s",
	    (int)sizeof(st->user) - 1, a->id.user);
	for (char *u = st->user; *u != '\0'; u++)
		if (*u == ' ' || *u == '"' || (unsigned char)*u < 0x20)
			*u = '_';
	if ((l = ftp_login_for(p, &a->id)) == NULL) {
		snprintf(rule, sizeof(rule), "default");
		px_session_log(s, LOG_NOTICE, "ftp-auth user=%s result=ok "
		    "auth=password verdict=deny reason=no-login rule=%s",
		    st->user, rule);
		snprintf(msg, sizeof(msg), "530 Login incorrect: no server "
		    "login for %s", st->user);
		return ftp_auth_refuse(s, st, msg);
	}
	px_session_log(s, LOG_INFO, "ftp-auth user=%s result=ok auth=password "
	    "login=%s:%ld", st->user, px_session_policy_file(s), l->line);
	/* <source-limits per="user">: the session counts as the user's from
	 * here, once; over the user's sessions= or connections=, 421 and the
	 * session ends before the server sees a login. */
	if (!px_session_user_allowed(s, a->id.user, &retry, rule,
	    sizeof(rule))) {
		px_session_log(s, LOG_NOTICE, "ftp-reply code=421 cmd=PASS "
		    "by=proxy (source limit, rule %s)", rule);
		snprintf(msg, sizeof(msg), "421 Too many sessions or "
		    "connections of user %s (source limit, rule %s), try "
		    "again in %u s, closing control connection\r\n",
		    st->user, rule, (unsigned)retry);
		ftp_send(s, PX_TO_CLIENT, msg);
		/* The identity stays: the session-end line names the user. */
		px_session_set_rule(s, rule);
		px_session_deny(s, "source-limits");
		return PX_DENY;
	}
	a->login = l;
	/* Quotas count for the proven user: its <login>'s, else the <user>
	 * rule's for its name. */
	ftp_quota_user(st, p, st->user);
	if (px_quota_limited(&l->quota)) {
		st->qlimit = l->quota;
		st->qlogin = l;
	}
	if (!l->pass_password && a->pw != NULL) {
		explicit_bzero(a->pw, strlen(a->pw));
		free(a->pw);
		a->pw = NULL;
	}
	if (px_session_server_later(s))
		return ftp_auth_connect(s, st);
	ftp_auth_login_send(s, st, "USER", l->server_user != NULL ?
	    l->server_user : st->user, false);
	return PX_MORE;
}

void
ftp_auth_server_greeted(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, int code)
{
	struct ftp_pending q = { .kind = FTP_P_SUSER };

	snprintf(q.verb, sizeof(q.verb), "GREET");
	ftp_auth_server_reply(s, st, p, &q, code);
}

/* The server's final reply to our USER or PASS (q, popped). */
void
ftp_auth_server_reply(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_pending *q, int code)
{
	struct ftp_auth *a = st->auth;

	if (a == NULL || a->login == NULL)
		return;
	if (q->kind == FTP_P_SUSER && strcmp(q->verb, "GREET") == 0 &&
	    code == 220) {
		ftp_auth_login_send(s, st, "USER", a->login->server_user !=
		    NULL ? a->login->server_user : st->user, false);
		return;
	}
	if (q->kind == FTP_P_SUSER && (code == 331 || code == 332)) {
		ftp_auth_login_send(s, st, "PASS", a->login->pass_password &&
		    a->pw != NULL ? a->pw : a->login->server_pw != NULL ?
		    a->login->server_pw : "proxyd@", true);
		if (a->pw != NULL) {
			explicit_bzero(a->pw, strlen(a->pw));
			free(a->pw);
			a->pw = NULL;
		}
		return;
	}
	a->login = NULL;
	if (code == 230 || code == 202) {
		st->logged_in = true;
		(void)ftp_reply_local(s, st, "PASS", "230 User %s logged in",
		    st->user);
		ftp_home_ask(s, st, p);
		return;
	}
	px_session_log(s, LOG_WARNING, "ftp-auth user=%s result=ok "
	    "auth=password verdict=deny reason=server-login (the server "
	    "answered %d to the proxy's %s)", st->user, code, q->verb);
	ftp_auth_forget(a);
	st->user_ok = false;
	(void)ftp_reply_local(s, st, "PASS", "530 Login incorrect: the server "
	    "refused the proxy's login");
}

void
ftp_auth_who(const struct px_session *s, const void *state, char *buf,
    size_t len)
{
	const struct ftp_state *st = state;

	(void)s;
	px_auth_id_log(ftp_auth_id(st), buf, len);
}

void
ftp_auth_close(struct ftp_state *st)
{
	struct ftp_auth *a = st->auth;

	if (a == NULL)
		return;
	if (a->pending != NULL)
		px_auth_cancel(a->pending);	/* the box frees it */
	px_auth_req_free(a->answer);
	ftp_auth_forget(a);
	OPENSSL_cleanse(a, sizeof(*a));
	free(a);
	st->auth = NULL;
}
