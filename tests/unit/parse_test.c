/* Unit tests for proxyd/base/parse.c: units, numbers, addresses, CIDR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "parse.h"

static void
test_duration(void **state)
{
	uint64_t v;
	const char *why;

	(void)state;
	assert_int_equal(px_parse_duration_ms("500ms", false, &v, &why), 0);
	assert_int_equal(v, 500);
	assert_int_equal(px_parse_duration_ms("10s", false, &v, &why), 0);
	assert_int_equal(v, 10000);
	assert_int_equal(px_parse_duration_ms("5m", false, &v, &why), 0);
	assert_int_equal(v, 300000);
	assert_int_equal(px_parse_duration_ms("2h", false, &v, &why), 0);
	assert_int_equal(v, 7200000);
	assert_int_equal(px_parse_duration_ms("1d", false, &v, &why), 0);
	assert_int_equal(v, 86400000);
	assert_int_equal(px_parse_duration_ms("0", true, &v, &why), 0);
	assert_int_equal(v, 0);

	assert_int_equal(px_parse_duration_ms("0", false, &v, &why), -1);
	assert_int_equal(px_parse_duration_ms("0s", false, &v, &why), -1);
	assert_int_equal(px_parse_duration_ms("5", false, &v, &why), -1);
	assert_non_null(strstr(why, "unit"));
	assert_int_equal(px_parse_duration_ms("5x", false, &v, &why), -1);
	assert_int_equal(px_parse_duration_ms("5 s", false, &v, &why), -1);
	assert_int_equal(px_parse_duration_ms("-5s", false, &v, &why), -1);
	assert_int_equal(px_parse_duration_ms("", false, &v, &why), -1);
	assert_int_equal(px_parse_duration_ms("s", false, &v, &why), -1);
	assert_int_equal(px_parse_duration_ms("10ss", false, &v, &why), -1);
	/* overflow: digits beyond 2^64, and a unit product beyond it */
	assert_int_equal(px_parse_duration_ms("99999999999999999999s", false,
	    &v, &why), -1);
	assert_int_equal(px_parse_duration_ms("999999999999999999d", false, &v,
	    &why), -1);
	assert_non_null(strstr(why, "large"));
}

