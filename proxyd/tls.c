/* TLS in the conn layer's transform slot (see tls.h). */
#include "tls.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

#include "config.h"
#include "bucket.h"
#include "conn.h"
#include "log.h"
#include "parse.h"
#include "rules.h"
#include "tls_hello.h"

/* Session ticket keys, rotated by proxyd: a ticket is issued with the
 * current key and accepted with it or the one before, so a ticket lives
 * one to two periods. Four slots: the workers read two of them while the
 * one that rotates writes a third. */
#define PX_TLS_TICKET_SLOTS	4
struct px_tls_ticket_keys {
	unsigned char	 name[PX_TLS_TICKET_SLOTS][16];
	unsigned char	 aes[PX_TLS_TICKET_SLOTS][32];
	unsigned char	 hmac[PX_TLS_TICKET_SLOTS][32];
	atomic_uint	 cur;		/* a counter; slot cur % SLOTS */
	atomic_uint_fast64_t next_ms;	/* when cur moves on */
	atomic_bool	 rotating;	/* one worker at a time */
	uint64_t	 period_ms;
};

struct px_tls_ctx {
	SSL_CTX		*ctx;
	struct px_tls_ticket_keys *tickets;	/* terminate; NULL */
	uint64_t	 id;
	enum px_tls_side side;
	uint64_t	 handshake_timeout_ms;
	unsigned char	 alpn[32];	/* wire format: length, name */
	unsigned	 alpn_len;
	/* Client side: certificates chosen by the name the client asks
	 * for (<certificate name=...>), each in a context of its own. */
	struct px_tls_named *named;
	size_t		 nnamed;
	int		 client_verify;	/* 0 none, 1 optional, 2 required */
	/* Client side, mode="passthrough": <sni> rules on the ClientHello,
	 * each rule's arg indexing (from 1) its alpn= set. */
	bool		 passthrough;
	struct px_rules	 sni_rules;
	struct px_tls_alpn_set *alpn_sets;
	size_t		 nalpn_sets;
	bool		 no_sni_accept;
	/* Client side, mode="keybridge": the CAs that sign leaves for
	 * servers whose chain verified [0] or did not [1], the one key pair
	 * of every leaf, and how many leaves a worker keeps. */
	bool		 keybridge;
	X509		*kb_ca[2];
	EVP_PKEY	*kb_ca_key[2];
	EVP_PKEY	*kb_key;
	uint64_t	 kb_cache;
	/* Server side. */
	bool		 sni_forward;	/* the client's name */
	char		*sni;		/* a fixed name; NULL */
	bool		 verify_optional;
	/* Analysers that start TLS themselves (FTP's AUTH TLS): implicit=
	 * (-1 unset: the analyser's default, 0 no, 1 yes) and auth= (a peer
	 * may stay in plain: optional). */
	int		 implicit;
	bool		 auth_optional;
};

struct px_tls_alpn_set {
	char		**names;
	size_t		 n;
};

struct px_tls_named {
	SSL_CTX		*ctx;
	char		**names;	/* exact, or "*.example.test" */
	size_t		 nnames;
};

struct px_tls_conn {
	SSL		*ssl;
	enum px_tls_side side;
	bool		 done;		/* the handshake finished */
	bool		 verify_optional;
	bool		 verify_client;	/* log the client's certificate */
	/* Keybridge, client side: the ClientHello was seen (kb_waiting)
	 * and the handshake waits for a leaf (kb_ready once it has one). */
	const struct px_tls_ctx *kb;
	bool		 kb_waiting, kb_ready;
	uint64_t	 ctx_id;
	uint64_t	 session_id;
	struct px_tls_worker *tw;
	struct sockaddr_storage addr;	/* server side: the cache key */
	char		 name[256];
	char		 error[160];	/* "tls: <reason>" of the last failure */
	enum px_tls_failure failure;
	bool		 no_cache;	/* resumes a given session: keep none */
	/* FTP data channels towards a server (px_tls_peer.resume): the
	 * control conn's next_resume is the newest session one of them was
	 * given (TLS 1.3 tickets may be good for one use only), each data
	 * conn's resume_of the control conn it feeds. */
	SSL_SESSION	*next_resume;
	struct px_tls_conn *resume_of;
};

static atomic_uint_fast64_t px_tls_ctx_ids;
static int px_tls_conn_index = -1;	/* SSL ex_data: its px_tls_conn */

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

/* A readable file, or a file:line error naming the attribute. A missing
 * attribute is an error when `mode` names who needs it, else just NULL. */
static char *
px_tls_file(struct px_cfgerr *e, const xmlNode *n, const char *file,
    const char *attr, const char *mode)
{
	char *v = px_attr(n, attr), *path;

	if (v == NULL) {
		if (mode != NULL)
			px_cfg_error(e, n, "<tls mode=\"%s\"> needs %s=", mode,
			    attr);
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

/* The certificate chain and key in cert/key, checked to match and to be
 * valid now. 0 or -1 after reporting. */
static int
px_tls_use_cert(struct px_cfgerr *e, const xmlNode *n, SSL_CTX *ctx,
    const char *cert, const char *key)
{
	char why[200];

	ERR_clear_error();
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		px_tls_reason(why, sizeof(why), "");
		px_cfg_error(e, n, "cert=\"%s\": not a PEM certificate chain "
		    "OpenSSL can use (%s)", cert, why);
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) ==
		    X509_R_KEY_VALUES_MISMATCH) {
			ERR_clear_error();
			px_cfg_error(e, n, "key=\"%s\" does not match cert="
			    "\"%s\"", key, cert);
			return -1;
		}
		px_tls_reason(why, sizeof(why), "");
		px_cfg_error(e, n, "key=\"%s\": not a PEM private key OpenSSL "
		    "can use (%s)", key, why);
		return -1;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ERR_clear_error();
		px_cfg_error(e, n, "key=\"%s\" does not match cert=\"%s\"", key,
		    cert);
		return -1;
	}
	return px_tls_check_dates(e, n, ctx, cert);
}

/* ca=: a PEM file whose every certificate must be a CA, or a hashed
 * directory (c_rehash); none: the system's store. */
