/* TLS in the conn layer's transform slot (see tls.h). */
#include "tls.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libxml/tree.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509err.h>

#include "config.h"
#include "conn.h"
#include "rules.h"

struct px_tls_ctx {
	SSL_CTX		*ctx;
	unsigned char	 alpn[32];	/* wire format: length, name */
	unsigned	 alpn_len;
};

struct px_tls_conn {
	SSL		*ssl;
	char		 error[160];	/* "tls: <reason>" of the last failure */
	enum px_tls_failure failure;
};

static const char *const px_tls_failure_names[PX_TLS_FAILURES] = {
	[PX_TLS_OK] = "none",
	[PX_TLS_FAIL_PROTOCOL] = "protocol-version",
	[PX_TLS_FAIL_CIPHER] = "no-shared-cipher",
	[PX_TLS_FAIL_ALPN] = "no-application-protocol",
	[PX_TLS_FAIL_NOT_TLS] = "not-tls",
	[PX_TLS_FAIL_OTHER] = "other",
};

const char *
px_tls_failure_name(enum px_tls_failure f)
{
	return (unsigned)f < PX_TLS_FAILURES ? px_tls_failure_names[f] : "other";
}

static enum px_tls_failure
px_tls_classify(unsigned long err)
{
	switch (ERR_GET_REASON(err)) {
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_VERSION_TOO_LOW:
	case SSL_R_VERSION_TOO_HIGH:
		return PX_TLS_FAIL_PROTOCOL;
	case SSL_R_NO_SHARED_CIPHER:
		return PX_TLS_FAIL_CIPHER;
	case SSL_R_NO_APPLICATION_PROTOCOL:
		return PX_TLS_FAIL_ALPN;
	case SSL_R_HTTP_REQUEST:
	case SSL_R_HTTPS_PROXY_REQUEST:
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_UNKNOWN_PROTOCOL:
		return PX_TLS_FAIL_NOT_TLS;
	default:
		return PX_TLS_FAIL_OTHER;
	}
}

static const char *const px_tls_version_names[] = {
	"1.0", "1.1", "1.2", "1.3", NULL,
};
static const int px_tls_version_ids[] = {
	TLS1_VERSION, TLS1_1_VERSION, TLS1_2_VERSION, TLS1_3_VERSION,
};

/* OpenSSL's first queued reason, and the queue emptied. */
static void
px_tls_reason(char *buf, size_t size, const char *prefix)
{
	unsigned long err = ERR_get_error();
	const char *r = err != 0 ? ERR_reason_error_string(err) : NULL;

	snprintf(buf, size, "%s%s", prefix, r != NULL ? r : "unknown error");
	ERR_clear_error();
}

/* An absolute path, or v taken from the directory of file. malloc'd. */
static char *
px_tls_path(const char *file, const char *v)
{
	const char *slash = file != NULL ? strrchr(file, '/') : NULL;
	char *p;

	if (v[0] == '/' || slash == NULL)
		return strdup(v);
	if (asprintf(&p, "%.*s/%s", (int)(slash - file), file, v) == -1)
		return NULL;
	return p;
}

/* Offer only what the analyser speaks; a client that offers ALPN without
 * it gets no_application_protocol rather than a protocol we cannot see. */
