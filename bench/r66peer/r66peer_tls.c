/* r66peer over TLS (OpenSSL), either side: the context made once, the
 * handshake of a connection, its close, and what a failed call means. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "r66peer.h"

/* The reason of the last TLS failure: the verify result when the peer's
 * certificate was refused, else OpenSSL's first queued error. */
static const char *
peer_tls_reason(SSL *ssl, char *buf, size_t n)
{
	unsigned long e = ERR_peek_error();
	long v = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;

	if (ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED &&
	    v != X509_V_OK)
		snprintf(buf, n, "certificate verify failed: %s",
		    X509_verify_cert_error_string(v));
	else if (e != 0)
		ERR_error_string_n(e, buf, n);
	else
		snprintf(buf, n, "%s", errno != 0 ? strerror(errno) :
		    "connection closed");
	ERR_clear_error();
	return buf;
}

/* Error of an SSL_* call that failed: 0 clean EOF (close_notify, or
 * none: a close without one ends the stream like a FIN), -1 otherwise
 * (errno set, reason printed). */
int
peer_tls_fail(struct peer_conn *pc, int ret, const char *what)
{
	char why[256];
	int e = SSL_get_error(pc->ssl, ret);

	if (e == SSL_ERROR_ZERO_RETURN) {
		errno = ECONNRESET;
		return 0;
	}
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		errno = ETIMEDOUT;	/* SO_RCVTIMEO/SO_SNDTIMEO */
		peer_err("tls %s: timed out", what);
		return -1;
	}
	peer_err("tls %s: %s", what, peer_tls_reason(pc->ssl, why,
	    sizeof(why)));
	errno = EPROTO;
	return -1;
}

SSL_CTX *
peer_tls_ctx(const struct peer_conf *c)
{
	SSL_CTX *ctx;
	char why[256];

	ctx = SSL_CTX_new(c->server ? TLS_server_method() : TLS_client_method());
	if (ctx == NULL)
		goto fail;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	if (c->tls_cert != NULL &&
	    (SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, c->tls_key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1))
		goto fail;
	if (c->server) {
		if (c->tls_ca != NULL) {
			STACK_OF(X509_NAME) *names;

			if (SSL_CTX_load_verify_locations(ctx, c->tls_ca,
			    NULL) != 1 ||
			    (names = SSL_load_client_CA_file(c->tls_ca)) == NULL)
				goto fail;
			SSL_CTX_set_client_CA_list(ctx, names);
			SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
			    SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
		}
	} else {
		if ((c->tls_ca != NULL ? SSL_CTX_load_verify_locations(ctx,
		    c->tls_ca, NULL) : SSL_CTX_set_default_verify_paths(ctx)) != 1)
			goto fail;
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}
	return ctx;
fail:
	peer_err("tls setup: %s", peer_tls_reason(NULL, why, sizeof(why)));
	SSL_CTX_free(ctx);
	return NULL;
}

/* The subject of the peer's certificate, or "none". */
static const char *
peer_tls_subject(SSL *ssl, char *buf, size_t n)
{
	X509 *x = SSL_get1_peer_certificate(ssl);

	if (x == NULL)
		snprintf(buf, n, "none");
	else
		X509_NAME_oneline(X509_get_subject_name(x), buf, (int)n);
	X509_free(x);
	return buf;
}

/* Client: the handshake on pc->fd, the server's certificate checked
 * against the name (host name or IP address). 0 ok, -1 failed. */
int
peer_tls_connect(struct peer_conn *pc)
{
	const struct peer_conf *c = pc->c;
	char name[256], subj[256], *colon;
	struct in6_addr a6;
	bool ip;
	int r;

	if (c->tls_name != NULL)
		snprintf(name, sizeof(name), "%s", c->tls_name);
	else {
		snprintf(name, sizeof(name), "%s", c->addr);
		if ((colon = strrchr(name, ':')) != NULL)
			*colon = '\0';
		if (name[0] == '[') {
			memmove(name, name + 1, strlen(name));
			name[strlen(name) - 1] = '\0';
		}
	}
	ip = inet_pton(AF_INET, name, &a6) == 1 ||
	    inet_pton(AF_INET6, name, &a6) == 1;
	if ((pc->ssl = SSL_new(c->tls_ctx)) == NULL ||
	    SSL_set_fd(pc->ssl, pc->fd) != 1 ||
	    (ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(pc->ssl),
	    name) != 1 : SSL_set1_host(pc->ssl, name) != 1 ||
	    SSL_set_tlsext_host_name(pc->ssl, name) != 1)) {
		peer_err("tls setup for %s failed", name);
		return -1;
	}
	if ((r = SSL_connect(pc->ssl)) != 1) {
		peer_tls_fail(pc, r, "handshake");
		return -1;
	}
	if (!c->quiet)
		printf("tls connected version=%s cipher=%s name=%s server-cert=%s\n",
		    SSL_get_version(pc->ssl), SSL_get_cipher_name(pc->ssl),
		    name, peer_tls_subject(pc->ssl, subj, sizeof(subj)));
	return 0;
}

/* Server: the handshake on pc->fd. 0 ok, -1 failed. */
int
peer_tls_accept(struct peer_conn *pc)
{
	const char *sni;
	char subj[256];
	int r;

	if ((pc->ssl = SSL_new(pc->c->tls_ctx)) == NULL ||
	    SSL_set_fd(pc->ssl, pc->fd) != 1) {
		peer_err("tls setup failed");
		return -1;
	}
	if ((r = SSL_accept(pc->ssl)) != 1) {
		peer_tls_fail(pc, r, "handshake");
		return -1;
	}
	sni = SSL_get_servername(pc->ssl, TLSEXT_NAMETYPE_host_name);
	if (!pc->c->quiet)
		printf("tls accepted version=%s cipher=%s sni=%s resumed=%s "
		    "client-cert=%s\n", SSL_get_version(pc->ssl),
		    SSL_get_cipher_name(pc->ssl), sni != NULL ? sni : "none",
		    SSL_session_reused(pc->ssl) ? "yes" : "no",
		    peer_tls_subject(pc->ssl, subj, sizeof(subj)));
	return 0;
}

/* Sends close_notify (without waiting for the peer's) and frees it. */
void
peer_tls_close(struct peer_conn *pc)
{
	if (pc->ssl == NULL)
		return;
	(void)SSL_shutdown(pc->ssl);
	SSL_free(pc->ssl);
	pc->ssl = NULL;
	ERR_clear_error();
}