static int
px_tls_load_ca(struct px_cfgerr *e, const xmlNode *n, SSL_CTX *ctx,
    const char *file)
{
	STACK_OF(X509_INFO) *infos = NULL;
	struct stat st;
	char *v, *path = NULL, why[200];
	BIO *bio = NULL;
	int rc = -1, i, certs = 0;

	if ((v = px_attr(n, "ca")) == NULL) {
		if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
			px_tls_reason(why, sizeof(why), "");
			px_cfg_error(e, n, "the system's CA store: %s", why);
			return -1;
		}
		return 0;
	}
	if ((path = px_tls_path(file, v)) == NULL) {
		px_cfg_error(e, n, "out of memory");
		goto out;
	}
	if (stat(path, &st) == -1) {
		px_cfg_error(e, n, "ca=\"%s\": %s", v, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		if (SSL_CTX_load_verify_dir(ctx, path) != 1) {
			px_tls_reason(why, sizeof(why), "");
			px_cfg_error(e, n, "ca=\"%s\": %s", v, why);
			goto out;
		}
		rc = 0;
		goto out;
	}
	/* Read once here to check each one, then handed to OpenSSL. */
	if ((bio = BIO_new_file(path, "r")) == NULL ||
	    (infos = PEM_X509_INFO_read_bio(bio, NULL, NULL, NULL)) == NULL) {
		px_tls_reason(why, sizeof(why), "");
		px_cfg_error(e, n, "ca=\"%s\": not PEM certificates (%s)", v,
		    why);
		goto out;
	}
	for (i = 0; i < sk_X509_INFO_num(infos); i++) {
		X509 *x = sk_X509_INFO_value(infos, i)->x509;
		char subject[160];

		if (x == NULL)
			continue;
		if (X509_check_ca(x) < 1) {
			X509_NAME_oneline(X509_get_subject_name(x), subject,
			    sizeof(subject));
			px_cfg_error(e, n, "ca=\"%s\": certificate %d (%s) is "
			    "not a CA", v, i + 1, subject);
			goto out;
		}
		if (X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), x) != 1) {
			px_tls_reason(why, sizeof(why), "");
			px_cfg_error(e, n, "ca=\"%s\": %s", v, why);
			goto out;
		}
		certs++;
	}
	if (certs == 0) {
		px_cfg_error(e, n, "ca=\"%s\": no certificate in it", v);
		goto out;
	}
	rc = 0;
out:
	ERR_clear_error();
	if (infos != NULL)
		sk_X509_INFO_pop_free(infos, X509_INFO_free);
	BIO_free(bio);
	free(path);
	xmlFree(v);
	return rc;
}

/* A host name as SNI carries it: letters, digits, '-' and '.', no empty
 * label, no IP literal (RFC 6066 §3). */
static bool
px_tls_is_dns_name(const char *s)
{
	size_t i, len = strlen(s), label = 0;
	bool alpha = false;

	if (len == 0 || len > 253)
		return false;
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!(ch >= 'a' && ch <= 'z') && !(ch >= 'A' && ch <= 'Z') &&
		    !(ch >= '0' && ch <= '9') && ch != '-')
			return false;
		if (!(ch >= '0' && ch <= '9'))
			alpha = true;
		if (++label > 63)
			return false;
	}
	return alpha && label > 0;
}

/* Sessions towards servers are kept per worker (px_tls_cache_put). */
static int px_tls_new_session(SSL *ssl, SSL_SESSION *sess);

static int px_tls_verify_optional(int ok, X509_STORE_CTX *x);

static int
px_tls_load_originate(struct px_cfgerr *e, const xmlNode *n,
    const char *file, struct px_tls_ctx *t)
{
	static const char *const verifies[] = { "required", "optional", "none",
	    NULL };
	char *cert = NULL, *key = NULL, *sni;
	int verify = 0, rc = -1;

	if (px_attr_choice(e, n, "verify", verifies, &verify) == -1)
		return -1;
	t->verify_optional = verify == 1;
	if (verify != 2 && px_tls_load_ca(e, n, t->ctx, file) == -1)
		return -1;
	SSL_CTX_set_verify(t->ctx, verify == 2 ? SSL_VERIFY_NONE :
	    SSL_VERIFY_PEER, verify == 1 ? px_tls_verify_optional : NULL);
	t->sni_forward = true;
	if ((sni = px_attr(n, "sni")) != NULL) {
		if (strcmp(sni, "none") == 0)
			t->sni_forward = false;
		else if (strcmp(sni, "forward") != 0) {
			if (!px_tls_is_dns_name(sni)) {
				px_cfg_error(e, n, "sni=\"%s\": expected forward, "
				    "none or a host name", sni);
				xmlFree(sni);
				return -1;
			}
			t->sni_forward = false;
			t->sni = strdup(sni);
		}
		xmlFree(sni);
	}
	if ((xmlHasProp(n, (const xmlChar *)"cert") == NULL) !=
	    (xmlHasProp(n, (const xmlChar *)"key") == NULL)) {
		px_cfg_error(e, n, "a client certificate needs both cert= and "
		    "key=");
		return -1;
	}
	if (xmlHasProp(n, (const xmlChar *)"cert") != NULL &&
	    ((cert = px_tls_file(e, n, file, "cert", "originate")) == NULL ||
	    (key = px_tls_file(e, n, file, "key", "originate")) == NULL))
		goto out;
	if (cert != NULL && px_tls_use_cert(e, n, t->ctx, cert, key) == -1)
		goto out;
	/* Resumption towards each server, kept per worker: the new-session
	 * callback hands each session (TLS 1.3 tickets come after the
	 * handshake) to the worker that made it. */
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_CLIENT |
	    SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(t->ctx, px_tls_new_session);
	if (t->alpn_len != 0 &&
	    SSL_CTX_set_alpn_protos(t->ctx, t->alpn, t->alpn_len) != 0) {
		px_cfg_error(e, n, "out of memory");
		goto out;
	}
	rc = 0;
out:
	free(cert);
	free(key);
	return rc;
}

