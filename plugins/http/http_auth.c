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
 * that carries other credentials is checked again).
 *
 * An HTTP/2 connection's streams are transactions of its session, many
 * at once: a check under way is the connection's (struct
 * http_auth_check), and each stream that comes meanwhile with the same
 * Basic credentials, with a Negotiate token (RFC 4559 proves the
 * connection: curl keeps its Negotiate state per connection; Chromium
 * sends none over HTTP/2, it retries such a server over HTTP/1.1), or
 * while its certificate user's groups are read, waits for that check
 * rather than start another: one bind for a browser's burst of streams,
 * and a Kerberos token never verified twice. A stream with other
 * credentials waits for it too, then is judged from the start: one check
 * at a time per connection, as on HTTP/1.1 (a hundred streams with a
 * hundred passwords are not a hundred binds at once, nor the auth
 * threads' shared queue filled). A stream without
 * credentials is judged as who the connection was proven to be when it
 * came, never with the answer to another stream's credentials. Its answer sets
 * the connection's identity, then judges again each request that waited,
 * in the order they came. A stream reset or its connection closed drops
 * its wait; a check nobody waits for any more is cancelled
 * (px_auth_cancel: its answer is freed unseen). Each request is judged,
 * logged and recorded as who the connection was when it passed
 * (http_auth_bind): a later stream's failed proof leaves the connection
 * unproven, as on HTTP/1.1, not the streams already under way. A client certificate that
 * names a user (<tls side="client" identity=>) proves the connection as
 * well, with no check here (an HTTP/2 stream's is its connection's);
 * with an ldap authenticator its groups are
 * read from the directory (as a password's, through its cache) first. A directory that is down
 * or past its timeout gets 503, not a challenge: the user did nothing
 * wrong. The credentials field never reaches the server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
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

/* A request waiting for a check (its parsed head kept, judged again
 * once the check is answered: http_replay_request). */
struct http_auth_wait {
	TAILQ_ENTRY(http_auth_wait) link;
	struct http_txn		*t;
	struct http_head	*held;		/* http_head_dup */
	/* Other credentials than the check's: judged again without its
	 * answer once it is answered (their own check then). */
	bool			 again;
};

/* A check under way for the connection, and the requests that wait for
 * it: an HTTP/1.1 connection's one request; an HTTP/2 connection's
 * streams that came with the same credentials meanwhile (the same Basic
 * ones, any Negotiate token: RFC 4559 proves the connection), or during
 * its certificate user's check. One check, one bind. */
struct http_auth_check {
	TAILQ_ENTRY(http_auth_check) link;
	struct http_state	*h;
	/* Under way; NULL once answered (its waiters being replayed) or
	 * cancelled. */
	struct px_auth_req	*req;
	enum px_auth_method	 method;
	unsigned char		 basic[32];	/* Basic: SHA-256 of them */
	TAILQ_HEAD(, http_auth_wait) waits;
};

/* Negotiate's last token for one transaction's response (RFC 4559 5). */
struct http_auth_reply {
	TAILQ_ENTRY(http_auth_reply) link;
	const struct http_txn	*t;
	char			 text[];
};

/* An identity proven, shared by the connection (while it is its own)
 * and the transactions judged as it (struct http_txn.who): a stream's
 * line and records name the user its request was judged as, whatever
 * the connection proves meanwhile. */
struct http_who {
	unsigned		 refs;
	struct px_auth_id	 id;
};

struct http_auth {
	struct http_who		*cur;		/* the connection's; NULL */
	/* SHA-256 of the Basic credentials that proved id (a later
	 * request with the same ones is not checked again). */
	unsigned char		 basic[32];
	bool			 have_basic;
	TAILQ_HEAD(, http_auth_check) checks;
	/* The check whose waiters are being judged again (http_auth_done),
	 * and its answer, in hand for each of them. */
	struct http_auth_check	*dispatching;
	struct px_auth_req	*answer;
	/* Its Negotiate token still to give: to the first request judged
	 * with it (the one whose token it answers, unless that stream went),
	 * not to each. */
	bool			 answer_reply;
	/* The session closed during that: the dispatch frees this. */
	bool			 closed;
	TAILQ_HEAD(, http_auth_reply) replies;
	/* <source-limits per="user"> refused the connection (its first
	 * proven request's user): each later request of it (an HTTP/2
	 * stream; an HTTP/1.1 connection ends) is refused as well, with
	 * that answer's Retry-After and rule. */
	bool			 user_limited;
	uint32_t		 user_retry;
	char			 user_rule[128];
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

static void http_auth_free(struct http_auth *a);

static void
http_who_put(struct http_who *w)
{
	if (w == NULL || --w->refs != 0)
		return;
	px_auth_id_clear(&w->id);
	OPENSSL_cleanse(w, sizeof(*w));
	free(w);
}

/* The connection is id now (moved: id is left empty). 0, or -1 out of
 * memory (the connection unproven). */
static int
http_auth_prove(struct http_auth *a, struct px_auth_id *id)
{
	struct http_who *w;

	http_who_put(a->cur);
	a->cur = NULL;
	a->have_basic = false;
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		px_auth_id_clear(id);
		return -1;
	}
	w->refs = 1;
	w->id = *id;
	memset(id, 0, sizeof(*id));
	a->cur = w;
	return 0;
}

void
http_auth_bind(struct http_txn *t)
{
	struct http_auth *a = t->conn->auth;

	http_auth_unbind(t);
	if (a != NULL && (t->who = a->cur) != NULL)
		t->who->refs++;
}

void
http_auth_unbind(struct http_txn *t)
{
	http_who_put(t->who);
	t->who = NULL;
}

const struct px_auth_id *
http_auth_txn_id(const struct http_txn *t)
{
	return t->who != NULL ? &t->who->id : NULL;
}

/* t's waiter and reply go (the stream ended, the answer came); a check
 * left without waiters is cancelled. */
static void
http_auth_forget(struct http_auth *a, const struct http_txn *t)
{
	struct http_auth_check *k, *kn;
	struct http_auth_wait *w, *wn;
	struct http_auth_reply *rp, *rn;

	for (k = TAILQ_FIRST(&a->checks); k != NULL; k = kn) {
		kn = TAILQ_NEXT(k, link);
		for (w = TAILQ_FIRST(&k->waits); w != NULL; w = wn) {
			wn = TAILQ_NEXT(w, link);
			if (t != NULL && w->t != t)
				continue;
			TAILQ_REMOVE(&k->waits, w, link);
			free(w->held);
			free(w);
		}
		if (!TAILQ_EMPTY(&k->waits) || k == a->dispatching)
			continue;
		/* Nobody waits for it: its answer, if it comes, is freed
		 * by the box unseen. The certificate user's is the
		 * connection's: the next request asks for it again (not
		 * judged as nobody because the first stream went). */
		if (k->req != NULL)
			px_auth_cancel(k->req);
		if (k->req != NULL && k->method == PX_AUTH_CERTIFICATE)
			k->h->cert_tried = false;
		TAILQ_REMOVE(&a->checks, k, link);
		free(k);
	}
	for (rp = TAILQ_FIRST(&a->replies); rp != NULL; rp = rn) {
		rn = TAILQ_NEXT(rp, link);
		if (t != NULL && rp->t != t)
			continue;
		TAILQ_REMOVE(&a->replies, rp, link);
		free(rp);
	}
}

void
http_auth_txn_gone(struct http_txn *t)
{
	if (t->conn->auth != NULL)
		http_auth_forget(t->conn->auth, t);
}

/* A check's answer, on the worker: the connection's identity from it,
 * then each request that waited for it judged again from its kept head,
 * with the answer in hand (http_auth_answered), in the order they came. */
static void
http_auth_done(struct px_auth_req *r, void *arg)
{
	struct http_auth_check *k = arg;
	struct http_state *h = k->h;
	struct http_auth *a = h->auth;
	struct http_auth_wait *w;
	struct http_txn *t;
	struct http_head *held;
	bool again, cert_again;

	k->req = NULL;
	if (r->result == PX_AUTH_OK) {
		if (http_auth_prove(a, &r->id) == 0) {
			a->have_basic = r->method == PX_AUTH_BASIC;
			memcpy(a->basic, k->basic, sizeof(a->basic));
		}
	} else if (!px_auth_result_unavailable(r->result)) {
		/* A failed proof leaves the connection unproven (the
		 * streams judged before keep who they were judged as). */
		http_who_put(a->cur);
		a->cur = NULL;
		a->have_basic = false;
	}
	/* The directory could not say who the certificate user is: the
	 * next request asks again (after these are judged with the 503),
	 * the user is not forgotten (its requests judged as nobody). */
	cert_again = k->method == PX_AUTH_CERTIFICATE &&
	    px_auth_result_unavailable(r->result);
	a->dispatching = k;
	a->answer_reply = true;
	while (!a->closed && (w = TAILQ_FIRST(&k->waits)) != NULL) {
		TAILQ_REMOVE(&k->waits, w, link);
		t = w->t;
		held = w->held;
		again = w->again;
		free(w);
		if (t->req == HTTP_REQ_AUTH) {
			t->req = HTTP_REQ_HEAD;
			h->progress++;
			if (!h->closing && !h->tunnel) {
				a->answer = again ? NULL : r;
				http_replay_request(t, held);
				a->answer = NULL;
			}
		}
		free(held);
	}
	a->dispatching = NULL;
	TAILQ_REMOVE(&a->checks, k, link);
	free(k);
	px_auth_req_free(r);
	if (a->closed) {
		http_auth_free(a);
		return;
	}
	if (cert_again)
		h->cert_tried = false;
	/* The connection's own transaction's engine drives it (an HTTP/2
	 * connection's streams too). */
	http_txn_drive(&h->tx);
}

static struct http_auth *
http_auth_state(struct http_state *h)
{
	struct http_auth *a;

	if (h->auth == NULL && (a = calloc(1, sizeof(*a))) != NULL) {
		TAILQ_INIT(&a->checks);
		TAILQ_INIT(&a->replies);
		h->auth = a;
	}
	return h->auth;
}

/* t's request (head m) waits for the check k under way, or, k NULL,
 * for a new one, r (sum: its Basic credentials' SHA-256, or NULL): its
 * head is kept for the replay, with k's answer in hand, or, again, with
 * none (other credentials than k's: judged from the start once k is
 * answered). 1, or -1 (answered 500) out of memory. */
static int
http_auth_wait(struct http_txn *t, const struct http_head *m,
    struct http_auth_check *k, struct px_auth_req *r,
    const unsigned char *sum, bool again)
{
	struct http_state *h = t->conn;
	struct http_auth *a = h->auth;
	struct http_auth_wait *w;

	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->held = http_head_dup(m)) == NULL ||
	    (k == NULL && (k = calloc(1, sizeof(*k))) == NULL)) {
		if (w != NULL)
			free(w->held);
		free(w);
		px_auth_req_free(r);
		http_error(t, 500, "out of memory");
		return -1;
	}
	w->t = t;
	w->again = again;
	t->req = HTTP_REQ_AUTH;
	if (r != NULL) {
		k->h = h;
		k->req = r;
		k->method = r->method;
		if (sum != NULL)
			memcpy(k->basic, sum, sizeof(k->basic));
		TAILQ_INIT(&k->waits);
		TAILQ_INSERT_TAIL(&a->checks, k, link);
		r->session = px_session_id(h->s);
	}
	TAILQ_INSERT_TAIL(&k->waits, w, link);
	if (r != NULL)
		px_auth_submit(r, px_session_auth_box(h->s), http_auth_done, k);
	return 1;
}

