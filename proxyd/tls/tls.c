/* TLS in the conn layer's transform slot (see tls.h): the transform, the
 * per-worker session cache, per-connection state. Contexts are built in
 * tls_config.c, keybridge's minting is in tls_keybridge.c. */
#include "tls.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libxml/tree.h>
#include <openssl/err.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509err.h>

#include "bucket.h"
#include "conn.h"
#include "log.h"
#include "parse.h"
#include "rules.h"
#include "tls_hello.h"
#include "tls_int.h"

int px_tls_conn_index = -1;	/* SSL ex_data: its px_tls_conn */

static const char *const px_tls_failure_names[PX_TLS_FAILURES] = {
	[PX_TLS_OK] = "none",
	[PX_TLS_FAIL_PROTOCOL] = "protocol-version",
	[PX_TLS_FAIL_CIPHER] = "no-shared-cipher",
	[PX_TLS_FAIL_ALPN] = "no-application-protocol",
	[PX_TLS_FAIL_NOT_TLS] = "not-tls",
	[PX_TLS_FAIL_UNKNOWN_CA] = "unknown-ca",
	[PX_TLS_FAIL_HOSTNAME] = "host-name-mismatch",
	[PX_TLS_FAIL_EXPIRED] = "expired",
	[PX_TLS_FAIL_NO_CERT] = "no-certificate",
	[PX_TLS_FAIL_OTHER] = "other",
};

const char *
px_tls_failure_name(enum px_tls_failure f)
{
	return (unsigned)f < PX_TLS_FAILURES ? px_tls_failure_names[f] : "other";
}

static enum px_tls_failure
px_tls_classify_verify(long v)
{
	switch (v) {
	case X509_V_ERR_HOSTNAME_MISMATCH:
	case X509_V_ERR_IP_ADDRESS_MISMATCH:
		return PX_TLS_FAIL_HOSTNAME;
	case X509_V_ERR_CERT_HAS_EXPIRED:
	case X509_V_ERR_CERT_NOT_YET_VALID:
		return PX_TLS_FAIL_EXPIRED;
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
		return PX_TLS_FAIL_UNKNOWN_CA;
	default:
		return PX_TLS_FAIL_OTHER;
	}
}

static enum px_tls_failure
px_tls_classify(unsigned long err)
{
	switch (ERR_GET_REASON(err)) {
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_VERSION_TOO_LOW:
	case SSL_R_VERSION_TOO_HIGH:
	case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
		return PX_TLS_FAIL_PROTOCOL;
	case SSL_R_NO_SHARED_CIPHER:
		return PX_TLS_FAIL_CIPHER;
	case SSL_R_NO_APPLICATION_PROTOCOL:
	case SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL:
		return PX_TLS_FAIL_ALPN;
	case SSL_R_HTTP_REQUEST:
	case SSL_R_HTTPS_PROXY_REQUEST:
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_UNKNOWN_PROTOCOL:
	case SSL_R_PACKET_LENGTH_TOO_LONG:
		return PX_TLS_FAIL_NOT_TLS;
	case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
		return PX_TLS_FAIL_UNKNOWN_CA;
	case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
		return PX_TLS_FAIL_EXPIRED;
	case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
	case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
		return PX_TLS_FAIL_NO_CERT;
	default:
		return PX_TLS_FAIL_OTHER;
	}
}

/* OpenSSL's first queued reason, and the queue emptied. */
void
px_tls_reason(char *buf, size_t size, const char *prefix)
{
	unsigned long err = ERR_get_error();
	const char *r = err != 0 ? ERR_reason_error_string(err) : NULL;

	snprintf(buf, size, "%s%s", prefix, r != NULL ? r : "unknown error");
	ERR_clear_error();
}

/* ---- the per-worker session cache --------------------------------------- */

void
px_tls_worker_init(struct px_tls_worker *tw)
{
	memset(tw, 0, sizeof(*tw));
}

/* Frees the entry's session at i, the newer ones moving down. */
static void
px_tls_cache_drop(struct px_tls_cache_entry *ce, unsigned i)
{
	SSL_SESSION_free(ce->sessions[i]);
	memmove(&ce->sessions[i], &ce->sessions[i + 1],
	    (ce->nsessions - i - 1) * sizeof(ce->sessions[0]));
	ce->sessions[--ce->nsessions] = NULL;
}

static void
px_tls_cache_clear(struct px_tls_cache_entry *ce)
{
	while (ce->nsessions > 0)
		px_tls_cache_drop(ce, ce->nsessions - 1);
}

void
px_tls_worker_free(struct px_tls_worker *tw)
{
	size_t i;

	for (i = 0; i < PX_TLS_CACHE_SIZE; i++)
		px_tls_cache_clear(&tw->cache[i]);
	for (i = 0; i < tw->nleaves; i++)
		X509_free(tw->leaves[i].x509);
	free(tw->leaves);
	tw->leaves = NULL;
	tw->nleaves = 0;
}