/* What every context of a <tls> (n) shares: versions, ciphers, options. */
static int
px_tls_ctx_common(struct px_cfgerr *e, const xmlNode *n, SSL_CTX *ctx)
{
	if (px_tls_versions(e, n, ctx) == -1 || px_tls_ciphers(e, n, ctx) == -1)
		return -1;
	/* No renegotiation (a DoS lever, and nothing needs it); a peer's
	 * close without close_notify ends its direction like a FIN, as
	 * nginx and HAProxy take it. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* The conn writes from evbuffer chunks that may move and grow
	 * between retries; idle connections give their buffers back. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
	return 0;
}

/* verify="optional": the chain is checked and the result kept for the
 * log, but the handshake goes on. */
static int
px_tls_verify_optional(int ok, X509_STORE_CTX *x)
{
	(void)ok; (void)x;
	return 1;
}

static int px_tls_ctx_index = -1;	/* SSL_CTX ex_data: its px_tls_ctx */

static int
px_tls_ticket_fill(struct px_tls_ticket_keys *k, unsigned slot)
{
	return RAND_bytes(k->name[slot], sizeof(k->name[slot])) == 1 &&
	    RAND_priv_bytes(k->aes[slot], sizeof(k->aes[slot])) == 1 &&
	    RAND_priv_bytes(k->hmac[slot], sizeof(k->hmac[slot])) == 1 ?
	    0 : -1;
}

/* Moves to a fresh key once the period is over; whoever sees it first
 * does it, the others go on with the current one. */
static void
px_tls_ticket_rotate(struct px_tls_ticket_keys *k)
{
	uint64_t now = px_clock_ms();
	unsigned cur;
	bool no = false;

	if (now < atomic_load(&k->next_ms) ||
	    !atomic_compare_exchange_strong(&k->rotating, &no, true))
		return;
	cur = atomic_load(&k->cur);
	if (now >= atomic_load(&k->next_ms) &&
	    px_tls_ticket_fill(k, (cur + 1) % PX_TLS_TICKET_SLOTS) == 0) {
		atomic_store(&k->cur, cur + 1);
		atomic_store(&k->next_ms, now + k->period_ms);
	}
	atomic_store(&k->rotating, false);
}

static int
px_tls_ticket_cb(SSL *ssl, unsigned char key_name[16],
    unsigned char iv[EVP_MAX_IV_LENGTH], EVP_CIPHER_CTX *cctx,
    EVP_MAC_CTX *hctx, int enc)
{
	const struct px_tls_ctx *t = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl),
	    px_tls_ctx_index);
	struct px_tls_ticket_keys *k = t != NULL ? t->tickets : NULL;
	OSSL_PARAM params[3];
	unsigned cur, slot;
	int rc = 1;

	if (k == NULL)
		return enc ? -1 : 0;
	px_tls_ticket_rotate(k);
	cur = atomic_load(&k->cur);
	slot = cur % PX_TLS_TICKET_SLOTS;
	if (enc) {
		memcpy(key_name, k->name[slot], 16);
		if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(EVP_aes_256_cbc())) != 1)
			return -1;
	} else if (memcmp(key_name, k->name[slot], 16) != 0) {
		/* The key before: accepted, and a new ticket issued. */
		slot = (cur + PX_TLS_TICKET_SLOTS - 1) % PX_TLS_TICKET_SLOTS;
		if (cur == 0 || memcmp(key_name, k->name[slot], 16) != 0)
			return 0;	/* too old, or not ours: full handshake */
		rc = 2;
	}
	params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY,
	    k->hmac[slot], sizeof(k->hmac[slot]));
	params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    (char *)"SHA256", 0);
	params[2] = OSSL_PARAM_construct_end();
	if ((enc ? EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL,
	    k->aes[slot], iv) : EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(),
	    NULL, k->aes[slot], iv)) != 1 ||
	    EVP_MAC_CTX_set_params(hctx, params) != 1)
		return -1;
	return rc;
}

/* A terminating context: the certificate of `cn` (the <tls> itself or one
 * of its <certificate>s), the rest from the <tls> (n). */
static int
px_tls_terminate_ctx(struct px_cfgerr *e, const xmlNode *n, const xmlNode *cn,
    const char *file, struct px_tls_ctx *t, SSL_CTX *ctx)
{
	const char *who = cn == n ? "terminate" : "certificate";
	char *cert = NULL, *key = NULL, *ca = NULL;
	STACK_OF(X509_NAME) *names;
	int rc = -1;

	if ((cert = px_tls_file(e, cn, file, "cert", who)) == NULL ||
	    (key = px_tls_file(e, cn, file, "key", who)) == NULL)
		goto out;
	if (px_tls_use_cert(e, cn, ctx, cert, key) == -1 ||
	    px_tls_ctx_common(e, n, ctx) == -1)
		goto out;
	if (t->client_verify != 0) {
		if (px_tls_load_ca(e, n, ctx, file) == -1)
			goto out;
		/* The CAs we accept, named in the CertificateRequest. */
		if ((ca = px_tls_file(e, n, file, "ca", NULL)) != NULL &&
		    (names = SSL_load_client_CA_file(ca)) != NULL)
			SSL_CTX_set_client_CA_list(ctx, names);
		ERR_clear_error();
		SSL_CTX_set_verify(ctx, t->client_verify == 2 ? SSL_VERIFY_PEER |
		    SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER,
		    t->client_verify == 1 ? px_tls_verify_optional : NULL);
	}
	/* Resumption by tickets only: no cache shared, and locked, between
	 * workers. Their keys are proxyd's, rotated every ticket-rotate=
	 * (and made afresh by a reload). */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (SSL_CTX_set_ex_data(ctx, px_tls_ctx_index, t) != 1 ||
	    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, px_tls_ticket_cb) != 1) {
		px_cfg_error(e, n, "out of memory");
		goto out;
	}
	if (t->alpn_len != 0)
		SSL_CTX_set_alpn_select_cb(ctx, px_tls_alpn_cb, t);
	rc = 0;
out:
	free(cert);
	free(key);
	free(ca);
	return rc;
}

/* The certificate for the name the client asked for: an exact name first,
 * then a wildcard, in file order; else the <tls> element's own. */
static int
px_tls_servername_cb(SSL *ssl, int *alert, void *arg)
{
	const struct px_tls_ctx *t = arg;
	const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	size_t i, k;
	int pass;

	(void)alert;
	if (name == NULL)
		return SSL_TLSEXT_ERR_OK;
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < t->nnamed; i++)
			for (k = 0; k < t->named[i].nnames; k++) {
				const char *pat = t->named[i].names[k];

				if ((pat[0] == '*') != (pass == 1) ||
				    !px_hello_name_match(pat, name))
					continue;
				if (SSL_set_SSL_CTX(ssl, t->named[i].ctx) == NULL)
					return SSL_TLSEXT_ERR_ALERT_FATAL;
				return SSL_TLSEXT_ERR_OK;
			}
	return SSL_TLSEXT_ERR_OK;
}

/* <certificate name="a.example.test *.example.test" cert= key=>: checked
 * names, a context each. */
static int
px_tls_load_named(struct px_cfgerr *e, const xmlNode *n, const char *file,
    struct px_tls_ctx *t)
{
	const xmlNode *c;
	size_t count = 0;

