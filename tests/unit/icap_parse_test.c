/* Unit tests for proxyd/scan/icap_parse.c: the ICAP response head and
 * the HTTP status it encapsulates, with c-icap 0.5.10's own answers as
 * fixtures, every prefix of them, and random damage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>

#include "icap.h"
#include "scan.h"

/* c-icap 0.5.10 virus_scan, EICAR in a RESPMOD (its body cut). */
static const char infected[] =
    "ICAP/1.0 200 OK\r\nServer: C-ICAP/0.5.10\r\nConnection: keep-alive\r\n"
    "ISTag: \"CI0001-L5CkDhq+qWNs+PZ5DxxXsAAA\"\r\n"
    "X-Infection-Found: Type=0; Resolution=2; Threat=eicar.com.UNOFFICIAL;\r\n"
    "X-Violations-Found: 1\r\n\t-\r\n\teicar.com.UNOFFICIAL\r\n\t0\r\n\t0\r\n"
    "Encapsulated: res-hdr=0, res-body=161\r\n\r\n"
    "HTTP/1.0 403 Forbidden\r\nServer: C-ICAP\r\nConnection: close\r\n"
    "Content-Type: text/html\r\nContent-Language: en\r\n"
    "Via: ICAP/1.0 vm (C-ICAP/0.5.10 Antivirus service )\r\n\r\n"
    "1c7\r\n<html>";

/* Its OPTIONS answer. */
static const char options[] =
    "ICAP/1.0 200 OK\r\nMethods: RESPMOD, REQMOD\r\n"
    "Service: C-ICAP/0.5.10 server - Antivirus service\r\n"
    "ISTag: \"CI0001-L5CkDhq+qWNs+PZ5DxxXsAAA\"\r\nTransfer-Preview: *\r\n"
    "Options-TTL: 3600\r\nDate: Wed, 02 Dec 2026 06:08:56 GMT\r\n"
    "Preview: 1024\r\nAllow: 204\r\nMax-Connections: 100\r\n"
    "Encapsulated: null-body=0\r\n\r\n";

static const char clean[] =
    "ICAP/1.0 204 Unmodified\r\nServer: C-ICAP/0.5.10\r\n"
    "Connection: keep-alive\r\nISTag: \"CI0001-X\"\r\n"
    "Encapsulated: null-body=0\r\n\r\n";

static ssize_t
parse(const char *s, struct px_icap_head *h, const char **why)
{
	*why = "";
	return px_icap_parse(s, strlen(s), h, why);
}

static void
test_infected(void **state)
{
	struct px_icap_head h;
	const char *why;
	ssize_t n;

	(void)state;
	n = parse(infected, &h, &why);
	assert_int_equal(n, (ssize_t)(strstr(infected, "1c7\r\n") - infected));
	assert_int_equal(h.status, 200);
	assert_int_equal(h.http_status, 403);
	assert_string_equal(h.threat, "eicar.com.UNOFFICIAL");
	assert_string_equal(h.istag, "CI0001-L5CkDhq+qWNs+PZ5DxxXsAAA");
	assert_int_equal(h.res_hdr, 0);
	assert_int_equal(h.body, 161);
	assert_false(h.conn_close);
}

static void
test_clean_and_options(void **state)
{
	struct px_icap_head h;
	const char *why;

	(void)state;
	assert_int_equal(parse(clean, &h, &why), (ssize_t)strlen(clean));
	assert_int_equal(h.status, 204);
	assert_true(h.null_body);
	assert_string_equal(h.threat, "");

	assert_int_equal(parse(options, &h, &why), (ssize_t)strlen(options));
	assert_int_equal(h.status, 200);
	assert_string_equal(h.methods, "RESPMOD, REQMOD");
	assert_int_equal(h.preview, 1024);
	assert_string_equal(h.transfer_preview, "*");
	assert_int_equal(h.options_ttl, 3600);
	assert_int_equal(h.max_connections, 100);
	assert_int_equal(h.http_status, 0);

	/* A bare 204, Connection: close, bare LF line ends. */
	assert_int_equal(parse("ICAP/1.0 204 No Content\nConnection: close\n\n",
	    &h, &why), 43);
	assert_true(h.conn_close);

	/* The other Transfer-* lists, and a bare 100 Continue. */
	assert_int_equal(parse("ICAP/1.0 200 OK\r\nTransfer-Complete: exe, "
	    "zip\r\nTransfer-Ignore: txt\r\nEncapsulated: null-body=0\r\n"
	    "\r\n", &h, &why), 97);
	assert_string_equal(h.transfer_complete, "exe, zip");
	assert_string_equal(h.transfer_ignore, "txt");
	assert_int_equal(h.preview, -1);
	assert_int_equal(parse("ICAP/1.0 100 Continue\r\n\r\n", &h, &why),
	    25);
	assert_int_equal(h.status, 100);
}