static int
px_tls_alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	const struct px_tls_ctx *t = arg;

	(void)ssl;
	if (SSL_select_next_proto((unsigned char **)out, outlen, t->alpn,
	    t->alpn_len, in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	return SSL_TLSEXT_ERR_OK;
}

/* A readable file, or a file:line error naming the attribute. */
static char *
px_tls_file(struct px_cfgerr *e, const xmlNode *n, const char *file,
    const char *attr)
{
	char *v = px_attr(n, attr), *path;

	if (v == NULL) {
		px_cfg_error(e, n, "<tls mode=\"terminate\"> needs %s=", attr);
		return NULL;
	}
	if ((path = px_tls_path(file, v)) == NULL) {
		px_cfg_error(e, n, "out of memory");
	} else if (access(path, R_OK) == -1) {
		px_cfg_error(e, n, "%s=\"%s\": %s", attr, v, strerror(errno));
		free(path);
		path = NULL;
	}
	xmlFree(v);
	return path;
}

static int
px_tls_versions(struct px_cfgerr *e, const xmlNode *n, SSL_CTX *ctx)
{
	int lo = 2, hi = 3;	/* TLS 1.2 .. 1.3 */

	if (px_attr_choice(e, n, "min-version", px_tls_version_names,
	    &lo) == -1 || px_attr_choice(e, n, "max-version",
	    px_tls_version_names, &hi) == -1)
		return -1;
	if (lo > hi) {
		px_cfg_error(e, n, "min-version=\"%s\" is above max-version="
		    "\"%s\"", px_tls_version_names[lo], px_tls_version_names[hi]);
		return -1;
	}
	if (SSL_CTX_set_min_proto_version(ctx, px_tls_version_ids[lo]) != 1 ||
	    SSL_CTX_set_max_proto_version(ctx, px_tls_version_ids[hi]) != 1) {
		px_cfg_error(e, n, "TLS %s..%s: not supported by this OpenSSL",
		    px_tls_version_names[lo], px_tls_version_names[hi]);
		return -1;
	}
	return 0;
}

/* The certificate in use must be valid now: an expired one would make
 * every handshake fail on the client's side, far from the cause. */
static int
px_tls_check_dates(struct px_cfgerr *e, const xmlNode *n, SSL_CTX *ctx,
    const char *cert)
{
	X509 *x = SSL_CTX_get0_certificate(ctx);

	if (x == NULL)
		return 0;
	if (X509_cmp_current_time(X509_get0_notAfter(x)) < 0) {
		px_cfg_error(e, n, "cert=\"%s\" has expired", cert);
		return -1;
	}
	if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0) {
		px_cfg_error(e, n, "cert=\"%s\" is not valid yet", cert);
		return -1;
	}
	return 0;
}

static int
px_tls_ciphers(struct px_cfgerr *e, const xmlNode *n, SSL_CTX *ctx)
{
	char *v;
	int rc = 0;

	if ((v = px_attr(n, "ciphers")) != NULL) {
		if (SSL_CTX_set_cipher_list(ctx, v) != 1) {
			px_cfg_error(e, n, "ciphers=\"%s\": no cipher OpenSSL "
			    "knows", v);
			rc = -1;
		}
		xmlFree(v);
	}
	ERR_clear_error();
	if ((v = px_attr(n, "ciphersuites")) != NULL) {
		if (SSL_CTX_set_ciphersuites(ctx, v) != 1) {
			px_cfg_error(e, n, "ciphersuites=\"%s\": not a TLS 1.3 "
			    "suite list OpenSSL knows", v);
			rc = -1;
		}
		xmlFree(v);
	}
	ERR_clear_error();
	return rc;
}