static bool
px_tls_cache_same(const struct px_tls_cache_entry *ce,
    const struct px_tls_conn *tc)
{
	return ce->nsessions > 0 && ce->ctx_id == tc->ctx_id &&
	    strcmp(ce->name, tc->dest->name) == 0 &&
	    memcmp(&ce->addr, &tc->dest->addr, sizeof(ce->addr)) == 0;
}

static struct px_tls_cache_entry *
px_tls_cache_find(struct px_tls_worker *tw, const struct px_tls_conn *tc)
{
	size_t i;

	for (i = 0; i < PX_TLS_CACHE_SIZE; i++)
		if (px_tls_cache_same(&tw->cache[i], tc))
			return &tw->cache[i];
	return NULL;
}

/* Keeps the newest PX_TLS_CACHE_TICKETS sessions per server (the key of
 * tc), the least recently used server giving way. Takes sess's reference
 * (returns 1). */
int
px_tls_new_session(SSL *ssl, SSL_SESSION *sess)
{
	struct px_tls_conn *tc = SSL_get_ex_data(ssl, px_tls_conn_index);
	struct px_tls_cache_entry *ce;
	size_t i;

	if (tc != NULL && tc->resume_of != NULL) {
		/* A data channel's fresh ticket: the next one resumes it. */
		SSL_SESSION_free(tc->resume_of->next_resume);
		tc->resume_of->next_resume = sess;
		return 1;
	}
	if (tc == NULL || tc->tw == NULL || tc->no_cache || tc->dest == NULL)
		return 0;
	/* A chain that did not verify, let through for one keybridge
	 * client: a resumption skips the check, so a connection that must
	 * verify never gets this session (nor its pool's connections:
	 * px_pool_key's tls_unverified). */
	if (tc->relaxed && SSL_get_verify_result(ssl) != X509_V_OK)
		return 0;
	if ((ce = px_tls_cache_find(tc->tw, tc)) == NULL) {
		ce = &tc->tw->cache[0];
		for (i = 1; i < PX_TLS_CACHE_SIZE; i++)
			if (tc->tw->cache[i].used < ce->used)
				ce = &tc->tw->cache[i];
		px_tls_cache_clear(ce);
		ce->ctx_id = tc->ctx_id;
		memcpy(&ce->addr, &tc->dest->addr, sizeof(ce->addr));
		memcpy(ce->name, tc->dest->name, sizeof(ce->name));
	}
	if (ce->nsessions == PX_TLS_CACHE_TICKETS)
		px_tls_cache_drop(ce, 0);
	ce->sessions[ce->nsessions++] = sess;
	ce->used = ++tc->tw->clock;
	return 1;
}

/* A session to resume towards tc's server, or NULL; the caller owns the
 * reference. Never one the cache keeps: OpenSSL marks a TLS 1.3 client
 * session spent once a handshake that resumed it is done (a ticket is for
 * one use), and the tickets that follow come a round trip later, so a
 * connection starting meanwhile would find none to resume. The newest of
 * several is taken out; the last one is lent as a copy, for connections
 * that start before new tickets come. Spent and expired ones are dropped. */
static SSL_SESSION *
px_tls_cache_take(struct px_tls_worker *tw, const struct px_tls_conn *tc)
{
	struct px_tls_cache_entry *ce = px_tls_cache_find(tw, tc);
	long now = (long)time(NULL);
	SSL_SESSION *sess;
	unsigned i;

	if (ce == NULL)
		return NULL;
	for (i = ce->nsessions; i-- > 0;) {
		sess = ce->sessions[i];
		if (SSL_SESSION_is_resumable(sess) != 1 ||
		    SSL_SESSION_get_time(sess) + SSL_SESSION_get_timeout(sess) <=
		    now)
			px_tls_cache_drop(ce, i);
	}
	if (ce->nsessions == 0)
		return NULL;
	ce->used = ++tw->clock;
	if (ce->nsessions == 1)
		return SSL_SESSION_dup(ce->sessions[0]);
	sess = ce->sessions[--ce->nsessions];
	ce->sessions[ce->nsessions] = NULL;
	return sess;
}

/* ---- the transform ------------------------------------------------------ */

void
px_tls_inc(atomic_uint_fast64_t *c)
{
	atomic_store_explicit(c, atomic_load_explicit(c,
	    memory_order_relaxed) + 1, memory_order_relaxed);
}

/* s (len bytes) as a user name: printable ASCII, no blank, quote nor
 * backslash, shorter than size. */
static bool
px_tls_identity_copy(const unsigned char *p, int len, char *buf, size_t size)
{
	int i;

	if (len <= 0 || (size_t)len >= size)
		return false;
	for (i = 0; i < len; i++)
		if (p[i] <= ' ' || p[i] >= 0x7f || p[i] == '"' || p[i] == '\\')
			return false;
	memcpy(buf, p, (size_t)len);
	buf[len] = '\0';
	return true;
}