/* A check under way on the connection that a request may wait for:
 * method's (any method: -1), with the Basic credentials sum (NULL:
 * any). NULL: none. */
static struct http_auth_check *
http_auth_find(const struct http_auth *a, int method,
    const unsigned char *sum)
{
	struct http_auth_check *k;

	TAILQ_FOREACH(k, &a->checks, link)
		if (k->req != NULL && (method == -1 ||
		    k->method == (enum px_auth_method)method) && (sum == NULL ||
		    CRYPTO_memcmp(sum, k->basic, sizeof(k->basic)) == 0))
			return k;
	return NULL;
}

/* "WWW-Authenticate: Negotiate TOKEN\r\n" for t's response. */
static void
http_auth_set_reply(struct http_auth *a, const struct http_txn *t,
    const unsigned char *tok, size_t len)
{
	static const char pre[] = "WWW-Authenticate: Negotiate ";
	size_t b64 = 4 * ((len + 2) / 3);
	struct http_auth_reply *rp;

	if ((rp = malloc(sizeof(*rp) + sizeof(pre) - 1 + b64 + 3)) == NULL)
		return;
	rp->t = t;
	memcpy(rp->text, pre, sizeof(pre) - 1);
	EVP_EncodeBlock((unsigned char *)rp->text + sizeof(pre) - 1, tok,
	    (int)len);
	memcpy(rp->text + sizeof(pre) - 1 + b64, "\r\n", 3);
	TAILQ_INSERT_TAIL(&a->replies, rp, link);
}