/* The threat's name from whichever header names it, made printable. */
static void
test_threat_sources(void **state)
{
	struct px_icap_head h;
	const char *why;

	(void)state;
	assert_true(parse("ICAP/1.0 200 OK\r\nX-Violations-Found: 1\r\n\tf.exe\r\n"
	    "\tTrojan.X\r\n\t1\r\n\t0\r\nEncapsulated: res-hdr=0, null-body=19\r\n"
	    "\r\nHTTP/1.1 403 No\r\n\r\n", &h, &why) > 0);
	assert_string_equal(h.threat, "Trojan.X");
	assert_true(parse("ICAP/1.0 200 OK\r\nX-Virus-ID: Bad \"one\"\x01\r\n"
	    "Encapsulated: res-hdr=0, null-body=19\r\n\r\nHTTP/1.1 403 No\r\n\r\n",
	    &h, &why) > 0);
	assert_string_equal(h.threat, "Bad ?one??");
	/* X-Infection-Found wins over the others, wherever it comes. */
	assert_true(parse("ICAP/1.0 200 OK\r\nX-Virus-ID: second\r\n"
	    "X-Infection-Found: Type=0; Resolution=2; Threat=first;\r\n"
	    "Encapsulated: res-hdr=0, null-body=19\r\n\r\nHTTP/1.1 403 No\r\n\r\n",
	    &h, &why) > 0);
	assert_string_equal(h.threat, "first");
	/* A 200 with a changed request (REQMOD): no HTTP status. */
	assert_true(parse("ICAP/1.0 200 OK\r\nEncapsulated: req-hdr=0, "
	    "null-body=18\r\n\r\nGET / HTTP/1.1\r\n\r\n", &h, &why) > 0);
	assert_int_equal(h.http_status, 0);
	assert_string_equal(h.threat, "");
}

/* Every proper prefix of a good answer asks for more; never an error,
 * never a different head. */
static void
test_prefixes(void **state)
{
	const char *const all[] = { infected, options, clean };
	struct px_icap_head h;
	const char *why;
	size_t i, k, full;

	(void)state;
	for (i = 0; i < 3; i++) {
		ssize_t want = px_icap_parse(all[i], strlen(all[i]), &h, &why);

		assert_true(want > 0);
		full = (size_t)want;
		for (k = 0; k < full; k++)
			assert_int_equal(px_icap_parse(all[i], k, &h, &why), 0);
	}
}

static void
test_malformed(void **state)
{
	static const char *const bad[] = {
		"HTTP/1.1 200 OK\r\n\r\n",
		"ICAP/1.0 20 OK\r\n\r\n",
		"ICAP/1.0 2000 OK\r\n\r\n",
		"ICAP/1.0 099 OK\r\n\r\n",
		"ICAP/2.0 204 OK\r\n\r\n",
		"ICAP/1.0 204 OK\r\n\tfolded\r\n\r\n",
		"ICAP/1.0 204 OK\r\nno colon\r\n\r\n",
		"ICAP/1.0 204 OK\r\n: empty name\r\n\r\n",
		"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr\r\n\r\n",
		"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=x\r\n\r\n",
		"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, foo=3\r\n\r\n",
		"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, res-body=99999999\r\n\r\n",
		/* the body before the head */
		"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=10, res-body=0\r\n\r\n",
		/* a head without a body offset */
		"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0\r\n\r\nHTTP/1.1 403 x\r\n\r\n",
		/* no HTTP status line where the response head is said to be */
		"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, res-body=6\r\n\r\nhello!",
	};
	struct px_icap_head h;
	const char *why;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		if (px_icap_parse(bad[i], strlen(bad[i]), &h, &why) != -1)
			fail_msg("accepted: %s", bad[i]);
		assert_non_null(why);
	}
}