	for (c = n->children; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE)
			count++;
	if (count == 0)
		return 0;
	if ((t->named = calloc(count, sizeof(*t->named))) == NULL) {
		px_cfg_error(e, n, "out of memory");
		return -1;
	}
	for (c = n->children; c != NULL; c = c->next) {
		struct px_tls_named *nm;
		char *names, *tok, *save = NULL;

		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (xmlStrcmp(c->name, (const xmlChar *)"certificate") != 0) {
			px_cfg_error(e, c, "<%s> does not belong in <tls "
			    "mode=\"terminate\"> (only <certificate>)",
			    (const char *)c->name);
			return -1;
		}
		nm = &t->named[t->nnamed++];
		if ((names = px_attr(c, "name")) == NULL) {
			px_cfg_error(e, c, "<certificate> needs name=");
			return -1;
		}
		for (tok = strtok_r(names, " \t\r\n", &save); tok != NULL;
		    tok = strtok_r(NULL, " \t\r\n", &save)) {
			char **grown;

			if (!px_tls_is_dns_name(tok[0] == '*' && tok[1] == '.' ?
			    tok + 2 : tok)) {
				px_cfg_error(e, c, "name \"%s\": expected a host "
				    "name or *.domain", tok);
				xmlFree(names);
				return -1;
			}
			if ((grown = realloc(nm->names, (nm->nnames + 1) *
			    sizeof(*grown))) == NULL ||
			    (grown[nm->nnames] = strdup(tok)) == NULL) {
				if (grown != NULL)
					nm->names = grown;
				px_cfg_error(e, c, "out of memory");
				xmlFree(names);
				return -1;
			}
			nm->names = grown;
			nm->nnames++;
		}
		xmlFree(names);
		if (nm->nnames == 0) {
			px_cfg_error(e, c, "<certificate> needs a name");
			return -1;
		}
		if ((nm->ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
			px_cfg_error(e, c, "out of memory");
			return -1;
		}
		if (px_tls_terminate_ctx(e, n, c, file, t, nm->ctx) == -1)
			return -1;
	}
	SSL_CTX_set_tlsext_servername_callback(t->ctx, px_tls_servername_cb);
	SSL_CTX_set_tlsext_servername_arg(t->ctx, t);
	return 0;
}

static int
px_tls_load_terminate(struct px_cfgerr *e, const xmlNode *n,
    const char *file, struct px_tls_ctx *t)
{
	static const char *const verifies[] = { "none", "optional", "required",
	    NULL };

	if (px_attr_choice(e, n, "verify", verifies, &t->client_verify) == -1)
		return -1;
	if ((t->tickets = calloc(1, sizeof(*t->tickets))) == NULL ||
	    px_tls_ticket_fill(t->tickets, 0) == -1) {
		px_cfg_error(e, n, "cannot make session ticket keys");
		return -1;
	}
	t->tickets->period_ms = 12 * 3600 * 1000;
	if (px_attr_duration(e, n, "ticket-rotate", false, 1000,
	    30ULL * 86400 * 1000, &t->tickets->period_ms) == -1)
		return -1;
	atomic_store(&t->tickets->next_ms, px_clock_ms() +
	    t->tickets->period_ms);
	if (t->client_verify != 0 &&
	    xmlHasProp(n, (const xmlChar *)"ca") == NULL) {
		px_cfg_error(e, n, "verify=\"%s\" needs ca= (the CAs that sign "
		    "client certificates)", verifies[t->client_verify]);
		return -1;
	}
	if (px_tls_terminate_ctx(e, n, n, file, t, t->ctx) == -1)
		return -1;
	return px_tls_load_named(e, n, file, t);
}

/* <sni name="*.example.test" alpn="h2 http/1.1" action="accept|deny">:
 * globs on the name the client asks for, and the protocols it may offer. */
static int
px_tls_load_passthrough(struct px_cfgerr *e, const xmlNode *n,
    struct px_tls_ctx *t)
{
	static const char *const yes_no[] = { "deny", "accept", NULL };
	const xmlNode *c;
	int no_sni = 0;

	t->passthrough = true;
	px_rules_init(&t->sni_rules, PX_DEFAULT_DENY, FNM_CASEFOLD);
	if (px_attr_choice(e, n, "no-sni", yes_no, &no_sni) == -1)
		return -1;
	t->no_sni_accept = no_sni == 1;
	for (c = n->children; c != NULL; c = c->next) {
		enum px_action act = PX_ACT_DENY;
		struct px_rule *r;
		char *alpn, *tok, *save = NULL;
		struct px_tls_alpn_set *set, *grown;

		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (xmlStrcmp(c->name, (const xmlChar *)"sni") != 0) {
			px_cfg_error(e, c, "<%s> does not belong in <tls "
			    "mode=\"passthrough\"> (only <sni>)",
			    (const char *)c->name);
			return -1;
		}
		if (px_attr_action(e, c, PX_ACTIONS_AD, true, &act) == -1 ||
		    (r = px_rules_add(e, &t->sni_rules, c, "name", true,
		    act)) == NULL)
			return -1;
		if ((alpn = px_attr(c, "alpn")) == NULL)
			continue;
		if ((grown = realloc(t->alpn_sets, (t->nalpn_sets + 1) *
		    sizeof(*grown))) == NULL) {
			xmlFree(alpn);
			px_cfg_error(e, c, "out of memory");
			return -1;
		}
		t->alpn_sets = grown;
		set = &t->alpn_sets[t->nalpn_sets++];
		memset(set, 0, sizeof(*set));
		r->arg = t->nalpn_sets;
		for (tok = strtok_r(alpn, " \t\r\n", &save); tok != NULL;
		    tok = strtok_r(NULL, " \t\r\n", &save)) {
			char **names = realloc(set->names, (set->n + 1) *
			    sizeof(*names));

			if (names == NULL || strlen(tok) >= PX_HELLO_ALPN_LEN ||
			    (names[set->n] = strdup(tok)) == NULL) {
				if (names != NULL)
					set->names = names;
				px_cfg_error(e, c, "alpn \"%s\": at most %d "
				    "bytes", tok, PX_HELLO_ALPN_LEN - 1);
				xmlFree(alpn);
				return -1;
			}
			set->names = names;
			set->n++;
		}
		xmlFree(alpn);
		if (set->n == 0) {
			px_cfg_error(e, c, "alpn=\"\": name at least one protocol");
			return -1;
		}
	}
	return 0;
}

/* Whether a rule's alpn= set matches what the client offers, read the
 * safe way for its action: an accept rule needs every protocol offered to
 * be in the set (a client that offers none, or more than the reader
 * keeps, does not match); a deny rule matches if any one is. */
static bool
px_tls_alpn_match(const struct px_tls_alpn_set *set, const struct px_hello *h,
    bool accept)
{
	unsigned i;
	size_t k;

	if (!accept) {
		for (i = 0; i < h->alpn_count && i < PX_HELLO_ALPN_MAX; i++)
			for (k = 0; k < set->n; k++)
				if (strcmp(h->alpn[i], set->names[k]) == 0)
					return true;
		return false;
	}
	if (h->alpn_count == 0 || h->alpn_count > PX_HELLO_ALPN_MAX)
		return false;
	for (i = 0; i < h->alpn_count; i++) {
		for (k = 0; k < set->n; k++)
			if (h->alpn[i][0] != '\0' &&
			    strcmp(h->alpn[i], set->names[k]) == 0)
				break;
		if (k == set->n)
			return false;
	}
	return true;
}

bool
px_tls_passthrough_allows(const struct px_tls_ctx *t, const struct px_hello *h,
    long *line)
{
	const struct px_rules *l = &t->sni_rules;
	size_t i, j;

	*line = 0;
	if (!h->has_sni)
		return t->no_sni_accept;
	for (i = 0; i < l->n; i++) {
		const struct px_rule *r = &l->r[i];
		bool hit = false;

		for (j = 0; j < r->npats && !hit; j++)
			hit = fnmatch(r->pats[j], h->sni, l->fnm_flags) == 0;
		if (!hit || (r->arg != 0 &&
		    !px_tls_alpn_match(&t->alpn_sets[r->arg - 1], h,
		    r->action == PX_ACT_ACCEPT)))
			continue;
		*line = r->line;
		return r->action == PX_ACT_ACCEPT;
	}
	return px_rules_default_action(l) == PX_ACT_ACCEPT;
}

bool
px_tls_is_passthrough(const struct px_tls_ctx *t)
{
	return t->passthrough;
}

static int px_tls_load_keybridge(struct px_cfgerr *e, const xmlNode *n,
    const char *file, struct px_tls_ctx *t);

/* implicit= and auth=, for analysers that start TLS themselves. */
static int
px_tls_load_starttls(struct px_cfgerr *e, const xmlNode *n,
    struct px_tls_ctx *t)
{
	static const char *const auths[] = { "required", "optional", NULL };
	bool implicit = false;
	int auth = 0;