static struct http_auth_reply *
http_auth_reply_of(const struct http_txn *t)
{
	struct http_auth_reply *rp;

	if (t->conn->auth == NULL)
		return NULL;
	TAILQ_FOREACH(rp, &t->conn->auth->replies, link)
		if (rp->t == t)
			return rp;
	return NULL;
}

const char *
http_auth_reply(const struct http_txn *t)
{
	struct http_auth_reply *rp = http_auth_reply_of(t);

	return rp != NULL ? rp->text : NULL;
}

void
http_auth_reply_sent(struct http_txn *t)
{
	struct http_auth_reply *rp = http_auth_reply_of(t);

	if (rp != NULL) {
		TAILQ_REMOVE(&t->conn->auth->replies, rp, link);
		free(rp);
	}
}

/* The answer of the check this request waited for (the connection's
 * identity already set from it: http_auth_done). */
static int
http_auth_answered(struct http_txn *t, const struct http_head *m)
{
	struct http_state *h = t->conn;
	struct http_auth *a = h->auth;
	struct px_auth_req *r = a->answer;
	char why[200];

	a->answer = NULL;
	if (r->result == PX_AUTH_OK) {
		if (a->answer_reply && r->reply_len > 0 &&
		    r->reply_len <= 12 * 1024 && !http_auth_forward(h))
			http_auth_set_reply(a, t, r->reply, r->reply_len);
		a->answer_reply = false;
		return 0;
	}
	snprintf(why, sizeof(why), "%s %s: %s", px_auth_method_name(r->method),
	    px_auth_result_name(r->result), r->reason);
	if (px_auth_result_unavailable(r->result)) {
		http_error(t, 503, why);
		return -1;
	}
	http_auth_challenge(t, m, why);
	return -1;
}