/* The user x names under tc's identity=. */
static bool
px_tls_identity_of(const struct px_tls_conn *tc, X509 *x, char *buf,
    size_t size)
{
	X509_NAME *nm = X509_get_subject_name(x);
	GENERAL_NAMES *gens;
	const GENERAL_NAME *g;
	const unsigned char *p;
	const char *at;
	size_t dlen;
	int i, len, want;
	bool ok = false;

	if (tc->identity == PX_TLS_ID_CN) {
		/* Two CNs: which one would be the user? Neither. */
		if ((i = X509_NAME_get_index_by_NID(nm, NID_commonName,
		    -1)) < 0 || X509_NAME_get_index_by_NID(nm,
		    NID_commonName, i) >= 0)
			return false;
		const ASN1_STRING *a = X509_NAME_ENTRY_get_data(
		    X509_NAME_get_entry(nm, i));
		unsigned char *u = NULL;

		if ((len = ASN1_STRING_to_UTF8(&u, a)) < 0)
			return false;
		ok = px_tls_identity_copy(u, len, buf, size);
		OPENSSL_free(u);
		return ok;
	}
	want = tc->identity == PX_TLS_ID_EMAIL ? GEN_EMAIL : GEN_DNS;
	if ((gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL,
	    NULL)) == NULL)
		return false;
	for (i = 0; !ok && i < sk_GENERAL_NAME_num(gens); i++) {
		g = sk_GENERAL_NAME_value(gens, i);
		if (g->type != want)
			continue;
		p = ASN1_STRING_get0_data(g->d.ia5);
		len = ASN1_STRING_length(g->d.ia5);
		if (want == GEN_EMAIL && tc->identity_domain != NULL) {
			/* alice@example.test is alice in example.test */
			dlen = strlen(tc->identity_domain);
			at = memchr(p, '@', (size_t)len);
			if (at == NULL || (size_t)(len - (at + 1 -
			    (const char *)p)) != dlen || strncasecmp(at + 1,
			    tc->identity_domain, dlen) != 0)
				continue;
			len = (int)(at - (const char *)p);
		}
		ok = px_tls_identity_copy(p, len, buf, size);
		break;	/* the first of its kind, or none */
	}
	GENERAL_NAMES_free(gens);
	return ok;
}

bool
px_tls_identity(const struct px_conn *c, char *buf, size_t len)
{
	const struct px_tls_conn *tc = c != NULL &&
	    c->tf == &px_tls_transform ? c->tf_state : NULL;
	X509 *x;

	if (len > 0)
		buf[0] = '\0';
	if (tc == NULL || tc->side != PX_TLS_CLIENT ||
	    tc->identity == PX_TLS_ID_NONE ||
	    (x = SSL_get0_peer_certificate(tc->ssl)) == NULL ||
	    SSL_get_verify_result(tc->ssl) != X509_V_OK)
		return false;
	return px_tls_identity_of(tc, x, buf, len);
}

/* Who the client proved to be, for the log (verify= on a terminating
 * side): the subject, and whether its chain verified. */
static void
px_tls_log_client_cert(const struct px_tls_conn *tc)
{
	X509 *x = SSL_get0_peer_certificate(tc->ssl);
	char subject[256], user[128];
	long v = SSL_get_verify_result(tc->ssl);

	if (x == NULL) {
		px_log(LOG_INFO, tc->session_id, "tls-client-cert none");
		return;
	}
	X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof(subject));
	if (tc->identity == PX_TLS_ID_NONE || v != X509_V_OK ||
	    !px_tls_identity_of(tc, x, user, sizeof(user)))
		user[0] = '\0';
	px_log(LOG_INFO, tc->session_id, "tls-client-cert subject=\"%s\" "
	    "verified=%s%s%s%s%s", subject, v == X509_V_OK ? "yes" : "no",
	    v == X509_V_OK ? "" : " reason=", v == X509_V_OK ? "" :
	    X509_verify_cert_error_string(v), tc->identity == PX_TLS_ID_NONE ?
	    "" : " identity=", tc->identity == PX_TLS_ID_NONE ? "" :
	    user[0] != '\0' ? user : "-");
}

/* Once per conn, when its handshake is over: counted, and a server
 * certificate let through by verify="optional" said in the log. */
static void
px_tls_handshake_done(struct px_tls_conn *tc)
{
	long v;

	tc->done = true;
	if (tc->tw == NULL)
		return;
	if (tc->n != NULL)
		px_tls_inc(&tc->n->handshakes[tc->side]
		    [SSL_session_reused(tc->ssl) ? 1 : 0]);
	if (tc->side == PX_TLS_CLIENT && tc->verify_client)
		px_tls_log_client_cert(tc);
	if (tc->side == PX_TLS_SERVER && tc->verify_optional &&
	    (v = SSL_get_verify_result(tc->ssl)) != X509_V_OK) {
		if (tc->n != NULL)
			px_tls_inc(&tc->n->unverified);
		px_log(LOG_NOTICE, tc->session_id, "tls-server-unverified "
		    "name=%s reason=\"%s\" (verify=\"optional\")",
		    tc->dest != NULL && tc->dest->name[0] != '\0' ?
		    tc->dest->name : "-",
		    X509_verify_cert_error_string(v));
	}
}

