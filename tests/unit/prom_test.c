/* Unit tests for proxyd/base/prom.c: label values as the Prometheus text
 * format reads them back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

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
	assert_true(n < sizeof(got));
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_label),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
