/* The service's <auth> on HTTP requests (auth.h): in forward mode a
 * request without credentials gets 407 with Proxy-Authenticate for each
 * method offered, and Proxy-Authorization is checked; in the other modes
 * the same with 401, WWW-Authenticate and Authorization. Negotiate goes
 * to the kerberos authenticator, Basic to the ldap one, and Basic is
 * neither offered nor taken over a client connection without TLS unless
 * <auth basic-without-tls="yes">.
 *
 * A check runs on an auth thread: the request waits (HTTP_REQ_AUTH, its
 * parsed head kept, nothing else of the client is judged) while the
 * worker goes on with other sessions; the answer comes back on the
 * worker, and the request is judged again from its kept head, this time
 * with the answer in hand (http_replay_request). The identity then stays with the connection:
 * the next requests on it are not asked again (a Negotiate token on a
 * connection Negotiate proved is not verified again; a Basic request
 * that carries other credentials is checked again). A client certificate that
 * names a user (<tls side="client" identity=>) proves the connection as
 * well, with no check here (an HTTP/2 stream's leg is given its
 * connection's, http_auth_leg_cert); with an ldap authenticator its groups are
 * read from the directory (as a password's, through its cache) first. A directory that is down
 * or past its timeout gets 503, not a challenge: the user did nothing
 * wrong. The credentials field never reaches the server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "auth.h"
#include "conn.h"
#include "http_head.h"
#include "http_int.h"
#include "log.h"
#include "parse.h"

struct http_auth {
	struct px_auth_id	 id;
	bool			 have_id;
	/* SHA-256 of the Basic credentials that proved id (a later
	 * request with the same ones is not checked again). */
	unsigned char		 basic[32];
	bool			 have_basic;
	struct px_auth_req	*pending;	/* a check under way */
	struct px_auth_req	*answer;	/* its answer, for the replay */
	unsigned char		 answer_basic[32];
	char			*reply;		/* for this request's response */
	/* The request waiting for pending: its parsed head (http_head_dup),
	 * judged again once answered. NULL: none. */
	struct http_head	*held;
	/* An HTTP/2 stream's leg: its connection's certificate user, given
	 * at the leg's open (http_auth_leg_cert), its socketpair has none. */
	char			 leg_cert[sizeof(((struct px_auth_id *)0)->user)];
};

static int
http_b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Base64 (RFC 4648, padding optional) into out (room for 3/4 of len).
 * The length, or -1 when malformed. */