static void
test_size(void **state)
{
	uint64_t v;
	const char *why;

	(void)state;
	assert_int_equal(px_parse_size("4096", &v, &why), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(px_parse_size("64k", &v, &why), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(px_parse_size("16m", &v, &why), 0);
	assert_int_equal(v, 16 << 20);
	assert_int_equal(px_parse_size("1g", &v, &why), 0);
	assert_int_equal(v, 1ULL << 30);
	assert_int_equal(px_parse_size("1G", &v, &why), 0);
	assert_int_equal(px_parse_size("0", &v, &why), 0);
	assert_int_equal(v, 0);

	assert_int_equal(px_parse_size("12q", &v, &why), -1);
	assert_non_null(strstr(why, "unit"));
	assert_int_equal(px_parse_size("1kb", &v, &why), -1);
	assert_int_equal(px_parse_size("k", &v, &why), -1);
	assert_int_equal(px_parse_size("", &v, &why), -1);
	assert_int_equal(px_parse_size(" 1k", &v, &why), -1);
	assert_int_equal(px_parse_size("1.5m", &v, &why), -1);
	assert_int_equal(px_parse_size("17179869184g", &v, &why), -1);
}

static void
test_uint(void **state)
{
	uint64_t v;
	uint32_t u;
	const char *why;

	(void)state;
	assert_int_equal(px_parse_uint("65535", 1, 65535, &v, &why), 0);
	assert_int_equal(v, 65535);
	assert_int_equal(px_parse_uint("65536", 1, 65535, &v, &why), -1);
	assert_int_equal(px_parse_uint("0", 1, 65535, &v, &why), -1);
	assert_int_equal(px_parse_uint("+1", 1, 65535, &v, &why), -1);
	assert_int_equal(px_parse_uint("1 ", 1, 65535, &v, &why), -1);
	assert_int_equal(px_parse_uint("0x10", 0, 100, &v, &why), -1);

	assert_int_equal(px_parse_u32_any("0x40000000", &u, &why), 0);
	assert_int_equal(u, 0x40000000u);
	assert_int_equal(px_parse_u32_any("0xFFFFFFFF", &u, &why), 0);
	assert_int_equal(u, 0xffffffffu);
	assert_int_equal(px_parse_u32_any("42", &u, &why), 0);
	assert_int_equal(u, 42);
	assert_int_equal(px_parse_u32_any("0x100000000", &u, &why), -1);
	assert_int_equal(px_parse_u32_any("0x", &u, &why), -1);
	assert_int_equal(px_parse_u32_any("0xg", &u, &why), -1);
	assert_int_equal(px_parse_u32_any("4294967296", &u, &why), -1);
}

static struct sockaddr_storage addr(const char *s);

static void
test_addresses(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len;
	const char *why;
	char buf[PX_ADDRSTRLEN];

	(void)state;
	assert_int_equal(px_parse_ip("127.0.0.1", 80, &ss, &len, &why), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_string_equal(px_sockaddr_str((struct sockaddr *)&ss, buf,
	    sizeof(buf)), "127.0.0.1:80");
	assert_true(px_sockaddr_is_loopback((struct sockaddr *)&ss));
	assert_false(px_sockaddr_is_wildcard((struct sockaddr *)&ss));

	assert_int_equal(px_parse_ip("2001:db8::1", 443, &ss, &len, &why), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_string_equal(px_sockaddr_str((struct sockaddr *)&ss, buf,
	    sizeof(buf)), "[2001:db8::1]:443");
	assert_int_equal(px_sockaddr_port((struct sockaddr *)&ss), 443);

	assert_int_equal(px_parse_ip("0.0.0.0", 1, &ss, &len, &why), 0);
	assert_true(px_sockaddr_is_wildcard((struct sockaddr *)&ss));
	assert_int_equal(px_parse_ip("::", 1, &ss, &len, &why), 0);
	assert_true(px_sockaddr_is_wildcard((struct sockaddr *)&ss));

	assert_int_equal(px_parse_ip("300.1.1.1", 1, &ss, &len, &why), -1);
	assert_int_equal(px_parse_ip("localhost", 1, &ss, &len, &why), -1);
	assert_int_equal(px_parse_ip("1.2.3", 1, &ss, &len, &why), -1);
	assert_int_equal(px_parse_ip("", 1, &ss, &len, &why), -1);

	assert_int_equal(px_parse_hostport("127.0.0.1:9180", &ss, &len, &why), 0);
	assert_int_equal(px_sockaddr_port((struct sockaddr *)&ss), 9180);
	assert_int_equal(px_parse_hostport("[::1]:9180", &ss, &len, &why), 0);
	assert_true(px_sockaddr_is_loopback((struct sockaddr *)&ss));
	assert_int_equal(px_parse_hostport("::1:9180", &ss, &len, &why), -1);
	assert_int_equal(px_parse_hostport("127.0.0.1", &ss, &len, &why), -1);
	assert_int_equal(px_parse_hostport("127.0.0.1:0", &ss, &len, &why), -1);
	assert_int_equal(px_parse_hostport("127.0.0.1:70000", &ss, &len, &why), -1);
	assert_int_equal(px_parse_hostport("[::1]9180", &ss, &len, &why), -1);
	assert_int_equal(px_parse_hostport(":80", &ss, &len, &why), -1);
	assert_string_equal(px_sockaddr_str(NULL, buf, sizeof(buf)), "-");

	{
		struct sockaddr_storage a4 = addr("10.0.0.1"), b4 = addr("10.0.0.1");
		struct sockaddr_storage c4 = addr("10.0.0.2"), a6 = addr("::1");
		struct sockaddr_storage b6 = addr("::1");

		((struct sockaddr_in *)&b4)->sin_port = htons(99);
		assert_true(px_sockaddr_same_host((struct sockaddr *)&a4,
		    (struct sockaddr *)&b4));	/* ports don't matter */
		assert_false(px_sockaddr_same_host((struct sockaddr *)&a4,
		    (struct sockaddr *)&c4));
		assert_false(px_sockaddr_same_host((struct sockaddr *)&a4,
		    (struct sockaddr *)&a6));
		assert_true(px_sockaddr_same_host((struct sockaddr *)&a6,
		    (struct sockaddr *)&b6));
	}
}

static struct sockaddr_storage
addr(const char *s)
{
	struct sockaddr_storage ss;
	socklen_t len;
	const char *why;

	assert_int_equal(px_parse_ip(s, 1, &ss, &len, &why), 0);
	return ss;
}

static bool
match(const char *cidr, const char *a)
{
	struct px_cidr c;
	struct sockaddr_storage ss = addr(a);
	const char *why;

	assert_int_equal(px_parse_cidr(cidr, strlen(cidr), &c, &why), 0);
	return px_cidr_match(&c, (struct sockaddr *)&ss);
}

static void
test_cidr(void **state)
{
	struct px_cidr c, list[2];
	struct sockaddr_storage ss;
	const char *why;

	(void)state;
	assert_true(match("10.0.0.0/8", "10.255.1.2"));
	assert_false(match("10.0.0.0/8", "11.0.0.1"));
	assert_true(match("127.0.0.1", "127.0.0.1"));
	assert_false(match("127.0.0.1", "127.0.0.2"));
	assert_true(match("0.0.0.0/0", "203.0.113.9"));
	assert_true(match("192.168.1.128/25", "192.168.1.200"));
	assert_false(match("192.168.1.128/25", "192.168.1.127"));
	assert_true(match("198.18.0.0/15", "198.19.255.255"));
	assert_false(match("198.18.0.0/15", "198.20.0.0"));
	/* host bits in the network are cleared, not an error */
	assert_true(match("10.1.2.3/8", "10.9.9.9"));
	assert_true(match("::1", "::1"));
	assert_false(match("::1", "::2"));
	assert_true(match("2001:db8::/32", "2001:db8:ffff::1"));
	assert_false(match("2001:db8::/32", "2001:db9::1"));
	assert_true(match("2001:db8::/33", "2001:db8:7fff::1"));
	assert_false(match("2001:db8::/33", "2001:db8:8000::1"));
	/* families don't mix, except v4-mapped v6 clients on v4 rules */
	assert_false(match("10.0.0.0/8", "::1"));
	assert_false(match("::/0", "10.0.0.1"));
	assert_true(match("10.0.0.0/8", "::ffff:10.1.2.3"));
	assert_false(match("10.0.0.0/8", "::ffff:11.1.2.3"));

	assert_int_equal(px_parse_cidr("10.0.0.0/33", 11, &c, &why), -1);
	assert_int_equal(px_parse_cidr("::/129", 6, &c, &why), -1);
	assert_int_equal(px_parse_cidr("10.0.0.0/", 9, &c, &why), -1);
	assert_int_equal(px_parse_cidr("10.0.0/8", 8, &c, &why), -1);
	assert_int_equal(px_parse_cidr("", 0, &c, &why), -1);
	assert_int_equal(px_parse_cidr("x", 1, &c, &why), -1);
	/* len bounds the scan: "10.0.0.1 junk" with len 8 is 10.0.0.1 */
	assert_int_equal(px_parse_cidr("10.0.0.1 junk", 8, &c, &why), 0);

	assert_int_equal(px_parse_cidr("10.0.0.0/8", 10, &list[0], &why), 0);
	assert_int_equal(px_parse_cidr("::1", 3, &list[1], &why), 0);
	ss = addr("::1");
	assert_true(px_cidr_list_match(list, 2, (struct sockaddr *)&ss));
	ss = addr("127.0.0.1");
	assert_false(px_cidr_list_match(list, 2, (struct sockaddr *)&ss));
	assert_false(px_cidr_list_match(list, 0, (struct sockaddr *)&ss));
}

static void
test_log_escape(void **state)
{
	char out[32];

	(void)state;
	/* Bare: space, quote, backslash and controls become \xNN. */
	assert_string_equal(px_log_escape(out, sizeof(out), "a b\"c\\d\n", 8,
	    false), "a\\x20b\\x22c\\x5cd\\x0a");
	/* Quoted: space kept, quote and backslash escaped by a backslash. */
	assert_string_equal(px_log_escape(out, sizeof(out), "a b\"c\\d\n", 8,
	    true), "a b\\\"c\\\\d\\x0a");
	/* An embedded NUL and non-ASCII bytes. */
	assert_string_equal(px_log_escape(out, sizeof(out), "x\0\xff", 3, true),
	    "x\\x00\\xff");
	/* Cut with "...", never past cap, never half an escape. */
	assert_string_equal(px_log_escape(out, 10, "abcdefghijkl", 12, false),
	    "abcdef...");
	assert_string_equal(px_log_escape(out, 10, "abc\x01\x01\x01", 6, false),
	    "abc...");
	assert_string_equal(px_log_escape(out, 10, "abcdefghi", 9, false),
	    "abcdefghi");
	assert_string_equal(px_log_escape(out, sizeof(out), "", 0, true), "");
}

static void
test_sockaddr_helpers(void **state)
{
	struct sockaddr_storage ss;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(80) };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6,
	    .sin6_port = htons(443) };
	char buf[PX_ADDRSTRLEN];

	(void)state;
	inet_pton(AF_INET, "198.18.0.1", &sin.sin_addr);
	inet_pton(AF_INET6, "2001:db8::1", &sin6.sin6_addr);
	assert_int_equal(px_sockaddr_len((struct sockaddr *)&sin), sizeof(sin));
	assert_int_equal(px_sockaddr_len((struct sockaddr *)&sin6), sizeof(sin6));
	memset(&ss, 0xaa, sizeof(ss));
	px_sockaddr_copy(&ss, (struct sockaddr *)&sin);
	px_sockaddr_set_port(&ss, 8080);
	assert_string_equal(px_sockaddr_str((struct sockaddr *)&ss, buf,
	    sizeof(buf)), "198.18.0.1:8080");
	assert_int_equal(((unsigned char *)&ss)[sizeof(ss) - 1], 0);
	px_sockaddr_copy(&ss, (struct sockaddr *)&sin6);
	px_sockaddr_set_port(&ss, 0);
	assert_string_equal(px_sockaddr_str((struct sockaddr *)&ss, buf,
	    sizeof(buf)), "[2001:db8::1]:0");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_size),
		cmocka_unit_test(test_uint),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_cidr),
		cmocka_unit_test(test_log_escape),
		cmocka_unit_test(test_sockaddr_helpers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