	t->implicit = -1;
	if (xmlHasProp(n, (const xmlChar *)"implicit") != NULL) {
		if (px_attr_bool(e, n, "implicit", &implicit) == -1)
			return -1;
		t->implicit = implicit ? 1 : 0;
	}
	if (px_attr_choice(e, n, "auth", auths, &auth) == -1)
		return -1;
	t->auth_optional = auth == 1;
	return 0;
}

struct px_tls_ctx *
px_tls_load(struct px_cfgerr *e, const xmlNode *n, const char *file,
    const char *alpn)
{
	static const char *const sides[] = { "client", "server", NULL };
	static const char *const modes[] = { "terminate", "originate",
	    "keybridge", "passthrough", NULL };
	struct px_tls_ctx *t = NULL;
	int side = -1, mode = -1;
	size_t alen;

	if (px_tls_conn_index == -1)
		px_tls_conn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL,
		    NULL);
	if (px_tls_ctx_index == -1)
		px_tls_ctx_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL,
		    NULL);
	if (px_attr_choice(e, n, "side", sides, &side) == -1 ||
	    px_attr_choice(e, n, "mode", modes, &mode) == -1)
		return NULL;
	if (!(side == 0 && (mode == 0 || mode == 2 || mode == 3)) &&
	    !(side == 1 && mode == 1)) {
		px_cfg_error(e, n, "<tls side=\"%s\" mode=\"%s\">: this proxyd "
		    "terminates TLS from clients (side=\"client\" "
		    "mode=\"terminate\" or \"keybridge\"), polices it unopened "
		    "(side=\"client\" mode=\"passthrough\") and originates it "
		    "to servers "
		    "(side=\"server\" mode=\"originate\")",
		    side >= 0 ? sides[side] : "?", mode >= 0 ? modes[mode] : "?");
		return NULL;
	}
	if (mode == 3) {
		if ((t = calloc(1, sizeof(*t))) == NULL) {
			px_cfg_error(e, n, "out of memory");
			return NULL;
		}
		t->side = PX_TLS_CLIENT;
		t->id = atomic_fetch_add_explicit(&px_tls_ctx_ids, 1,
		    memory_order_relaxed) + 1;
		t->handshake_timeout_ms = 10000;
		if (px_tls_load_passthrough(e, n, t) == -1 ||
		    px_attr_duration(e, n, "handshake-timeout", false, 1,
		    3600 * 1000, &t->handshake_timeout_ms) == -1) {
			px_tls_free(t);
			return NULL;
		}
		return t;
	}
	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (t->ctx = SSL_CTX_new(side == 0 ? TLS_server_method() :
	    TLS_client_method())) == NULL) {
		px_cfg_error(e, n, "out of memory");
		goto fail;
	}
	t->side = side == 0 ? PX_TLS_CLIENT : PX_TLS_SERVER;
	t->id = atomic_fetch_add_explicit(&px_tls_ctx_ids, 1,
	    memory_order_relaxed) + 1;
	/* "a,b": the wire list, in the analyser's order of preference. */
	for (; alpn != NULL && *alpn != '\0'; alpn += alen + (alpn[alen] == ',')) {
		alen = strcspn(alpn, ",");
		if (alen == 0 || alen > 255 ||
		    t->alpn_len + 1 + alen > sizeof(t->alpn))
			break;
		t->alpn[t->alpn_len] = (unsigned char)alen;
		memcpy(t->alpn + t->alpn_len + 1, alpn, alen);
		t->alpn_len += (unsigned)alen + 1;
	}
	if ((mode == 2 ? px_tls_load_keybridge(e, n, file, t) : side == 0 ?
	    px_tls_load_terminate(e, n, file, t) :
	    px_tls_load_originate(e, n, file, t)) == -1)
		goto fail;
	t->handshake_timeout_ms = 10000;
	if ((side == 1 && px_tls_ctx_common(e, n, t->ctx) == -1) ||
	    px_attr_duration(e, n, "handshake-timeout", false, 1, 3600 * 1000,
	    &t->handshake_timeout_ms) == -1 ||
	    px_tls_load_starttls(e, n, t) == -1)
		goto fail;
	return t;
fail:
	px_tls_free(t);
	return NULL;
}

void
px_tls_free(struct px_tls_ctx *t)
{
	size_t i, k;

	if (t == NULL)
		return;
	for (i = 0; i < t->nnamed; i++) {
		SSL_CTX_free(t->named[i].ctx);
		for (k = 0; k < t->named[i].nnames; k++)
			free(t->named[i].names[k]);
		free(t->named[i].names);
	}
	free(t->named);
	for (i = 0; i < t->nalpn_sets; i++) {
		for (k = 0; k < t->alpn_sets[i].n; k++)
			free(t->alpn_sets[i].names[k]);
		free(t->alpn_sets[i].names);
	}
	free(t->alpn_sets);
	if (t->tickets != NULL)
		OPENSSL_cleanse(t->tickets, sizeof(*t->tickets));
	free(t->tickets);
	if (t->passthrough)
		px_rules_free(&t->sni_rules);
	for (i = 0; i < 2; i++) {
		X509_free(t->kb_ca[i]);
		EVP_PKEY_free(t->kb_ca_key[i]);
	}
	EVP_PKEY_free(t->kb_key);
	SSL_CTX_free(t->ctx);
	free(t->sni);
	free(t);
}

enum px_tls_side
px_tls_side(const struct px_tls_ctx *t)
{
	return t->side;
}

uint64_t
px_tls_handshake_timeout(const struct px_tls_ctx *t)
{
	return t->handshake_timeout_ms;
}

uint64_t
px_tls_ctx_id(const struct px_tls_ctx *t)
{
	return t->id;
}

int
px_tls_implicit(const struct px_tls_ctx *t)
{
	return t->passthrough ? 1 : t->implicit;
}

bool
px_tls_auth_optional(const struct px_tls_ctx *t)
{
	return t->auth_optional;
}

const char *
px_tls_server_name(const struct px_tls_ctx *t, const char *client_sni)
{
	if (t->sni != NULL)
		return t->sni;
	return t->sni_forward ? client_sni : NULL;
}

/* ---- the per-worker session cache --------------------------------------- */

void
px_tls_worker_init(struct px_tls_worker *tw, struct px_tls_counters *n)
{
	memset(tw, 0, sizeof(*tw));
	tw->n = n;
}