static ssize_t
http_b64_decode(const char *in, size_t len, unsigned char *out)
{
	uint32_t acc = 0;
	size_t i, o = 0, bits = 0;
	int v;

	while (len > 0 && in[len - 1] == '=')
		len--;
	for (i = 0; i < len; i++) {
		if ((v = http_b64_val((unsigned char)in[i])) < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	if (bits >= 6)
		return -1;
	return (ssize_t)o;
}

/* SHA-256 of every Basic request's credentials on a connection they
 * proved (compared with the proof's): the algorithm fetched once per
 * worker and one context kept. EVP_Digest(EVP_sha256()) looked it up
 * and made a context at each call: some 600 ns a request here, 170 with
 * them kept. Each final cleanses the block it buffered: the kept
 * context holds no credentials. Freed at the worker's exit
 * (http_auth_worker_exit). */
static _Thread_local EVP_MD *http_auth_md;
static _Thread_local EVP_MD_CTX *http_auth_mdctx;

static int
http_auth_sha(const void *p, size_t len, unsigned char out[32])
{
	unsigned n = 32;

	if (http_auth_md == NULL &&
	    (http_auth_md = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL)
		return -1;
	if (http_auth_mdctx == NULL &&
	    (http_auth_mdctx = EVP_MD_CTX_new()) == NULL)
		return -1;
	if (EVP_DigestInit_ex2(http_auth_mdctx, http_auth_md, NULL) != 1 ||
	    EVP_DigestUpdate(http_auth_mdctx, p, len) != 1 ||
	    EVP_DigestFinal_ex(http_auth_mdctx, out, &n) != 1 || n != 32)
		return -1;
	return 0;
}

void
http_auth_worker_exit(void)
{
	EVP_MD_CTX_free(http_auth_mdctx);
	http_auth_mdctx = NULL;
	EVP_MD_free(http_auth_md);
	http_auth_md = NULL;
}

static bool
http_auth_forward(const struct http_state *h)
{
	return px_session_dst(h->s)->sa_family == 0;
}

const char *
http_auth_field(const struct http_state *h)
{
	if (px_session_auth(h->s) == NULL)
		return NULL;
	return http_auth_forward(h) ? "proxy-authorization" : "authorization";
}

static bool
http_auth_basic_ok(const struct http_state *h, const struct px_auth_use *u)
{
	return u->methods[PX_AUTH_BASIC] &&
	    (u->basic_plain || px_session_client_via_tls(h->s));
}

/* 407 (forward) or 401 with a challenge per method offered. The
 * connection stays when nothing of the request is left to read. */
static void
http_auth_challenge(struct http_txn *t, const struct http_head *m,
    const char *why)
{
	struct http_state *h = t->conn;
	const struct px_auth_use *u = px_session_auth(h->s);
	const struct http_policy *p = h->pol;
	bool fwd = http_auth_forward(h);
	const char *hdr = fwd ? "Proxy-Authenticate" : "WWW-Authenticate";
	int status = fwd ? 407 : 401;
	bool keep = p->keepalive_client && !m->conn_close &&
	    (m->minor == 1 || m->conn_keep_alive) &&
	    (p->max_requests == 0 || h->nreq < p->max_requests) &&
	    !m->chunked && m->content_length <= 0 && !t->is_connect &&
	    evbuffer_get_length(h->c->in) == t->head_len &&
	    !px_session_config_stale(h->s);
	struct evbuffer *out = http_client_out(t), *bb = NULL;
	size_t before = evbuffer_get_length(out);
	struct http_own o;
	char body[256];
	int blen = 0;

	t->status = status;
	t->verdict = "deny";
	snprintf(t->rule, sizeof(t->rule), "%s:%ld",
	    px_session_policy_file(h->s), u->line);
	if (!p->silent)
		blen = snprintf(body, sizeof(body), "<!DOCTYPE html>\n<html>"
		    "<head><title>%d %s</title></head>\n<body><h1>%d %s</h1>"
		    "</body></html>\n", status, fwd ? "Proxy Authentication "
		    "Required" : "Unauthorized", status, fwd ? "Proxy "
		    "Authentication Required" : "Unauthorized");
	http_own_start(&o, status, fwd ? "Proxy Authentication Required" :
	    "Unauthorized");
	http_own_add(&o, "Content-Type", "text/html", 9);
	http_own_length(&o, (size_t)blen);
	http_own_add(&o, "Connection", keep ? "keep-alive" : "close",
	    keep ? 10 : 5);
	http_own_add(&o, "Cache-Control", "no-store", 8);
	if (u->methods[PX_AUTH_NEGOTIATE])
		http_own_add(&o, hdr, "Negotiate", 9);
	if (http_auth_basic_ok(h, u))
		http_own_addf(&o, hdr, "Basic realm=\"%s\", charset=\"UTF-8\"",
		    u->realm);
	if (blen > 0 && (bb = evbuffer_new()) != NULL)
		evbuffer_add(bb, body, (size_t)blen);
	http_own_send(t, &o, out, bb, true);
	if (bb != NULL)
		evbuffer_free(bb);
	t->resp_bytes = evbuffer_get_length(out) - before;
	px_session_account(h->s, PX_TO_CLIENT, t->resp_bytes);
	px_session_count(h->s, HTTP_C_DENIED, 1);
	px_session_log(h->s, LOG_INFO, "http-auth status=%d reason=\"%s\"",
	    status, why);
	http_refusal_sent(t, keep, fwd ?
	    "denied: http 407: authentication required" :
	    "denied: http 401: authentication required");
}

static void
http_auth_done(struct px_auth_req *r, void *arg)
{
	struct http_state *h = arg;
	struct http_txn *t = &h->tx;
	struct http_head *held = h->auth->held;

	h->auth->pending = NULL;
	h->auth->answer = r;
	h->auth->held = NULL;
	if (h->gone || t->req != HTTP_REQ_AUTH) {
		h->auth->answer = NULL;
		px_auth_req_free(r);
		free(held);
		return;
	}
	/* Judged again from its kept head, with the answer. */
	t->req = HTTP_REQ_HEAD;
	h->progress++;
	if (held != NULL && !h->closing && !h->tunnel)
		http_replay_request(t, held);
	free(held);
	http_drive(h);
}

/* t's request (head m) waits for the check r: its head is kept for the
 * replay. 1, or -1 (answered 500) out of memory. */
static int
http_auth_wait(struct http_txn *t, const struct http_head *m,
    struct px_auth_req *r)
{
	struct http_state *h = t->conn;
	struct http_auth *a = h->auth;

	free(a->held);
	if ((a->held = http_head_dup(m)) == NULL) {
		px_auth_req_free(r);
		http_error(t, 500, "out of memory");
		return -1;
	}
	r->session = px_session_id(h->s);
	a->pending = r;
	t->req = HTTP_REQ_AUTH;
	px_auth_submit(r, px_session_auth_box(h->s), http_auth_done, h);
	return 1;
}

static struct http_auth *
http_auth_state(struct http_state *h)
{
	if (h->auth == NULL)
		h->auth = calloc(1, sizeof(*h->auth));
	return h->auth;
}

/* "WWW-Authenticate: Negotiate TOKEN\r\n" for the response. */
static void
http_auth_set_reply(struct http_auth *a, const unsigned char *tok,
    size_t len)
{
	static const char pre[] = "WWW-Authenticate: Negotiate ";
	size_t b64 = 4 * ((len + 2) / 3);

	free(a->reply);
	if ((a->reply = malloc(sizeof(pre) - 1 + b64 + 3)) == NULL)
		return;
	memcpy(a->reply, pre, sizeof(pre) - 1);
	EVP_EncodeBlock((unsigned char *)a->reply + sizeof(pre) - 1, tok,
	    (int)len);
	memcpy(a->reply + sizeof(pre) - 1 + b64, "\r\n", 3);
}

const char *
http_auth_reply(const struct http_state *h)
{
	return h->auth != NULL ? h->auth->reply : NULL;
}

void
http_auth_reply_sent(struct http_state *h)
{
	free(h->auth->reply);
	h->auth->reply = NULL;
}

/* The answer of the check this request waited for. */
static int
http_auth_answered(struct http_txn *t, const struct http_head *m)
{
	struct http_state *h = t->conn;
	struct http_auth *a = h->auth;
	struct px_auth_req *r = a->answer;
	char why[200];

	a->answer = NULL;
	if (r->result == PX_AUTH_OK) {
		px_auth_id_clear(&a->id);
		a->id = r->id;
		memset(&r->id, 0, sizeof(r->id));	/* moved */
		a->have_id = true;
		a->have_basic = r->method == PX_AUTH_BASIC;
		memcpy(a->basic, a->answer_basic, sizeof(a->basic));
		if (r->reply_len > 0 && r->reply_len <= 12 * 1024 &&
		    !http_auth_forward(h))
			http_auth_set_reply(a, r->reply, r->reply_len);
		px_auth_req_free(r);
		return 0;
	}
	snprintf(why, sizeof(why), "%s %s: %s", px_auth_method_name(r->method),
	    px_auth_result_name(r->result), r->reason);
	if (px_auth_result_unavailable(r->result)) {
		px_auth_req_free(r);
		http_error(t, 503, why);
		return -1;
	}
	px_auth_req_free(r);
	/* A failed proof leaves the connection unproven. */
	px_auth_id_clear(&a->id);
	a->have_id = a->have_basic = false;
	http_auth_challenge(t, m, why);
	return -1;
}

/* The connection's certificate user: its own TLS's, or for an HTTP/2
 * stream's leg the one its connection gave it. */
static bool
http_auth_cert_user(struct http_state *h, char *user, size_t len)
{
	if (h->auth != NULL && h->auth->leg_cert[0] != '\0') {
		snprintf(user, len, "%s", h->auth->leg_cert);
		return true;
	}
	return px_session_client_identity(h->s, user, len);
}

int
http_auth_leg_cert(struct http_state *leg, const struct http_state *conn)
{
	struct http_auth *a;
	char user[sizeof(a->leg_cert)];

	if (!px_session_client_identity(conn->s, user, sizeof(user)))
		return 0;
	if ((a = http_auth_state(leg)) == NULL)
		return -1;
	memcpy(a->leg_cert, user, sizeof(user));
	return 0;
}

int
http_auth_request(struct http_txn *t, const struct http_head *m)
{
	struct http_state *h = t->conn;
	const struct px_auth_use *u = px_session_auth(h->s);
	const char *field, *v = NULL, *cred;
	struct http_auth *a;
	struct px_auth_req *r;
	unsigned char *dec = NULL, sum[32];
	enum http_field fid;
	size_t vlen = 0, clen;
	ssize_t n;
	unsigned i;
	char *colon;

	if (!h->cert_tried) {
		/* <tls side="client" identity=>: a verified certificate
		 * proves the connection's user, once for all its requests. */
		char user[sizeof(a->id.user)];

		h->cert_tried = true;
		if (http_auth_cert_user(h, user, sizeof(user))) {
			if ((a = http_auth_state(h)) == NULL) {
				http_error(t, 500, "out of memory");
				return -1;
			}
			/* With an ldap authenticator: the user's groups
			 * from the directory (its cache), the request
			 * waiting as for a password. */
			if (u != NULL && u->ldap != NULL) {
				if ((r = px_auth_req_new(PX_AUTH_CERTIFICATE,
				    u->ldap, NULL, user, "", 0)) == NULL) {
					http_error(t, 500, "out of memory");
					return -1;
				}
				return http_auth_wait(t, m, r);
			}
			px_auth_id_clear(&a->id);
			memcpy(a->id.user, user, sizeof(user));
			a->id.method = PX_AUTH_CERTIFICATE;
			a->have_id = true;
		}
	}
	if (u == NULL)
		return 0;
	if ((a = http_auth_state(h)) == NULL) {
		http_error(t, 500, "out of memory");
		return -1;
	}
	if (a->answer != NULL)
		return http_auth_answered(t, m);
	free(a->reply);
	a->reply = NULL;
	/* By the parser's field ids (Proxy-Authorization is one of the
	 * proxy- others): no string compare for each field of a request. */
	field = http_auth_field(h);
	fid = http_auth_forward(h) ? HTTP_F_PROXY_OTHER : HTTP_F_AUTHORIZATION;
	for (i = 0; i < m->nhdr; i++)
		if (http_field_is(&m->hdr[i], fid, field)) {
			v = m->hdr[i].val;
			vlen = m->hdr[i].vlen;
			break;
		}
	if (v == NULL) {
		if (a->have_id || !u->required)
			return 0;
		http_auth_challenge(t, m, "no credentials");
		return -1;
	}
	if (vlen > 10 && strncasecmp(v, "Negotiate ", 10) == 0 &&
	    u->methods[PX_AUTH_NEGOTIATE]) {
		/* RFC 4559 authenticates the connection: once Negotiate
		 * proved it, a later token (curl sends one per request) is
		 * not verified again, the identity stands. */
		if (a->have_id && a->id.method == PX_AUTH_NEGOTIATE)
			return 0;
		cred = v + 10;
		clen = vlen - 10;
		if ((dec = malloc(clen)) == NULL) {
			http_error(t, 500, "out of memory");
			return -1;
		}
		if ((n = http_b64_decode(cred, clen, dec)) <= 0) {
			free(dec);
			http_auth_challenge(t, m,
			    "malformed Negotiate token");
			return -1;
		}
		r = px_auth_req_new(PX_AUTH_NEGOTIATE, u->krb, u->ldap, NULL,
		    dec, (size_t)n);
		explicit_bzero(dec, (size_t)n);
		free(dec);
	} else if (vlen > 6 && strncasecmp(v, "Basic ", 6) == 0 &&
	    u->methods[PX_AUTH_BASIC]) {
		if (!http_auth_basic_ok(h, u)) {
			http_auth_challenge(t, m, "Basic refused "
			    "on a client connection without TLS");
			return -1;
		}
		cred = v + 6;
		clen = vlen - 6;
		if (http_auth_sha(cred, clen, sum) == -1) {
			http_error(t, 500, "no SHA-256 for the credentials");
			return -1;
		}
		if (a->have_id && a->have_basic &&
		    CRYPTO_memcmp(sum, a->basic, sizeof(sum)) == 0)
			return 0;	/* the credentials that proved id */
		if (clen > 1024 || (dec = malloc(clen + 1)) == NULL ||
		    (n = http_b64_decode(cred, clen, dec)) < 0 ||
		    (dec[n] = '\0', memchr(dec, '\0', (size_t)n) != NULL) ||
		    (colon = memchr(dec, ':', (size_t)n)) == NULL ||
		    colon - (char *)dec >= 128) {
			if (dec != NULL)
				explicit_bzero(dec, clen + 1);
			free(dec);
			http_auth_challenge(t, m,
			    "malformed Basic credentials");
			return -1;
		}
		*colon = '\0';
		r = px_auth_req_new(PX_AUTH_BASIC, u->ldap, NULL,
		    (const char *)dec, colon + 1,
		    (size_t)n - (size_t)(colon + 1 - (char *)dec));
		memcpy(a->answer_basic, sum, sizeof(sum));
		explicit_bzero(dec, clen + 1);
		free(dec);
	} else {
		http_auth_challenge(t, m, "credentials of a method "
		    "not offered");
		return -1;
	}
	if (r == NULL) {
		http_error(t, 500, "out of memory");
		return -1;
	}
	return http_auth_wait(t, m, r);
}

const struct px_auth_id *
http_auth_id(const struct http_state *h)
{
	return h->auth != NULL && h->auth->have_id ? &h->auth->id : NULL;
}

void
http_auth_who(const struct px_session *s, const void *st, char *buf,
    size_t len)
{
	(void)s;
	px_auth_id_log(http_auth_id(st), buf, len);
}

void
http_auth_close(struct http_state *h)
{
	struct http_auth *a = h->auth;

	if (a == NULL)
		return;
	if (a->pending != NULL)
		px_auth_cancel(a->pending);	/* the box frees it */
	px_auth_req_free(a->answer);
	free(a->held);
	free(a->reply);
	px_auth_id_clear(&a->id);
	OPENSSL_cleanse(a, sizeof(*a));
	free(a);
	h->auth = NULL;
}
