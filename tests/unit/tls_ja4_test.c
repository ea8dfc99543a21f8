/* Unit tests for proxyd/tls/tls.c's JA4 of a client's ClientHello, on a
 * real socketpair: an OpenSSL client in the test sends its hello to a
 * terminating px_tls conn. The fingerprint has one home, the session's
 * buffer (px_tls_peer.ja4): the conn writes it there and px_tls_ja4 reads
 * it there, keeping no copy of its own; without that buffer the hello is
 * not fingerprinted, and <fingerprint> rules with nowhere to put what
 * they judge make px_tls_attach fail rather than let the client by. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "cfgread.h"
#include "conn.h"
#include "fingerprint.h"
#include "ja4.h"
#include "tls.h"

struct fixture {
	char		 dir[64];
	struct px_tls_ctx *ctx;
	struct event_base *base;
	int		 sv[2];		/* sv[0]: proxyd's conn; sv[1]: the client's */
	struct px_conn	 c;
	bool		 conn_open;
	SSL_CTX		*cctx;
	SSL		*cssl;
	char		 sent[PX_JA4_LEN + 1];	/* the JA4 of what it sent */
};

static void
noop(struct px_conn *c, void *arg)
{
	(void)c; (void)arg;
}

/* The client's own view of its hello: the JA4 of the message it wrote. */
static void
client_msg_cb(int write_p, int version, int content_type, const void *buf,
    size_t len, SSL *ssl, void *arg)
{
	struct fixture *f = arg;
	const uint8_t *m = buf;

	(void)version; (void)ssl;
	if (write_p && content_type == SSL3_RT_HANDSHAKE && len >= 4 &&
	    m[0] == SSL3_MT_CLIENT_HELLO && f->sent[0] == '\0')
		assert_true(px_ja4_hello(m, len, f->sent));
}

/* A self-signed P-256 certificate and its key, as PEM files in dir. */
static void
write_cert(const char *dir)
{
	char path[128];
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *nm;
	FILE *fp;

	assert_non_null(k);
	assert_non_null(x);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	nm = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC,
	    (const unsigned char *)"localhost", -1, -1, 0);
	X509_set_issuer_name(x, nm);
	assert_true(X509_sign(x, k, EVP_sha256()) > 0);
	snprintf(path, sizeof(path), "%s/cert.pem", dir);
	assert_non_null(fp = fopen(path, "w"));
	assert_int_equal(PEM_write_X509(fp, x), 1);
	fclose(fp);
	snprintf(path, sizeof(path), "%s/key.pem", dir);
	assert_non_null(fp = fopen(path, "w"));
	assert_int_equal(PEM_write_PrivateKey(fp, k, NULL, NULL, 0, NULL,
	    NULL), 1);
	fclose(fp);
	X509_free(x);
	EVP_PKEY_free(k);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct px_cfgerr e;
	char xml[512], file[96];
	xmlDoc *doc;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/tls_ja4_test.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	write_cert(f->dir);
	snprintf(file, sizeof(file), "%s/t.xml", f->dir);
	snprintf(xml, sizeof(xml), "<tls side=\"client\" mode=\"terminate\" "
	    "cert=\"%s/cert.pem\" key=\"%s/key.pem\"/>", f->dir, f->dir);
	doc = xmlReadMemory(xml, (int)strlen(xml), file, NULL, XML_PARSE_NONET);
	assert_non_null(doc);
	memset(&e, 0, sizeof(e));
	e.file = file;
	f->ctx = px_tls_load(&e, xmlDocGetRootElement(doc), file, NULL);
	xmlFreeDoc(doc);
	if (f->ctx == NULL)
		fail_msg("px_tls_load: %s", e.first);
	assert_non_null(f->base = event_base_new());
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    f->sv), 0);
	assert_int_equal(px_conn_open(&f->c, f->base, f->sv[0], noop, noop,
	    f), 0);
	f->conn_open = true;
	assert_non_null(f->cctx = SSL_CTX_new(TLS_client_method()));
	assert_non_null(f->cssl = SSL_new(f->cctx));
	SSL_set_msg_callback(f->cssl, client_msg_cb);
	SSL_set_msg_callback_arg(f->cssl, f);
	SSL_set_tlsext_host_name(f->cssl, "localhost");
	assert_int_equal(SSL_set_fd(f->cssl, f->sv[1]), 1);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	char path[128];

	if (f->conn_open)
		px_conn_close(&f->c);
	SSL_free(f->cssl);
	SSL_CTX_free(f->cctx);
	close(f->sv[0]);
	close(f->sv[1]);
	event_base_free(f->base);
	px_tls_free(f->ctx);
	snprintf(path, sizeof(path), "%s/cert.pem", f->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/key.pem", f->dir);
	unlink(path);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* The client sends its hello (and waits for an answer it will not read);
 * the conn reads it. */
static void
hello(struct fixture *f)
{
	int rc;

	rc = SSL_connect(f->cssl);
	assert_int_equal(rc, -1);
	assert_int_equal(SSL_get_error(f->cssl, rc), SSL_ERROR_WANT_READ);
	assert_int_not_equal(f->sent[0], '\0');
	/* Done, or waiting for the client's next flight: either way past
	 * the hello. */
	rc = px_conn_handshake(&f->c);
	assert_true(rc == 0 || errno == EAGAIN);
}

/* The JA4 lands in the session's buffer, and the conn reads it from
 * there: the same bytes at the same address, no second copy. */
static void
test_one_copy(void **state)
{
	struct fixture *f = *state;
	char buf[PX_JA4_LEN + 1] = "";
	struct px_fp_rules none = { 0 };
	struct px_tls_peer peer = { .session_id = 1, .fp = &none, .ja4 = buf };

	assert_int_equal(px_tls_attach(&f->c, f->ctx, &peer), 0);
	hello(f);
	assert_string_equal(buf, f->sent);
	assert_ptr_equal(px_tls_ja4(&f->c), buf);
	/* One home: what the session's buffer says is what the conn says. */
	buf[0] = 'x';
	assert_string_equal(px_tls_ja4(&f->c), buf);
}

/* The session kept an earlier hello's (a second AUTH TLS): it stays. */
static void
test_first_kept(void **state)
{
	struct fixture *f = *state;
	char buf[PX_JA4_LEN + 1] = "t13d0000h2_000000000000_000000000000";
	struct px_tls_peer peer = { .session_id = 1, .ja4 = buf };

	assert_int_equal(px_tls_attach(&f->c, f->ctx, &peer), 0);
	hello(f);
	assert_string_equal(buf, "t13d0000h2_000000000000_000000000000");
}

/* No buffer (a server side, an FTPS data conn): not fingerprinted, and
 * the conn keeps nothing of the hello. */
static void
test_no_buffer(void **state)
{
	struct fixture *f = *state;
	struct px_tls_peer peer = { .session_id = 1 };

	assert_int_equal(px_tls_attach(&f->c, f->ctx, &peer), 0);
	hello(f);
	assert_string_equal(px_tls_ja4(&f->c), "");
}

/* Rules to judge and no buffer for what they judge (the session's could
 * not be made): the conn is refused, not let through unjudged. */
static void
test_rules_need_buffer(void **state)
{
	struct fixture *f = *state;
	struct px_fp_rule r;
	struct px_fp_rules rules = { .r = &r, .n = 1 };
	struct px_tls_peer peer = { .session_id = 1, .fp = &rules };

	memset(&r, 0, sizeof(r));
	assert_int_equal(px_tls_attach(&f->c, f->ctx, &peer), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_first_kept, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_no_buffer, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_rules_need_buffer, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