struct px_tls_ctx *
px_tls_load(struct px_cfgerr *e, const xmlNode *n, const char *file,
    const char *alpn)
{
	static const char *const sides[] = { "client", "server", NULL };
	static const char *const modes[] = { "terminate", "originate",
	    "keybridge", "passthrough", NULL };
	struct px_tls_ctx *t = NULL;
	char *cert = NULL, *key = NULL, why[200];
	int side = -1, mode = -1;
	size_t alen;

	if (px_attr_choice(e, n, "side", sides, &side) == -1 ||
	    px_attr_choice(e, n, "mode", modes, &mode) == -1)
		return NULL;
	if (side != 0 || mode != 0) {
		px_cfg_error(e, n, "<tls side=\"%s\" mode=\"%s\">: this proxyd "
		    "terminates TLS from clients only (side=\"client\" "
		    "mode=\"terminate\")", side >= 0 ? sides[side] : "?",
		    mode >= 0 ? modes[mode] : "?");
		return NULL;
	}
	if ((cert = px_tls_file(e, n, file, "cert")) == NULL ||
	    (key = px_tls_file(e, n, file, "key")) == NULL)
		goto fail;
	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (t->ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		px_cfg_error(e, n, "out of memory");
		goto fail;
	}
	ERR_clear_error();
	if (SSL_CTX_use_certificate_chain_file(t->ctx, cert) != 1) {
		px_tls_reason(why, sizeof(why), "");
		px_cfg_error(e, n, "cert=\"%s\": not a PEM certificate chain "
		    "OpenSSL can use (%s)", cert, why);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) ==
		    X509_R_KEY_VALUES_MISMATCH) {
			ERR_clear_error();
			px_cfg_error(e, n, "key=\"%s\" does not match cert="
			    "\"%s\"", key, cert);
			goto fail;
		}
		px_tls_reason(why, sizeof(why), "");
		px_cfg_error(e, n, "key=\"%s\": not a PEM private key OpenSSL "
		    "can use (%s)", key, why);
		goto fail;
	}
	if (SSL_CTX_check_private_key(t->ctx) != 1) {
		ERR_clear_error();
		px_cfg_error(e, n, "key=\"%s\" does not match cert=\"%s\"", key,
		    cert);
		goto fail;
	}
	if (px_tls_check_dates(e, n, t->ctx, cert) == -1 ||
	    px_tls_versions(e, n, t->ctx) == -1 ||
	    px_tls_ciphers(e, n, t->ctx) == -1)
		goto fail;
	/* No renegotiation (a DoS lever, and nothing needs it); a peer's
	 * close without close_notify ends its direction like a FIN, as
	 * nginx and HAProxy take it. */
	SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* The conn writes from evbuffer chunks that may move and grow
	 * between retries; idle connections give their buffers back. */
	SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
	/* Resumption by tickets only: their key is made with the context
	 * (so a reload rotates it) and they need no cache shared, and
	 * locked, between workers. */
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
	if (alpn != NULL && (alen = strlen(alpn)) > 0 &&
	    alen < sizeof(t->alpn)) {
		t->alpn[0] = (unsigned char)alen;
		memcpy(t->alpn + 1, alpn, alen);
		t->alpn_len = (unsigned)alen + 1;
		SSL_CTX_set_alpn_select_cb(t->ctx, px_tls_alpn_cb, t);
	}
	free(cert);
	free(key);
	return t;
fail:
	free(cert);
	free(key);
	px_tls_free(t);
	return NULL;
}

void
px_tls_free(struct px_tls_ctx *t)
{
	if (t == NULL)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

/* ---- the transform ------------------------------------------------------ */

/* What a failed SSL_read/SSL_write/SSL_shutdown (rc) means for the conn:
 * -1 with errno (EAGAIN with *want), or 0 for the peer's orderly end. */
static ssize_t
px_tls_failed(struct px_tls_conn *tc, int rc, enum px_conn_want *want)
{
	int saved = errno;

	switch (SSL_get_error(tc->ssl, rc)) {
	case SSL_ERROR_WANT_READ:
		*want = PX_CONN_WANT_READ;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		*want = PX_CONN_WANT_WRITE;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (saved == 0)
			return 0;
		errno = saved;
		return -1;
	default:
		tc->failure = px_tls_classify(ERR_peek_error());
		px_tls_reason(tc->error, sizeof(tc->error), "tls: ");
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
	return n > 0 ? n : px_tls_failed(tc, n, want);
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

	return (size_t)SSL_pending(tc->ssl);
}

static const char *
px_tls_last_error(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf_state;

	return tc->error[0] != '\0' ? tc->error : NULL;
}

static void
px_tls_conn_free(struct px_conn *c)
{
	struct px_tls_conn *tc = c->tf_state;

	SSL_free(tc->ssl);
	free(tc);
}

static const struct px_conn_transform px_tls_transform = {
	.name = "tls",
	.read = px_tls_read,
	.write = px_tls_write,
	.shutdown = px_tls_shutdown,
	.pending = px_tls_pending,
	.last_error = px_tls_last_error,
	.free = px_tls_conn_free,
};

int
px_tls_attach(struct px_conn *c, const struct px_tls_ctx *t)
{
	struct px_tls_conn *tc;

	if ((tc = calloc(1, sizeof(*tc))) == NULL)
		return -1;
	if ((tc->ssl = SSL_new(t->ctx)) == NULL ||
	    SSL_set_fd(tc->ssl, c->fd) != 1) {
		ERR_clear_error();
		SSL_free(tc->ssl);
		free(tc);
		return -1;
	}
	SSL_set_accept_state(tc->ssl);
	px_conn_set_transform(c, &px_tls_transform, tc);
	return 0;
}

enum px_tls_failure
px_tls_failure(const struct px_conn *c)
{
	return c->tf == &px_tls_transform ?
	    ((const struct px_tls_conn *)c->tf_state)->failure : PX_TLS_OK;
}