static void
px_tls_set_failure(struct px_tls_conn *tc, enum px_tls_failure f)
{
	if (tc->failure != PX_TLS_OK)
		return;
	tc->failure = f;
	if (tc->n != NULL && (unsigned)f < PX_TLS_FAILURES)
		px_tls_inc(&tc->n->failures[tc->side][f]);
}

/* A client that ends or resets its connection before its handshake is
 * done failed that handshake, whoever drives it (the core, an analyser's
 * read, a STARTTLS): counted and said the same way, never a plain end. */
static ssize_t
px_tls_client_cut(struct px_tls_conn *tc, int saved)
{
	px_tls_set_failure(tc, PX_TLS_FAIL_OTHER);
	if (saved != 0)
		snprintf(tc->error, sizeof(tc->error), "tls: %s during the "
		    "handshake", strerror(saved));
	else if (BIO_number_read(SSL_get_rbio(tc->ssl)) == 0)
		snprintf(tc->error, sizeof(tc->error), "tls: closed before "
		    "the handshake");
	else
		snprintf(tc->error, sizeof(tc->error), "tls: closed during "
		    "the handshake");
	errno = EPROTO;
	return -1;
}

/* What a failed SSL call (rc) means for the conn: -1 with errno (EAGAIN
 * with *want), or 0 for the peer's orderly end. */
static ssize_t
px_tls_failed(struct px_tls_conn *tc, int rc, enum px_conn_want *want)
{
	int saved = errno;
	unsigned long err;
	long v;

	switch (SSL_get_error(tc->ssl, rc)) {
	case SSL_ERROR_WANT_READ:
		*want = PX_CONN_WANT_READ;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		*want = PX_CONN_WANT_WRITE;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_CLIENT_HELLO_CB:
		/* Keybridge: nothing to poll for; the session goes on. */
		*want = PX_CONN_WANT_NONE;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		if (!tc->done && tc->side == PX_TLS_CLIENT)
			return px_tls_client_cut(tc, 0);
		return 0;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (!tc->done && tc->side == PX_TLS_CLIENT)
			return px_tls_client_cut(tc, saved);
		if (saved == 0 && tc->done)
			return 0;
		if (saved == 0) {
			/* A server that closes inside the handshake. */
			px_tls_set_failure(tc, PX_TLS_FAIL_OTHER);
			snprintf(tc->error, sizeof(tc->error), "tls: closed "
			    "during the handshake");
			errno = EPROTO;
			return -1;
		}
		errno = saved;
		return -1;
	default:
		if (tc->fp_hit != NULL || tc->hello_refused) {
			/* A <fingerprint> rule, not a TLS failure, or a hello
			 * px_tls_fp_hello refused: tc->error says which. */
			ERR_clear_error();
			errno = EPROTO;
			return -1;
		}
		err = ERR_peek_error();
		if (ERR_GET_REASON(err) == SSL_R_CERTIFICATE_VERIFY_FAILED &&
		    (v = SSL_get_verify_result(tc->ssl)) != X509_V_OK) {
			px_tls_set_failure(tc, px_tls_classify_verify(v));
			snprintf(tc->error, sizeof(tc->error), "tls: %s "
			    "certificate: %s", tc->side == PX_TLS_SERVER ?
			    "server" : "client", X509_verify_cert_error_string(v));
			ERR_clear_error();
		} else {
			px_tls_set_failure(tc, px_tls_classify(err));
			px_tls_reason(tc->error, sizeof(tc->error), "tls: ");
		}
		errno = EPROTO;
		return -1;
	}
}

