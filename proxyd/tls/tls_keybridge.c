/* Keybridge (see tls.h): the server's certificate seen first, a leaf for
 * the same names minted per server certificate and cached per worker. */
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
	struct px_tls_dest *d;
	const unsigned char *p;
	size_t len, nl;

	(void)arg;
	if (tc == NULL || tc->kb_ready)
		return SSL_CLIENT_HELLO_SUCCESS;
	/* Before the server is connected: a refused client costs it none. */
	if (px_tls_fp_hello(ssl, alert) != SSL_CLIENT_HELLO_SUCCESS)
		return SSL_CLIENT_HELLO_ERROR;
	if ((d = px_tls_dest(tc)) == NULL) {
		*alert = SSL_AD_INTERNAL_ERROR;
		return SSL_CLIENT_HELLO_ERROR;
	}
	d->name[0] = '\0';
	if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p,
	    &len) == 1 && len >= 5 && (size_t)((p[0] << 8) | p[1]) == len - 2 &&
	    p[2] == TLSEXT_NAMETYPE_host_name &&
	    (nl = (size_t)((p[3] << 8) | p[4])) + 5 <= len &&
	    nl < sizeof(d->name)) {
		memcpy(d->name, p + 5, nl);
		d->name[nl] = '\0';
		if (!px_tls_is_dns_name(d->name))
			d->name[0] = '\0';
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

int
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
	*name = tc->dest != NULL ? tc->dest->name : "";
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
	if (tc->n != NULL) {
		px_tls_inc(&tc->n->keybridge[minted ? 0 : 1]);
		px_tls_inc(&tc->n->keybridge_ca[untrusted ? 1 : 0]);
	}
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
