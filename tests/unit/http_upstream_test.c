/* Unit tests for plugins/http/http_upstream.c's pure part: the authority
 * of a Host field or an absolute-form target (RFC 9110 7.2, RFC 3986
 * 3.2.2: uri-host [ ":" port ]). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/socket.h>

#include "http/http_int.h"

static int
auth(const char *a, char *host, uint16_t *port, sa_family_t *fam)
{
	struct sockaddr_storage ss;
	int rc;

	rc = http_authority(a, strlen(a), 80, host, 128, &ss, port);
	*fam = ss.ss_family;
	return rc;
}

static void
test_authority(void **state)
{
	static const struct {
		const char *in, *host;
		uint16_t port;
		sa_family_t fam;
	} ok[] = {
		{ "example.com", "example.com", 80, 0 },
		{ "Example.COM:8080", "Example.COM", 8080, 0 },
		{ "a-b_c~d.e", "a-b_c~d.e", 80, 0 },
		{ "x%41y", "x%41y", 80, 0 },
		{ "sub!$&'()*+,;=", "sub!$&'()*+,;=", 80, 0 },
		{ "192.0.2.1:81", "192.0.2.1", 81, AF_INET },
		{ "[2001:db8::1]", "[2001:db8::1]", 80, AF_INET6 },
		{ "[::1]:443", "[::1]", 443, AF_INET6 },
		{ "999.1.1.1", "999.1.1.1", 80, 0 },	/* a reg-name */
	};
	static const char *const bad[] = {
		"", ":80", "a:", "a:0", "a:65536", "a:+80", "a:8 0", "a b",
		"caf\xc3\xa9.test", "a\x80", "\xff", "a/b", "a?b", "a#b",
		"user@host", "a\"b", "a<b", "%zz", "x%4", "[::1", "[]",
		"[::1]x", "[1.2.3.4]", "[v1.x]", "[fe80::1%25eth0]", "a:80:81",
		"a\\b", "a\tb",
	};
	char host[128];
	uint16_t port;
	sa_family_t fam;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (auth(ok[i].in, host, &port, &fam) != 0)
			fail_msg("%s: refused", ok[i].in);
		assert_string_equal(host, ok[i].host);
		assert_int_equal(port, ok[i].port);
		assert_int_equal(fam, ok[i].fam);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (auth(bad[i], host, &port, &fam) != -1)
			fail_msg("\"%s\": taken", bad[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_authority),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