void
px_tls_worker_free(struct px_tls_worker *tw)
{
	size_t i;

	for (i = 0; i < PX_TLS_CACHE_SIZE; i++) {
		SSL_SESSION_free(tw->cache[i].session);
		tw->cache[i].session = NULL;
	}
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
	return ce->session != NULL && ce->ctx_id == tc->ctx_id &&
	    strcmp(ce->name, tc->name) == 0 &&
	    memcmp(&ce->addr, &tc->addr, sizeof(ce->addr)) == 0;
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

/* Keeps the newest session per server (the key of tc), the least recently
 * used one giving way. Takes sess's reference (returns 1). */
static int
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
	if (tc == NULL || tc->tw == NULL || tc->no_cache)
		return 0;
	if ((ce = px_tls_cache_find(tc->tw, tc)) == NULL) {
		ce = &tc->tw->cache[0];
		for (i = 1; i < PX_TLS_CACHE_SIZE; i++)
			if (tc->tw->cache[i].used < ce->used)
				ce = &tc->tw->cache[i];
	}
	SSL_SESSION_free(ce->session);
	ce->session = sess;
	ce->ctx_id = tc->ctx_id;
	memcpy(&ce->addr, &tc->addr, sizeof(ce->addr));
	memcpy(ce->name, tc->name, sizeof(ce->name));
	ce->used = ++tc->tw->clock;
	return 1;
}

/* ---- the transform ------------------------------------------------------ */

static void
px_tls_inc(atomic_uint_fast64_t *c)
{
	atomic_store_explicit(c, atomic_load_explicit(c,
	    memory_order_relaxed) + 1, memory_order_relaxed);
}

/* Who the client proved to be, for the log (verify= on a terminating
 * side): the subject, and whether its chain verified. */
static void
px_tls_log_client_cert(const struct px_tls_conn *tc)
{
	X509 *x = SSL_get0_peer_certificate(tc->ssl);
	char subject[256];
	long v = SSL_get_verify_result(tc->ssl);

	if (x == NULL) {
		px_log(LOG_INFO, tc->session_id, "tls-client-cert none");
		return;
	}
	X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof(subject));
	px_log(LOG_INFO, tc->session_id, "tls-client-cert subject=\"%s\" "
	    "verified=%s%s%s", subject, v == X509_V_OK ? "yes" : "no",
	    v == X509_V_OK ? "" : " reason=", v == X509_V_OK ? "" :
	    X509_verify_cert_error_string(v));
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
	px_tls_inc(&tc->tw->n->handshakes[tc->side]
	    [SSL_session_reused(tc->ssl) ? 1 : 0]);
	if (tc->side == PX_TLS_CLIENT && tc->verify_client)
		px_tls_log_client_cert(tc);
	if (tc->side == PX_TLS_SERVER && tc->verify_optional &&
	    (v = SSL_get_verify_result(tc->ssl)) != X509_V_OK) {
		px_tls_inc(&tc->tw->n->unverified);
		px_log(LOG_NOTICE, tc->session_id, "tls-server-unverified "
		    "name=%s reason=\"%s\" (verify=\"optional\")",
		    tc->name[0] != '\0' ? tc->name : "-",
		    X509_verify_cert_error_string(v));
	}
}

static void
px_tls_set_failure(struct px_tls_conn *tc, enum px_tls_failure f)
{
	if (tc->failure != PX_TLS_OK)
		return;
	tc->failure = f;
	if (tc->tw != NULL && (unsigned)f < PX_TLS_FAILURES)
		px_tls_inc(&tc->tw->n->failures[tc->side][f]);
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
		return 0;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (saved == 0 && (tc->done || tc->side == PX_TLS_CLIENT))
			return 0;	/* a client that only connected: EOF */
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
		return 0;
	}
	if (px_tls_failed(tc, rc, want) == 0)
		errno = ECONNRESET;	/* an orderly end inside a handshake */
	return -1;
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
		return 0;	/* only TLS's own messages: still clean */
	default:
		ERR_clear_error();
		return -1;
	}
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
	free(tc);
}

static const struct px_conn_transform px_tls_transform = {
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
	struct px_tls_cache_entry *ce;
	const struct sockaddr *a = p->addr;
	X509_VERIFY_PARAM *param = SSL_get0_param(tc->ssl);

	if (a != NULL)
		memcpy(&tc->addr, a, px_sockaddr_len(a));
	if (p->name != NULL && p->name[0] != '\0') {
		snprintf(tc->name, sizeof(tc->name), "%s", p->name);
		if (SSL_set_tlsext_host_name(tc->ssl, tc->name) != 1 ||
		    SSL_set1_host(tc->ssl, tc->name) != 1)
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
	    (ce = px_tls_cache_find(tc->tw, tc)) != NULL) {
		(void)SSL_set_session(tc->ssl, ce->session);
		ce->used = ++tc->tw->clock;
	}
	SSL_set_connect_state(tc->ssl);
	return 0;
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
	if (t->keybridge)
		tc->kb = t;
	tc->session_id = p != NULL ? p->session_id : 0;
	tc->tw = p != NULL ? p->tw : NULL;
	if ((tc->ssl = SSL_new(t->ctx)) == NULL ||
	    SSL_set_fd(tc->ssl, c->fd) != 1 ||
	    SSL_set_ex_data(tc->ssl, px_tls_conn_index, tc) != 1)
		goto fail;
	if (p != NULL && p->verify_later && t->side == PX_TLS_SERVER) {
		SSL_set_verify(tc->ssl, SSL_VERIFY_PEER, px_tls_verify_optional);
		tc->verify_optional = false;	/* the keybridge says it */
	}
	if (t->side == PX_TLS_CLIENT)
		SSL_set_accept_state(tc->ssl);
	else if (px_tls_connect_setup(tc, p != NULL ? p :
	    &(struct px_tls_peer){ 0 }) == -1)
		goto fail;
	px_conn_set_transform(c, &px_tls_transform, tc);
	return 0;
fail:
	ERR_clear_error();
	SSL_free(tc->ssl);
	free(tc);
	return -1;
}

/* ---- keybridge ---------------------------------------------------------- */