/* A head that never ends is refused once past the bound, not waited for. */
static void
test_bounds(void **state)
{
	size_t n = PX_ICAP_HEAD_MAX + 100, off;
	char *buf = malloc(n);
	struct px_icap_head h;
	const char *why;

	(void)state;
	assert_non_null(buf);
	off = (size_t)sprintf(buf, "ICAP/1.0 204 OK\r\n");
	while (off + 12 < n)
		off += (size_t)sprintf(buf + off, "X-Pad: abc\r\n");
	assert_int_equal(px_icap_parse(buf, off, &h, &why), -1);
	assert_int_equal(px_icap_parse(buf, 1000, &h, &why), 0);
	/* A status line with no end, past 1 KiB. */
	memset(buf, 'A', 2000);
	memcpy(buf, "ICAP/1.0 204 ", 13);
	assert_int_equal(px_icap_parse(buf, 2000, &h, &why), -1);
	free(buf);
}

/* Random damage to the fixtures (bytes changed, cut, repeated): the
 * parser never reads past what it is given (ASan), never claims more
 * bytes than it got, and what it keeps stays printable. */
static void
test_random_damage(void **state)
{
	const char *const all[] = { infected, options, clean };
	char buf[2048];
	struct px_icap_head h;
	const char *why;
	unsigned seed = 28, i;

	(void)state;
	for (i = 0; i < 50000; i++) {
		const char *src = all[i % 3];
		size_t len = strlen(src), k, flips;
		char *copy;
		ssize_t n;

		memcpy(buf, src, len);
		for (flips = 1 + rand_r(&seed) % 4; flips > 0; flips--) {
			k = (size_t)rand_r(&seed) % len;
			switch (rand_r(&seed) % 4) {
			case 0: buf[k] = (char)rand_r(&seed); break;
			case 1: buf[k] = "\r\n\t :=,;"[rand_r(&seed) % 8]; break;
			case 2: buf[k] = (char)('0' + rand_r(&seed) % 10); break;
			default: len = k + 1; break;
			}
		}
		/* An exact-size heap copy: ASan sees a read past its end. */
		copy = malloc(len);
		assert_non_null(copy);
		memcpy(copy, buf, len);
		n = px_icap_parse(copy, len, &h, &why);
		assert_true(n >= -1 && n <= (ssize_t)len);
		for (k = 0; h.threat[k] != '\0'; k++)
			assert_true(h.threat[k] >= 0x20 && h.threat[k] < 0x7f &&
			    h.threat[k] != '"');
		free(copy);
	}
}

/* Feeds text to a fresh decoder in pieces of `step` bytes: its last
 * answer; the data in out. */
static int
dechunk(const char *text, size_t len, size_t step, size_t max,
    struct evbuffer *out, const char **why)
{
	struct px_icap_dechunk d = { 0 };
	struct evbuffer *in = evbuffer_new();
	size_t off = 0;
	int rc = 0;

	assert_non_null(in);
	while (off < len && rc == 0) {
		size_t n = len - off < step ? len - off : step;

		evbuffer_add(in, text + off, n);
		off += n;
		rc = px_icap_dechunk(&d, in, out, max, why);
	}
	evbuffer_free(in);
	return rc;
}

static int
dechunk_str(const char *text, size_t max, char *got, size_t size)
{
	struct evbuffer *out = evbuffer_new();
	const char *why = "";
	int rc = dechunk(text, strlen(text), 1, max, out, &why);
	size_t n = evbuffer_get_length(out);

	assert_true(n < size);
	evbuffer_remove(out, got, n);
	got[n] = '\0';
	evbuffer_free(out);
	return rc;
}

/* A changed body's chunks: what c-icap and others send, and the bounds. */
static void
test_dechunk(void **state)
{
	char got[256];

	(void)state;
	assert_int_equal(dechunk_str("5\r\nhello\r\n0\r\n\r\n", 100,
	    got, sizeof(got)), 1);
	assert_string_equal(got, "hello");
	assert_int_equal(dechunk_str("3;ext=1\nabc\n2\r\nde\r\n0\r\n"
	    "X-Trailer: 1\r\n\r\n", 100, got, sizeof(got)), 1);
	assert_string_equal(got, "abcde");
	assert_int_equal(dechunk_str("0\r\n\r\n", 0, got, sizeof(got)), 1);
	assert_int_equal(dechunk_str("5\r\nhel", 100, got, sizeof(got)), 0);
	assert_int_equal(dechunk_str("zz\r\nabc\r\n", 100, got,
	    sizeof(got)), -1);
	assert_int_equal(dechunk_str("4\r\nabcdefgh\r\n", 100, got,
	    sizeof(got)), -1);
	assert_int_equal(dechunk_str("5\r\nhello\r\n5\r\nworld\r\n",
	    9, got, sizeof(got)), -1);
	assert_int_equal(dechunk_str("ffffffffffffffffffff\r\n", 100, got,
	    sizeof(got)), -1);
	assert_int_equal(dechunk_str("-1\r\n", 100, got, sizeof(got)), -1);
}

