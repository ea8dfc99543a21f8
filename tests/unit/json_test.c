/* Unit tests for proxyd/base/json.c: the JSON strings every JSON output
 * of proxyd shares (log lines, audit records, admin status, quotas). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "json.h"

/* v through px_json_str, as a NUL-terminated string (free it). */
static char *
json_of(const char *v)
{
	struct evbuffer *b = evbuffer_new();
	size_t n;
	char *s;

	assert_non_null(b);
	px_json_str(b, v);
	n = evbuffer_get_length(b);
	s = malloc(n + 1);
	assert_non_null(s);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	evbuffer_free(b);
	return s;
}

static void
expect_json(const char *v, const char *want)
{
	char *got = json_of(v);

	assert_string_equal(got, want);
	free(got);
}

static void
test_ascii(void **state)
{
	(void)state;
	expect_json("", "\"\"");
	expect_json("plain text 1/2", "\"plain text 1/2\"");
	expect_json("a\"b\\c", "\"a\\\"b\\\\c\"");
	expect_json("\x01\t\n\r\x1f\x7f", "\"\\u0001\\u0009\\u000a\\u000d"
	    "\\u001f\\u007f\"");
}

/* Valid UTF-8 of 2, 3 and 4 bytes is kept; bytes that are not part of
 * valid UTF-8 become the character of the same number. */
static void
test_utf8(void **state)
{
	(void)state;
	expect_json("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
	    "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
	expect_json("\xff", "\"\\u00ff\"");
	/* A lead byte without its continuation, at the end and before ASCII. */
	expect_json("a\xc3", "\"a\\u00c3\"");
	expect_json("\xc3x", "\"\\u00c3x\"");
	/* Overlong, surrogate and above U+10FFFF: not valid, each byte alone. */
	expect_json("\xc0\xaf", "\"\\u00c0\\u00af\"");
	expect_json("\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\"");
	expect_json("\xf4\x90\x80\x80", "\"\\u00f4\\u0090\\u0080\\u0080\"");
	/* A stray continuation byte between valid characters. */
	expect_json("\xc3\xa9\x80\xc3\xa9", "\"\xc3\xa9\\u0080\xc3\xa9\"");
}

/* The buffer form stops before an escape that might not fit, and never
 * writes past cap. */
static void
test_escape_cap(void **state)
{
	char out[16];
	size_t n;

	(void)state;
	memset(out, '#', sizeof(out));
	n = px_json_escape(out, 10, "\x01\x01\x01", 3);
	assert_int_equal(n, 6);
	assert_memory_equal(out, "\\u0001", 6);
	assert_int_equal(out[6], '#');
	n = px_json_escape(out, sizeof(out), "ab\"", 3);
	assert_int_equal(n, 4);
	assert_memory_equal(out, "ab\\\"", 4);
}

/* Every byte value alone and in random strings: the output is valid
 * UTF-8 with no raw control byte, and only the escapes JSON knows. */
static void
test_random_clean(void **state)
{
	uint32_t x = 0x9e3779b9u;
	int iter;

	(void)state;
	for (iter = 0; iter < 5000; iter++) {
		char v[33], *got;
		size_t len = iter < 256 ? 1 : (size_t)(x % 32), i, n;

		for (i = 0; i < len; i++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			v[i] = iter < 256 ? (char)iter : (char)(x % 255 + 1);
		}
		if (iter == 0)
			continue;	/* NUL ends a C string */
		v[len] = '\0';
		got = json_of(v);
		n = strlen(got);
		assert_true(n >= 2 && got[0] == '"' && got[n - 1] == '"');
		for (i = 1; i < n - 1; ) {
			unsigned char c = (unsigned char)got[i];
			size_t u;

			assert_true(c >= 0x20 && c != 0x7f);
			if (c == '"')
				fail_msg("raw quote at %zu in %s", i, got);
			if (c == '\\') {
				assert_true(got[i + 1] == '"' ||
				    got[i + 1] == '\\' || got[i + 1] == 'u');
				i += got[i + 1] == 'u' ? 6 : 2;
			} else if (c >= 0x80) {
				u = px_utf8_len((const unsigned char *)got + i,
				    n - 1 - i);
				assert_true(u > 0);
				i += u;
			} else
				i++;
		}
		free(got);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ascii),
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_escape_cap),
		cmocka_unit_test(test_random_clean),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
