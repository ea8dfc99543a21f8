/* Unit tests for proxyd/base/prom.c: label values as the Prometheus text
 * format reads them back, bytes that are not UTF-8 among them (promtool,
 * which the integration tests use, checks a page of them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <event2/buffer.h>

#include "prom.h"

static void
expect_label(const char *v, const char *want)
{
	struct evbuffer *b = evbuffer_new();
	size_t n;
	char got[64];

	assert_non_null(b);
	px_prom_label(b, v);
	n = evbuffer_get_length(b);
	assert_true(n < sizeof(got) - 1);
	evbuffer_remove(b, got, n);
	got[n] = '\0';
	assert_string_equal(got, want);
	evbuffer_free(b);
}

/* Backslash, quote and newline escaped; the rest (other controls, UTF-8)
 * as it is: the format knows no other escape. */
static void
test_label(void **state)
{
	(void)state;
	expect_label("", "");
	expect_label("web-1", "web-1");
	expect_label("a\"b\\c\nd", "a\\\"b\\\\c\\nd");
	expect_label("\t\xc3\xa9", "\t\xc3\xa9");
}

/* Values that are not UTF-8 (an FTP user name, an R66 host id: from the
 * wire): each stray byte as the text \xHH; well-formed sequences of every
 * length as they are. */
static const struct {
	const char *in, *out;
} bad[] = {
	{ "\xff\xfeu", "\\\\xFF\\\\xFEu" },
	{ "ab\x80", "ab\\\\x80" },				/* lone continuation */
	{ "\xc3", "\\\\xC3" },				/* cut sequence */
	{ "\xc3(", "\\\\xC3(" },
	{ "\xc0\xaf", "\\\\xC0\\\\xAF" },			/* overlong '/' */
	{ "\xe0\x80\xaf", "\\\\xE0\\\\x80\\\\xAF" },		/* overlong */
	{ "\xed\xa0\x80", "\\\\xED\\\\xA0\\\\x80" },		/* a surrogate */
	{ "\xf4\x90\x80\x80", "\\\\xF4\\\\x90\\\\x80\\\\x80" },	/* past U+10FFFF */
	{ "\xf5", "\\\\xF5" },
	{ "\xe2\x82", "\\\\xE2\\\\x82" },
	{ "a\"\xff\\", "a\\\"\\\\xFF\\\\" },
	{ "\xe2\x82\xac\xf0\x9f\x98\x80\xed\x9f\xbf\xf4\x8f\xbf\xbf",
	    "\xe2\x82\xac\xf0\x9f\x98\x80\xed\x9f\xbf\xf4\x8f\xbf\xbf" },
};

static void
test_not_utf8(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_label(bad[i].in, bad[i].out);
}

/* A page with every one of them as a label value passes promtool check
 * metrics (a raw 0xff fails it: "invalid label value"). */
static void
test_promtool(void **state)
{
	struct evbuffer *b = evbuffer_new();
	char path[] = "/tmp/prom_test.XXXXXX", cmd[128], out[512];
	size_t i, n;
	FILE *f, *p;
	int fd, rc;

	(void)state;
	assert_non_null(b);
	evbuffer_add_printf(b, "# HELP t_total a test.\n# TYPE t_total "
	    "counter\n");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		evbuffer_add_printf(b, "t_total{k=\"%zu\",v=\"", i);
		px_prom_label(b, bad[i].in);
		evbuffer_add_printf(b, "\"} 1\n");
	}
	assert_true((fd = mkstemp(path)) >= 0);
	assert_non_null(f = fdopen(fd, "w"));
	n = evbuffer_get_length(b);
	assert_int_equal(fwrite(evbuffer_pullup(b, -1), 1, n, f), n);
	fclose(f);
	evbuffer_free(b);
	snprintf(cmd, sizeof(cmd), "promtool check metrics <%s 2>&1", path);
	assert_non_null(p = popen(cmd, "r"));
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	rc = pclose(p);
	unlink(path);
	if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
		fail_msg("promtool check metrics (status %d): %s", rc, out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_label),
		cmocka_unit_test(test_not_utf8),
		cmocka_unit_test(test_promtool),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