/* A CA certificate and its key from PEM files: a CA, matching, valid now. */
static int
px_tls_load_ca_pair(struct px_cfgerr *e, const xmlNode *n, const char *file,
    const char *cert_attr, const char *key_attr, X509 **cert, EVP_PKEY **key)
{
	char *cp = NULL, *kp = NULL, why[200];
	FILE *f;
	int rc = -1;

	if ((cp = px_tls_file(e, n, file, cert_attr, "keybridge")) == NULL ||
	    (kp = px_tls_file(e, n, file, key_attr, "keybridge")) == NULL)
		goto out;
	ERR_clear_error();
	if ((f = fopen(cp, "r")) != NULL) {
		*cert = PEM_read_X509(f, NULL, NULL, NULL);
		fclose(f);
	}
	if (*cert == NULL) {
		px_tls_reason(why, sizeof(why), "");
		px_cfg_error(e, n, "%s=\"%s\": not a PEM certificate (%s)",
		    cert_attr, cp, why);
		goto out;
	}
	if ((f = fopen(kp, "r")) != NULL) {
		*key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
		fclose(f);
	}
	if (*key == NULL) {
		px_tls_reason(why, sizeof(why), "");
		px_cfg_error(e, n, "%s=\"%s\": not a PEM private key (%s)",
		    key_attr, kp, why);
		goto out;
	}
	if (X509_check_ca(*cert) < 1) {
		px_cfg_error(e, n, "%s=\"%s\" is not a CA (basicConstraints "
		    "CA:TRUE)", cert_attr, cp);
		goto out;
	}
	if (X509_check_private_key(*cert, *key) != 1) {
		ERR_clear_error();
		px_cfg_error(e, n, "%s=\"%s\" does not match %s=\"%s\"",
		    key_attr, kp, cert_attr, cp);
		goto out;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(*cert)) < 0) {
		px_cfg_error(e, n, "%s=\"%s\" has expired", cert_attr, cp);
		goto out;
	}
	rc = 0;
out:
	ERR_clear_error();
	free(cp);
	free(kp);
	return rc;
}

static int
px_tls_add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	if ((ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value)) == NULL)
		return -1;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok == 1 ? 0 : -1;
}

/* A leaf for the subject and names of `server`, with the keybridge's key,
 * signed by ca (valid from an hour ago until the server's certificate or
 * the CA expires, whichever is first). NULL on failure. */
static X509 *
px_tls_mint(X509 *server, X509 *ca, EVP_PKEY *ca_key, EVP_PKEY *key)
{
	X509 *x = X509_new();
	BIGNUM *serial = BN_new();
	GENERAL_NAMES *san;
	const ASN1_TIME *until = X509_get0_notAfter(server);

	if (x == NULL || serial == NULL || X509_set_version(x, 2) != 1 ||
	    BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
	    BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) == NULL ||
	    X509_set_issuer_name(x, X509_get_subject_name(ca)) != 1 ||
	    X509_set_subject_name(x, X509_get_subject_name(server)) != 1 ||
	    X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL)
		goto fail;
	if (ASN1_TIME_compare(until, X509_get0_notAfter(ca)) > 0)
		until = X509_get0_notAfter(ca);
	if (X509_set1_notAfter(x, until) != 1 || X509_set_pubkey(x, key) != 1)
		goto fail;
	if ((san = X509_get_ext_d2i(server, NID_subject_alt_name, NULL,
	    NULL)) != NULL) {
		int ok = X509_add1_ext_i2d(x, NID_subject_alt_name, san, 0, 0);

		GENERAL_NAMES_free(san);
		if (ok != 1)
			goto fail;
	}
	if (px_tls_add_ext(x, ca, NID_basic_constraints, "critical,CA:FALSE") ||
	    px_tls_add_ext(x, ca, NID_key_usage,
	    "critical,digitalSignature,keyEncipherment") ||
	    px_tls_add_ext(x, ca, NID_ext_key_usage, "serverAuth"))
		goto fail;
	/* Helps clients find the issuer; a CA without a key id goes without. */
	if (X509_get0_subject_key_id(ca) != NULL &&
	    px_tls_add_ext(x, ca, NID_authority_key_identifier, "keyid") == -1)
		goto fail;
	if (X509_sign(x, ca_key, EVP_sha256()) == 0)
		goto fail;
	BN_free(serial);
	return x;
fail:
	ERR_clear_error();
	BN_free(serial);
	X509_free(x);
	return NULL;
}

/* The client's name, read from its ClientHello before the handshake is
 * held there (SSL_CLIENT_HELLO_RETRY) until the server has shown its
 * certificate. */
static int
px_tls_kb_hello_cb(SSL *ssl, int *alert, void *arg)
{
	struct px_tls_conn *tc = SSL_get_ex_data(ssl, px_tls_conn_index);
	const unsigned char *p;
	size_t len, nl;

	(void)alert; (void)arg;
	if (tc == NULL || tc->kb_ready)
		return SSL_CLIENT_HELLO_SUCCESS;
	tc->name[0] = '\0';
	if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p,
	    &len) == 1 && len >= 5 && (size_t)((p[0] << 8) | p[1]) == len - 2 &&
	    p[2] == TLSEXT_NAMETYPE_host_name &&
	    (nl = (size_t)((p[3] << 8) | p[4])) + 5 <= len &&
	    nl < sizeof(tc->name)) {
		memcpy(tc->name, p + 5, nl);
		tc->name[nl] = '\0';
		if (!px_tls_is_dns_name(tc->name))
			tc->name[0] = '\0';
	}
	tc->kb_waiting = true;
	return SSL_CLIENT_HELLO_RETRY;
}

/* A CA nobody trusts, made at load when untrusted-ca-cert is not given:
 * a leaf it signs shows the client that something is wrong. */
static int
px_tls_untrusted_ca(struct px_tls_ctx *t)
{
	X509 *x = X509_new();
	X509_NAME *name;
	EVP_PKEY *k = EVP_EC_gen("P-256");

	if (x == NULL || k == NULL || X509_set_version(x, 2) != 1 ||
	    (name = X509_get_subject_name(x)) == NULL ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)"proxyd keybridge: untrusted server", -1,
	    -1, 0) != 1 || X509_set_issuer_name(x, name) != 1 ||
	    X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(x), 3650L * 86400) == NULL ||
	    X509_set_pubkey(x, k) != 1 ||
	    px_tls_add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE") ||
	    px_tls_add_ext(x, x, NID_key_usage, "critical,keyCertSign") ||
	    px_tls_add_ext(x, x, NID_subject_key_identifier, "hash") ||
	    X509_sign(x, k, EVP_sha256()) == 0) {
		X509_free(x);
		EVP_PKEY_free(k);
		return -1;
	}
	t->kb_ca[1] = x;
	t->kb_ca_key[1] = k;
	return 0;
}

