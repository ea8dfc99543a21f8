/* TLS contexts from <tls> elements, built at config load (see tls.h):
 * certificates, CAs, versions and ciphers, SNI-named certificates,
 * ticket keys, passthrough rules; read-only once the workers have them. */
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

#include "cfgread.h"
#include "bucket.h"
#include "conn.h"
#include "log.h"
#include "parse.h"
#include "rules.h"
#include "tls_hello.h"
#include "tls_int.h"

/* Context ids: the pool and the session cache tell contexts apart. */
static atomic_uint_fast64_t px_tls_ctx_ids;

static const char *const px_tls_version_names[] = {
	"1.0", "1.1", "1.2", "1.3", NULL,
};
static const int px_tls_version_ids[] = {
	TLS1_VERSION, TLS1_1_VERSION, TLS1_2_VERSION, TLS1_3_VERSION,
};

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
int
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
char *
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
bool
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
int
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
int
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
px_tls_fp_hello_cb(SSL *ssl, int *alert, void *arg)
{
	(void)arg;
	return px_tls_fp_hello(ssl, alert);
}

static int
px_tls_load_terminate(struct px_cfgerr *e, const xmlNode *n,
    const char *file, struct px_tls_ctx *t)
{
	static const char *const verifies[] = { "none", "optional", "required",
	    NULL };

	if (px_attr_choice(e, n, "verify", verifies, &t->client_verify) == -1)
		return -1;
	{
		static const char *const ids[] = { "none", "cn", "email",
		    "dns", NULL };
		char *d;

		if (px_attr_choice(e, n, "identity", ids,
		    &t->client_identity) == -1)
			return -1;
		if (t->client_identity != PX_TLS_ID_NONE &&
		    t->client_verify == 0) {
			px_cfg_error(e, n, "identity=\"%s\" needs verify= "
			    "(required or optional): only a verified "
			    "certificate names a user", ids[t->client_identity]);
			return -1;
		}
		if ((d = px_attr(n, "identity-domain")) != NULL) {
			if (t->client_identity != PX_TLS_ID_EMAIL ||
			    d[0] == '\0' || strchr(d, '@') != NULL) {
				px_cfg_error(e, n, "identity-domain=\"%s\": "
				    "a domain, with identity=\"email\" only",
				    d);
				xmlFree(d);
				return -1;
			}
			t->identity_domain = strdup(d);
			xmlFree(d);
		}
	}
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
	/* The <fingerprint> rules, on the JA4 px_tls_msg_cb has taken; it
	 * runs before the name picks a <certificate>'s context, so this one
	 * context's callback sees every hello. */
	SSL_CTX_set_client_hello_cb(t->ctx, px_tls_fp_hello_cb, NULL);
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
 * keeps, does not match); a deny rule matches if any one is, or if the
 * client offers more than the reader keeps (the one it denies could be
 * among those past the eighth). */
static bool
px_tls_alpn_match(const struct px_tls_alpn_set *set, const struct px_hello *h,
    bool accept)
{
	unsigned i;
	size_t k;

	if (!accept) {
		if (h->alpn_count > PX_HELLO_ALPN_MAX)
			return true;
		for (i = 0; i < h->alpn_count; i++)
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
    const struct px_rule **hit)
{
	const struct px_rules *l = &t->sni_rules;
	size_t i, j;

	*hit = NULL;
	if (!h->has_sni)
		return t->no_sni_accept;
	for (i = 0; i < l->n; i++) {
		const struct px_rule *r = &l->r[i];
		bool match = false;

		for (j = 0; j < r->npats && !match; j++)
			match = fnmatch(r->pats[j], h->sni, l->fnm_flags) == 0;
		if (!match || (r->arg != 0 &&
		    !px_tls_alpn_match(&t->alpn_sets[r->arg - 1], h,
		    r->action == PX_ACT_ACCEPT)))
			continue;
		*hit = r;
		return r->action == PX_ACT_ACCEPT;
	}
	return px_rules_default_action(l) == PX_ACT_ACCEPT;
}

bool
px_tls_is_passthrough(const struct px_tls_ctx *t)
{
	return t->passthrough;
}

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
	free(t->identity_domain);
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