int
http_auth_request(struct http_txn *t, const struct http_head *m)
{
	struct http_state *h = t->conn;
	const struct px_auth_use *u = px_session_auth(h->s);
	const char *field, *v = NULL, *cred;
	struct http_auth *a;
	struct http_auth_check *k;
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
		struct px_auth_id cid = { .method = PX_AUTH_CERTIFICATE };

		h->cert_tried = true;
		if (px_session_client_identity(h->s, cid.user, sizeof(cid.user))) {
			if ((a = http_auth_state(h)) == NULL) {
				http_error(t, 500, "out of memory");
				return -1;
			}
			/* With an ldap authenticator: the user's groups
			 * from the directory (its cache), the request
			 * waiting as for a password. */
			if (u != NULL && u->ldap != NULL) {
				if ((r = px_auth_req_new(PX_AUTH_CERTIFICATE,
				    u->ldap, NULL, cid.user, "", 0)) == NULL) {
					http_error(t, 500, "out of memory");
					return -1;
				}
				return http_auth_wait(t, m, NULL, r, NULL, false);
			}
			if (http_auth_prove(a, &cid) == -1) {
				http_error(t, 500, "out of memory");
				return -1;
			}
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
	http_auth_reply_sent(t);	/* one left unsent (HTTP/1.1's last) */
	/* The certificate user's groups are being read: its answer says
	 * who every request of the connection is. */
	if ((k = http_auth_find(a, PX_AUTH_CERTIFICATE, NULL)) != NULL)
		return http_auth_wait(t, m, k, NULL, NULL, false);
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
		/* As who the connection was proven to be before it came:
		 * never as the answer of another stream's check under way
		 * (credentials this request does not carry). */
		if (a->cur != NULL || !u->required)
			return 0;
		http_auth_challenge(t, m, "no credentials");
		return -1;
	}
	if (vlen > 10 && strncasecmp(v, "Negotiate ", 10) == 0 &&
	    u->methods[PX_AUTH_NEGOTIATE]) {
		/* RFC 4559 authenticates the connection: once Negotiate
		 * proved it, a later token (curl sends one per request) is
		 * not verified again, the identity stands. */
		if (a->cur != NULL && a->cur->id.method == PX_AUTH_NEGOTIATE)
			return 0;
		/* Nor while another stream's token is checked: its answer
		 * proves the connection or not. */
		if ((k = http_auth_find(a, PX_AUTH_NEGOTIATE, NULL)) != NULL)
			return http_auth_wait(t, m, k, NULL, NULL, false);
		/* One check at a time per connection, as on HTTP/1.1. */
		if ((k = http_auth_find(a, -1, NULL)) != NULL)
			return http_auth_wait(t, m, k, NULL, NULL, true);
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
		if (a->cur != NULL && a->have_basic &&
		    CRYPTO_memcmp(sum, a->basic, sizeof(sum)) == 0)
			return 0;	/* the credentials that proved id */
		/* The same ones another stream's check has under way. */
		if ((k = http_auth_find(a, PX_AUTH_BASIC, sum)) != NULL)
			return http_auth_wait(t, m, k, NULL, NULL, false);
		/* Other ones wait for it, then have a check of their own:
		 * one at a time per connection, as on HTTP/1.1 (a client's
		 * hundred streams with a hundred passwords are not a
		 * hundred binds at once, nor the auth threads' whole queue
		 * that every other client's logins wait in). */
		if ((k = http_auth_find(a, -1, NULL)) != NULL)
			return http_auth_wait(t, m, k, NULL, NULL, true);
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
	return http_auth_wait(t, m, NULL, r, r->method == PX_AUTH_BASIC ?
	    sum : NULL, false);
}

bool
http_auth_user_limited(const struct http_state *h, uint32_t *retry_s,
    char *rule, size_t len)
{
	if (h->auth == NULL || !h->auth->user_limited)
		return false;
	*retry_s = h->auth->user_retry;
	snprintf(rule, len, "%s", h->auth->user_rule);
	return true;
}

void
http_auth_user_limit(struct http_state *h, uint32_t retry_s,
    const char *rule)
{
	if (h->auth == NULL)
		return;
	h->auth->user_limited = true;
	h->auth->user_retry = retry_s;
	snprintf(h->auth->user_rule, sizeof(h->auth->user_rule), "%s", rule);
}

const struct px_auth_id *
http_auth_id(const struct http_state *h)
{
	return h->auth != NULL && h->auth->cur != NULL ? &h->auth->cur->id :
	    NULL;
}

void
http_auth_who(const struct px_session *s, const void *st, char *buf,
    size_t len)
{
	(void)s;
	px_auth_id_log(http_auth_id(st), buf, len);
}

static void
http_auth_free(struct http_auth *a)
{
	http_who_put(a->cur);
	OPENSSL_cleanse(a, sizeof(*a));
	free(a);
}

void
http_auth_close(struct http_state *h)
{
	struct http_auth *a = h->auth;

	if (a == NULL)
		return;
	/* Every check under way is cancelled (the box frees it), every
	 * head kept goes. */
	http_auth_forget(a, NULL);
	h->auth = NULL;
	if (a->dispatching != NULL) {
		/* Closed by a request its answer judged: the dispatch, on
		 * the stack below, frees a. */
		a->closed = true;
		return;
	}
	http_auth_free(a);
}