static int
px_tls_load_keybridge(struct px_cfgerr *e, const xmlNode *n,
    const char *file, struct px_tls_ctx *t)
{
	t->keybridge = true;
	t->kb_cache = 1000;
	if (px_tls_load_ca_pair(e, n, file, "ca-cert", "ca-key", &t->kb_ca[0],
	    &t->kb_ca_key[0]) == -1)
		return -1;
	if (xmlHasProp(n, (const xmlChar *)"untrusted-ca-cert") != NULL ||
	    xmlHasProp(n, (const xmlChar *)"untrusted-ca-key") != NULL) {
		if (px_tls_load_ca_pair(e, n, file, "untrusted-ca-cert",
		    "untrusted-ca-key", &t->kb_ca[1], &t->kb_ca_key[1]) == -1)
			return -1;
	} else if (px_tls_untrusted_ca(t) == -1) {
		px_cfg_error(e, n, "cannot make the untrusted CA");
		return -1;
	}
	if (px_attr_uint(e, n, "cache", 1, 1000000, &t->kb_cache) == -1)
		return -1;
	/* One key pair for every leaf: minting is then one signature. */
	if ((t->kb_key = EVP_EC_gen("P-256")) == NULL) {
		ERR_clear_error();
		px_cfg_error(e, n, "cannot make the keybridge key (EC P-256)");
		return -1;
	}
	if (px_tls_ctx_common(e, n, t->ctx) == -1)
		return -1;
	SSL_CTX_set_client_hello_cb(t->ctx, px_tls_kb_hello_cb, NULL);
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
	/* Tickets would resume with a leaf never checked against the
	 * server of the day: each connection shows the current one. */
	SSL_CTX_set_options(t->ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_num_tickets(t->ctx, 0);
	if (t->alpn_len != 0)
		SSL_CTX_set_alpn_select_cb(t->ctx, px_tls_alpn_cb, t);
	return 0;
}

bool
px_tls_is_keybridge(const struct px_tls_ctx *t)
{
	return t->keybridge;
}

bool
px_tls_keybridge_waiting(const struct px_conn *c, const char **name)
{
	const struct px_tls_conn *tc = c->tf_state;

	if (c->tf != &px_tls_transform || tc->kb == NULL || !tc->kb_waiting)
		return false;
	*name = tc->name;
	return true;
}

/* The worker's leaf for (t, server certificate, CA), or NULL. */
static struct px_tls_leaf *
px_tls_leaf_find(struct px_tls_worker *tw, const struct px_tls_ctx *t,
    const unsigned char *md, bool untrusted)
{
	size_t i;

	for (i = 0; i < tw->nleaves; i++) {
		struct px_tls_leaf *l = &tw->leaves[i];

		if (l->ctx_id == t->id && l->untrusted == untrusted &&
		    memcmp(l->server_sha256, md, 32) == 0)
			return l;
	}
	return NULL;
}

/* A slot for a new leaf of t: appended while t has fewer than its cache=,
 * else its least recently used one. */
static struct px_tls_leaf *
px_tls_leaf_slot(struct px_tls_worker *tw, const struct px_tls_ctx *t)
{
	struct px_tls_leaf *oldest = NULL, *grown;
	size_t i, mine = 0;

	for (i = 0; i < tw->nleaves; i++)
		if (tw->leaves[i].ctx_id == t->id) {
			mine++;
			if (oldest == NULL || tw->leaves[i].used < oldest->used)
				oldest = &tw->leaves[i];
		}
	/* Within its share, a new slot; but past twice that in all, the
	 * worker's least recently used leaf goes, whoever's it is: those of
	 * a context a reload replaced are never used again, so they go
	 * first. */
	if (mine < t->kb_cache) {
		oldest = NULL;
		if (tw->nleaves >= 2 * t->kb_cache) {
			for (i = 0; i < tw->nleaves; i++)
				if (oldest == NULL ||
				    tw->leaves[i].used < oldest->used)
					oldest = &tw->leaves[i];
		}
	}
	if (oldest != NULL) {
		X509_free(oldest->x509);
		oldest->x509 = NULL;
		return oldest;
	}
	if ((grown = realloc(tw->leaves, (tw->nleaves + 1) *
	    sizeof(*grown))) == NULL)
		return NULL;
	tw->leaves = grown;
	memset(&grown[tw->nleaves], 0, sizeof(*grown));
	return &grown[tw->nleaves++];
}

int
px_tls_keybridge_present(struct px_conn *client, const struct px_conn *server,
    char *how, size_t howsize, const char **why)
{
	struct px_tls_conn *tc = client->tf_state;
	const struct px_tls_conn *sc = server->tf_state;
	const struct px_tls_ctx *t = tc->kb;
	struct px_tls_worker *tw = tc->tw;
	struct px_tls_leaf *leaf;
	unsigned char md[32];
	unsigned mdlen = 0;
	X509 *cert;
	long v;
	bool untrusted, minted = false;

	*why = "not a keybridge pair";
	if (t == NULL || tw == NULL || server->tf != &px_tls_transform)
		return -1;
	*why = "the server sent no certificate";
	if ((cert = SSL_get0_peer_certificate(sc->ssl)) == NULL)
		return -1;
	v = SSL_get_verify_result(sc->ssl);
	untrusted = v != X509_V_OK;
	*why = "out of memory";
	if (X509_digest(cert, EVP_sha256(), md, &mdlen) != 1 || mdlen != 32)
		return -1;
	if ((leaf = px_tls_leaf_find(tw, t, md, untrusted)) == NULL) {
		X509 *x = px_tls_mint(cert, t->kb_ca[untrusted],
		    t->kb_ca_key[untrusted], t->kb_key);

		*why = "cannot mint a leaf";
		if (x == NULL)
			return -1;
		if ((leaf = px_tls_leaf_slot(tw, t)) == NULL) {
			X509_free(x);
			*why = "out of memory";
			return -1;
		}
		leaf->ctx_id = t->id;
		memcpy(leaf->server_sha256, md, 32);
		leaf->untrusted = untrusted;
		leaf->x509 = x;
		minted = true;
	}
	leaf->used = ++tw->clock;
	px_tls_inc(&tw->n->keybridge[minted ? 0 : 1]);
	px_tls_inc(&tw->n->keybridge_ca[untrusted ? 1 : 0]);
	*why = "cannot use the leaf";
	if (SSL_use_certificate(tc->ssl, leaf->x509) != 1 ||
	    SSL_use_PrivateKey(tc->ssl, t->kb_key) != 1 ||
	    SSL_add1_chain_cert(tc->ssl, t->kb_ca[untrusted]) != 1) {
		ERR_clear_error();
		return -1;
	}
	tc->kb_waiting = false;
	tc->kb_ready = true;
	snprintf(how, howsize, "server-cert=%s%s%s leaf=%s ca=%s",
	    untrusted ? "unverified" : "verified", untrusted ? " reason=" : "",
	    untrusted ? X509_verify_cert_error_string(v) : "",
	    minted ? "minted" : "cached", untrusted ? "untrusted" : "trusted");
	return 0;
}

bool
px_tls_verified(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf_state;

	return c->tf == &px_tls_transform &&
	    SSL_get_verify_result(tc->ssl) == X509_V_OK;
}

enum px_tls_failure
px_tls_failure(const struct px_conn *c)
{
	return c->tf == &px_tls_transform ?
	    ((const struct px_tls_conn *)c->tf_state)->failure : PX_TLS_OK;
}

const char *
px_tls_client_sni(const struct px_conn *c)
{
	const struct px_tls_conn *tc = c->tf_state;

	if (c->tf != &px_tls_transform || tc->side != PX_TLS_CLIENT)
		return NULL;
	return SSL_get_servername(tc->ssl, TLSEXT_NAMETYPE_host_name);
}