static ssize_t
px_tls_read(struct px_conn *c, void *buf, size_t len, enum px_conn_want *want)
{
	struct px_tls_conn *tc = c->tf_state;
	int n;

	errno = 0;
	n = SSL_read(tc->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
	if (!tc->done && SSL_is_init_finished(tc->ssl))
		px_tls_handshake_done(tc);
	tc->ahead = n > 0;
	return n > 0 ? n : px_tls_failed(tc, n, want);
}

static ssize_t
px_tls_write(struct px_conn *c, const void *buf, size_t len,
    enum px_conn_want *want)
{
	struct px_tls_conn *tc = c->tf_state;
	int n;

	if (len == 0)
		return 0;
	errno = 0;
	n = SSL_write(tc->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
	if (!tc->done && SSL_is_init_finished(tc->ssl))
		px_tls_handshake_done(tc);
	if (n > 0)
		return n;
	/* An orderly end (or a socket error OpenSSL left no errno for) is
	 * an end of the write side too: never 0, which would read as
	 * "wrote nothing, try again" and spin (a peer gone mid-response). */
	if (px_tls_failed(tc, n, want) == 0 || errno == 0)
		errno = EPIPE;
	return -1;
}

static int
px_tls_handshake(struct px_conn *c, enum px_conn_want *want)
{
	struct px_tls_conn *tc = c->tf_state;
	int rc;

	if (tc->done)
		return 0;
	errno = 0;
	if ((rc = SSL_do_handshake(tc->ssl)) == 1) {
		px_tls_handshake_done(tc);
		/* The peer's first records may have come with its Finished. */
		tc->ahead = true;
		return 0;
	}
	if (px_tls_failed(tc, rc, want) == 0)
		errno = ECONNRESET;	/* an orderly end inside a handshake */
	return -1;
}

void
px_tls_handshake_timed_out(struct px_conn *c)
{
	struct px_tls_conn *tc = c->tf == &px_tls_transform ? c->tf_state :
	    NULL;

	if (tc == NULL || tc->done)
		return;
	px_tls_set_failure(tc, PX_TLS_FAIL_OTHER);
	snprintf(tc->error, sizeof(tc->error), "tls: handshake timed out");
}

static int
px_tls_shutdown(struct px_conn *c, enum px_conn_want *want)
{
	struct px_tls_conn *tc = c->tf_state;
	int rc;

	/* Our close_notify; the peer's is not waited for (half-close). */
	errno = 0;
	if ((rc = SSL_shutdown(tc->ssl)) >= 0)
		return 0;
	if (px_tls_failed(tc, rc, want) == -1 && errno == EAGAIN)
		return -1;
	return 0;	/* the plain shutdown follows anyway */
}

static size_t
px_tls_pending(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf_state;
	int n = SSL_pending(tc->ssl);

	/* Records read ahead, not decoded yet: maybe whole ones (a read
	 * bounded by its room stopped before them), which the socket will
	 * never announce again. Not after a read that wanted more: what is
	 * held then is only the start of a record, and saying "readable"
	 * for it would spin the loop until its rest comes. */
	if (n <= 0 && tc->ahead && SSL_has_pending(tc->ssl))
		n = 1;
	return n > 0 ? (size_t)n : 0;
}

static const char *
px_tls_last_error(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf_state;

	return tc->error[0] != '\0' ? tc->error : NULL;
}

static int
px_tls_idle_input(void *state)
{
	struct px_tls_conn *tc = state;
	char b;
	int n;

	errno = 0;
	if ((n = SSL_read(tc->ssl, &b, 1)) > 0)
		return -1;	/* a byte of a response nobody asked for */
	switch (SSL_get_error(tc->ssl, n)) {
	case SSL_ERROR_WANT_READ:
		tc->ahead = false;
		return 0;	/* only TLS's own messages: still clean */
	default:
		ERR_clear_error();
		return -1;
	}
}

/* TLS conns alive in the process, and the most there were since memory
 * was last handed back. A pending handshake holds some 43 KB in OpenSSL
 * (its 21 KB handshake buffer, the 8 KB write buffering BIO, the SSL)
 * and the session around it; once a burst of them is gone (2 000 stalled
 * clients cut by handshake-timeout) glibc keeps the freed memory in the
 * workers' arenas, never at their top, so the RSS stayed (28 -> 125 MB,
 * 160 MB after a second burst). Hand it back when the live count falls
 * to a quarter of a peak of at least PX_TLS_TRIM_MIN: a few trims per
 * burst (each a walk of the heaps, a few ms), none in a steady state.
 * The last of them (the count under PX_TLS_TRIM_MIN) left what they held
 * (6 MB after 1 000 stalled handshakes): one more once none is left. And
 * each waits for px_tls_trim_if_due() after the worker has freed its dead
 * sessions, whose structures still pinned the pages of the SSLs freed
 * before them (a trim from inside a batch of 2 000 ends gave back 7 MB
 * less). */
#define PX_TLS_TRIM_MIN	64
static atomic_size_t px_tls_live, px_tls_peak;
static atomic_bool px_tls_trim_at_zero;	/* a burst was trimmed: once more at 0 */
static atomic_bool px_tls_trim_due;

static void
px_tls_count_new(void)
{
	size_t live = atomic_fetch_add_explicit(&px_tls_live, 1,
	    memory_order_relaxed) + 1;
	size_t peak = atomic_load_explicit(&px_tls_peak, memory_order_relaxed);

	while (live > peak && !atomic_compare_exchange_weak_explicit(
	    &px_tls_peak, &peak, live, memory_order_relaxed,
	    memory_order_relaxed))
		;
}

static void
px_tls_count_gone(void)
{
	size_t live = atomic_fetch_sub_explicit(&px_tls_live, 1,
	    memory_order_relaxed) - 1;
	size_t peak = atomic_load_explicit(&px_tls_peak, memory_order_relaxed);

	/* The thread that lowers the peak does the trim: one at a time. */
	if (peak >= PX_TLS_TRIM_MIN && live <= peak / 4 &&
	    atomic_compare_exchange_strong_explicit(&px_tls_peak, &peak, live,
	    memory_order_relaxed, memory_order_relaxed))
		atomic_store_explicit(&px_tls_trim_at_zero, true,
		    memory_order_relaxed);
	else if (live != 0 || !atomic_exchange_explicit(&px_tls_trim_at_zero,
	    false, memory_order_relaxed))
		return;
	atomic_store_explicit(&px_tls_trim_due, true, memory_order_relaxed);
}

void
px_tls_trim_if_due(void)
{
	if (!atomic_load_explicit(&px_tls_trim_due, memory_order_relaxed) ||
	    !atomic_exchange_explicit(&px_tls_trim_due, false,
	    memory_order_relaxed))
		return;
#ifdef __GLIBC__
	(void)malloc_trim(0);
#endif
}

struct px_tls_dest *
px_tls_dest(struct px_tls_conn *tc)
{
	if (tc->dest == NULL)
		tc->dest = calloc(1, sizeof(*tc->dest));
	return tc->dest;
}

static void
px_tls_conn_free(void *state)
{
	struct px_tls_conn *tc = state;

	/* A conn closed without close_notify both ways (a pooled one timed
	 * out, a relay cut by a FIN) would make OpenSSL mark its session
	 * bad, and the worker's cache holds that very session. Only a TLS
	 * error should spoil it. */
	if (tc->done && tc->failure == PX_TLS_OK)
		SSL_set_shutdown(tc->ssl, SSL_SENT_SHUTDOWN |
		    SSL_RECEIVED_SHUTDOWN);
	SSL_free(tc->ssl);
	SSL_SESSION_free(tc->next_resume);
	free(tc->dest);
	free(tc);
	px_tls_count_gone();
}

const struct px_conn_transform px_tls_transform = {
	.name = "tls",
	.read = px_tls_read,
	.write = px_tls_write,
	.shutdown = px_tls_shutdown,
	.pending = px_tls_pending,
	.last_error = px_tls_last_error,
	.handshake = px_tls_handshake,
	.idle_input = px_tls_idle_input,
	.free = px_tls_conn_free,
};

bool
px_tls_resumed(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf == &px_tls_transform ?
	    c->tf_state : NULL;

	return tc != NULL && tc->done && SSL_session_reused(tc->ssl) == 1;
}

/* Server side: the name to send and check (or the address), and a session
 * to resume from the worker's cache. 0 or -1. */
static int
px_tls_connect_setup(struct px_tls_conn *tc, const struct px_tls_peer *p)
{
	SSL_SESSION *cached;
	const struct sockaddr *a = p->addr;
	X509_VERIFY_PARAM *param = SSL_get0_param(tc->ssl);
	struct px_tls_dest *d;

	if ((d = px_tls_dest(tc)) == NULL)
		return -1;
	if (a != NULL)
		memcpy(&d->addr, a, px_sockaddr_len(a));
	if (p->name != NULL && p->name[0] != '\0') {
		snprintf(d->name, sizeof(d->name), "%s", p->name);
		if (SSL_set_tlsext_host_name(tc->ssl, d->name) != 1 ||
		    SSL_set1_host(tc->ssl, d->name) != 1)
			return -1;
		SSL_set_hostflags(tc->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	} else if (a != NULL && a->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)a;

		if (X509_VERIFY_PARAM_set1_ip(param,
		    (const unsigned char *)&in->sin_addr, 4) != 1)
			return -1;
	} else if (a != NULL && a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;

		if (X509_VERIFY_PARAM_set1_ip(param,
		    (const unsigned char *)&in6->sin6_addr, 16) != 1)
			return -1;
	}
	if (p->resume != NULL && p->resume->tf_state != NULL) {
		/* An FTP data channel: the control connection's session, as
		 * servers that demand reuse (vsftpd's require_ssl_reuse)
		 * check. The newest one: under TLS 1.3 that of a ticket. */
		struct px_tls_conn *rc = p->resume->tf_state;
		SSL_SESSION *sess = rc->next_resume != NULL ?
		    rc->next_resume : SSL_get_session(rc->ssl);

		tc->no_cache = true;
		tc->resume_of = rc;
		if (sess != NULL)
			(void)SSL_set_session(tc->ssl, sess);
	} else if (tc->tw != NULL &&
	    (cached = px_tls_cache_take(tc->tw, tc)) != NULL) {
		(void)SSL_set_session(tc->ssl, cached);
		SSL_SESSION_free(cached);
	}
	SSL_set_connect_state(tc->ssl);
	return 0;
}

/* The JA4 of a client's ClientHello, from the message's own bytes as
 * OpenSSL hands them to this callback (handshake header on, reassembled
 * from however many records carried it), before it parses them and
 * before any client-hello callback. Not SSL_client_hello_get1_extensions_
 * present() and friends: those leave out the extensions OpenSSL does not
 * know (Chrome's ALPS, for one), which JA4 counts and hashes, and the
 * record could be peeked only while it is whole in one read. The same
 * bytes a passthrough service reads off the socket, and the same function
 * (px_ja4_hello), so a client gets one fingerprint in every mode. The
 * first hello only: after a HelloRetryRequest the second one says the
 * same, less the key share. */

static void
px_tls_msg_cb(int write_p, int version, int content_type, const void *buf,
    size_t len, SSL *ssl, void *arg)
{
	struct px_tls_conn *tc;
	const uint8_t *m = buf;

	(void)version; (void)arg;
	if (write_p || content_type != SSL3_RT_HANDSHAKE || len < 4 ||
	    (tc = SSL_get_ex_data(ssl, px_tls_conn_index)) == NULL)
		return;
	if (tc->side == PX_TLS_SERVER) {
		/* proxyd is the client: the server's JA4S (ja4.h), of its
		 * ServerHello as received, a HelloRetryRequest passed over. */
		if (m[0] != SSL3_MT_SERVER_HELLO || px_ja4s_is_hrr(m, len))
			return;
		SSL_set_msg_callback(ssl, NULL);
		(void)px_ja4s_hello(m, len, tc->ja4s);
		if (tc->ja4s_out != NULL && tc->ja4s_out[0] == '\0')
			memcpy(tc->ja4s_out, tc->ja4s, sizeof(tc->ja4s));
		return;
	}
	if (m[0] != SSL3_MT_CLIENT_HELLO)
		return;
	SSL_set_msg_callback(ssl, NULL);
	/* The session keeps its client's first hello's (STARTTLS again). */
	if (tc->ja4 == NULL || tc->ja4[0] != '\0')
		return;
	(void)px_ja4_hello(m, len, tc->ja4);
}

int
px_tls_fp_hello(SSL *ssl, int *alert)
{
	struct px_tls_conn *tc = SSL_get_ex_data(ssl, px_tls_conn_index);
	const struct px_fp_rule *hit;

	if (tc == NULL || tc->fp == NULL || tc->fp->n == 0)
		return SSL_CLIENT_HELLO_SUCCESS;
	/* An SSLv2-compatible hello reaches no message callback as a
	 * handshake message, so it has no JA4; where <fingerprint> rules
	 * judge the clients, it is refused (no client today sends one). */
	if (SSL_client_hello_isv2(ssl)) {
		tc->hello_refused = true;
		px_tls_set_failure(tc, PX_TLS_FAIL_PROTOCOL);
		snprintf(tc->error, sizeof(tc->error), "tls: SSLv2-compatible "
		    "ClientHello refused: no JA4 for <fingerprint>");
		*alert = SSL_AD_ACCESS_DENIED;
		return SSL_CLIENT_HELLO_ERROR;
	}
	/* An empty JA4 (a hello px_ja4_hello refused) is matched as
	 * PX_FP_UNKNOWN. */
	if ((hit = px_fp_match(tc->fp, tc->ja4 != NULL ? tc->ja4 : "")) == NULL ||
	    hit->action != PX_ACT_DENY)
		return SSL_CLIENT_HELLO_SUCCESS;
	tc->fp_hit = hit;
	if (tc->n != NULL)
		px_tls_inc(&tc->n->fingerprint_denied);
	snprintf(tc->error, sizeof(tc->error), "tls: ja4=%s refused by "
	    "<fingerprint> at line %ld", tc->ja4 != NULL && tc->ja4[0] != '\0' ?
	    tc->ja4 : PX_FP_UNKNOWN, hit->line);
	*alert = SSL_AD_ACCESS_DENIED;
	return SSL_CLIENT_HELLO_ERROR;
}

const char *
px_tls_ja4(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf == &px_tls_transform ?
	    c->tf_state : NULL;

	return tc != NULL && tc->side == PX_TLS_CLIENT && tc->ja4 != NULL ?
	    tc->ja4 : "";
}

const char *
px_tls_ja4s(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf == &px_tls_transform ?
	    c->tf_state : NULL;

	return tc != NULL && tc->side == PX_TLS_SERVER ? tc->ja4s : "";
}

const struct px_fp_rule *
px_tls_fp_denied(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf == &px_tls_transform ?
	    c->tf_state : NULL;

	return tc != NULL ? tc->fp_hit : NULL;
}

int
px_tls_attach(struct px_conn *c, const struct px_tls_ctx *t,
    const struct px_tls_peer *p)
{
	struct px_tls_conn *tc;

	if ((tc = calloc(1, sizeof(*tc))) == NULL)
		return -1;
	tc->side = t->side;
	tc->ctx_id = t->id;
	tc->verify_optional = t->verify_optional;
	tc->verify_client = t->side == PX_TLS_CLIENT && t->client_verify != 0;
	tc->identity = t->side == PX_TLS_CLIENT ? (uint8_t)t->client_identity :
	    PX_TLS_ID_NONE;
	tc->identity_domain = t->identity_domain;
	if (t->keybridge)
		tc->kb = t;
	tc->session_id = p != NULL ? p->session_id : 0;
	tc->tw = p != NULL ? p->tw : NULL;
	tc->n = p != NULL ? p->n : NULL;
	if ((tc->ssl = SSL_new(t->ctx)) == NULL)
		goto fail;
	/* Read ahead: one read(2) takes all the records the socket holds
	 * (up to OpenSSL's buffer), not a 5-byte header, then its record,
	 * per record (px_tls_pending says what it holds). */
	SSL_set_read_ahead(tc->ssl, 1);
	if (SSL_set_fd(tc->ssl, c->fd) != 1 ||
	    SSL_set_ex_data(tc->ssl, px_tls_conn_index, tc) != 1)
		goto fail;
	if (p != NULL && p->verify_later && t->side == PX_TLS_SERVER) {
		SSL_set_verify(tc->ssl, SSL_VERIFY_PEER, px_tls_verify_optional);
		tc->relaxed = !t->verify_optional &&
		    (SSL_CTX_get_verify_mode(t->ctx) & SSL_VERIFY_PEER) != 0;
		tc->verify_optional = false;	/* the keybridge says it */
	}
	if (t->side == PX_TLS_CLIENT) {
		SSL_set_accept_state(tc->ssl);
		tc->fp = p != NULL ? p->fp : NULL;
		tc->ja4 = p != NULL ? p->ja4 : NULL;
		/* Rules with nowhere to put what they judge (the session's
		 * buffer not made: memory short): refused, not let through. */
		if (tc->ja4 == NULL && tc->fp != NULL && tc->fp->n != 0)
			goto fail;
		if (tc->ja4 != NULL)
			SSL_set_msg_callback(tc->ssl, px_tls_msg_cb);
	} else {
		if (px_tls_connect_setup(tc, p != NULL ? p :
		    &(struct px_tls_peer){ 0 }) == -1)
			goto fail;
		if (p != NULL && p->alpn != NULL && SSL_set_alpn_protos(tc->ssl,
		    p->alpn, (unsigned)p->alpn_len) != 0)
			goto fail;
		tc->ja4s_out = p != NULL ? p->ja4s : NULL;
		SSL_set_msg_callback(tc->ssl, px_tls_msg_cb);
	}
	px_conn_set_transform(c, &px_tls_transform, tc);
	px_tls_count_new();
	return 0;
fail:
	ERR_clear_error();
	SSL_free(tc->ssl);
	free(tc);
	return -1;
}


bool
px_tls_verified(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf_state;

	return c->tf == &px_tls_transform &&
	    SSL_get_verify_result(tc->ssl) == X509_V_OK;
}

bool
px_tls_peer_subject(const struct px_conn *c, char *buf, size_t len)
{
	const struct px_tls_conn *tc = c != NULL &&
	    c->tf == &px_tls_transform ? c->tf_state : NULL;
	X509 *x;
	BIO *b;
	int n;

	if (len == 0)
		return false;
	buf[0] = '\0';
	if (tc == NULL || (x = SSL_get0_peer_certificate(tc->ssl)) == NULL ||
	    (b = BIO_new(BIO_s_mem())) == NULL)
		return false;
	if (X509_NAME_print_ex(b, X509_get_subject_name(x), 0,
	    XN_FLAG_RFC2253) >= 0 && (n = BIO_read(b, buf,
	    (int)len - 1)) > 0)
		buf[n] = '\0';
	BIO_free(b);
	return buf[0] != '\0';
}

enum px_tls_failure
px_tls_failure(const struct px_conn *c)
{
	return c->tf == &px_tls_transform ?
	    ((const struct px_tls_conn *)c->tf_state)->failure : PX_TLS_OK;
}

bool
px_tls_alpn_is(const struct px_conn *c, const char *proto)
{
	const struct px_tls_conn *tc = c->tf_state;
	const unsigned char *p = NULL;
	unsigned len = 0;

	if (c->tf != &px_tls_transform)
		return false;
	SSL_get0_alpn_selected(tc->ssl, &p, &len);
	return p != NULL && len == strlen(proto) && memcmp(p, proto, len) == 0;
}

const char *
px_tls_client_sni(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf_state;

	if (c->tf != &px_tls_transform || tc->side != PX_TLS_CLIENT)
		return NULL;
	return SSL_get_servername(tc->ssl, TLSEXT_NAMETYPE_host_name);
}