/* Random bodies in random chunks (extensions, LF or CR LF), fed in random
 * pieces: the data comes out whole; the same with a byte damaged never
 * gives more than max nor reads past what it got. */
static void
test_dechunk_random(void **state)
{
	static char body[4096], text[16384];
	struct evbuffer *out = evbuffer_new();
	unsigned seed = 3507, i;

	(void)state;
	assert_non_null(out);
	for (i = 0; i < 3000; i++) {
		size_t blen = (size_t)rand_r(&seed) % sizeof(body), off = 0;
		size_t tlen = 0, step = 1 + (size_t)rand_r(&seed) % 700;
		const char *eol = rand_r(&seed) % 2 ? "\r\n" : "\n", *why;
		int rc;

		for (off = 0; off < blen; off++)
			body[off] = (char)rand_r(&seed);
		for (off = 0; off < blen;) {
			size_t n = 1 + (size_t)rand_r(&seed) % 900;

			if (n > blen - off)
				n = blen - off;
			tlen += (size_t)snprintf(text + tlen, sizeof(text) - tlen,
			    "%zx%s%s", n, rand_r(&seed) % 4 ? "" : ";a=b", eol);
			memcpy(text + tlen, body + off, n);
			tlen += n;
			tlen += (size_t)snprintf(text + tlen, sizeof(text) - tlen,
			    "%s", eol);
			off += n;
		}
		tlen += (size_t)snprintf(text + tlen, sizeof(text) - tlen,
		    "0%s%s", eol, eol);
		if (i % 2 == 0) {
			rc = dechunk(text, tlen, step, sizeof(body), out, &why);
			assert_int_equal(rc, 1);
			assert_int_equal(evbuffer_get_length(out), blen);
			assert_memory_equal(evbuffer_pullup(out, -1), body, blen);
		} else {
			text[(size_t)rand_r(&seed) % tlen] = (char)rand_r(&seed);
			rc = dechunk(text, tlen, step, blen / 2 + 1, out, &why);
			assert_true(rc >= -1 && rc <= 1);
			assert_true(evbuffer_get_length(out) <= blen / 2 + 1);
		}
		evbuffer_drain(out, evbuffer_get_length(out));
	}
	evbuffer_free(out);
}

/* The scanner's url: the ICAP port by default, IP literals only. */
static void
test_url(void **state)
{
	static const char *const bad[] = {
		"http://127.0.0.1/avscan", "icap://127.0.0.1", "icap://127.0.0.1/",
		"icap:///avscan", "icap://localhost/avscan", "icap://127.0.0.1:0/x",
		"icap://127.0.0.1:70000/x", "icap://[::1/x", "icap://1.2.3.4/a b",
	};
	struct px_scanner sc;
	const char *why;
	size_t i;

	(void)state;
	memset(&sc, 0, sizeof(sc));
	assert_int_equal(px_icap_url_parse("icap://127.0.0.1/avscan", &sc,
	    &why), 0);
	assert_string_equal(sc.authority, "127.0.0.1:1344");
	assert_string_equal(sc.path, "/avscan");
	assert_int_equal(px_icap_url_parse("icap://[::1]:13440/a/b?x=1", &sc,
	    &why), 0);
	assert_string_equal(sc.authority, "[::1]:13440");
	assert_string_equal(sc.path, "/a/b?x=1");
	assert_int_equal(sc.addr.ss_family, AF_INET6);
	assert_int_equal(px_icap_url_parse("icap://[::1]/s", &sc, &why), 0);
	assert_string_equal(sc.authority, "[::1]:1344");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (px_icap_url_parse(bad[i], &sc, &why) != -1)
			fail_msg("accepted: %s", bad[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_infected),
		cmocka_unit_test(test_clean_and_options),
		cmocka_unit_test(test_threat_sources),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_random_damage),
		cmocka_unit_test(test_url),
		cmocka_unit_test(test_dechunk),
		cmocka_unit_test(test_dechunk_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
