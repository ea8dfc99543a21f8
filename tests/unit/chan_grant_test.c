/* Unit tests for proxyd/relay/data_channel.c's quota grant
 * (px_chan_grant_size): a metered spliced direction reads up to a buffer,
 * as far as the limit leaves plus the byte past it, nothing once the
 * count is past the limit; exact for limits up to UINT64_MAX (quota-bytes
 * accepts it), where limit + 1 - used would wrap to 0 and cut every
 * transfer at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "data_channel.h"

static void
test_small(void **state)
{
	(void)state;
	assert_int_equal(px_chan_grant_size(0, 1000, 65536), 1001);
	assert_int_equal(px_chan_grant_size(0, 1000000, 65536), 65536);
	assert_int_equal(px_chan_grant_size(999, 1000, 65536), 2);
	assert_int_equal(px_chan_grant_size(1000, 1000, 65536), 1);
	assert_int_equal(px_chan_grant_size(1001, 1000, 65536), 0);
	/* Exactly a buffer left (plus the byte past): a buffer. */
	assert_int_equal(px_chan_grant_size(0, 65535, 65536), 65536);
	assert_int_equal(px_chan_grant_size(0, 65536, 65536), 65536);
}

static void
test_near_max(void **state)
{
	(void)state;
	assert_int_equal(px_chan_grant_size(0, UINT64_MAX, 65536), 65536);
	assert_int_equal(px_chan_grant_size(1, UINT64_MAX, 65536), 65536);
	assert_int_equal(px_chan_grant_size(UINT64_MAX - 10, UINT64_MAX,
	    65536), 11);
	assert_int_equal(px_chan_grant_size(UINT64_MAX, UINT64_MAX, 65536), 1);
	assert_int_equal(px_chan_grant_size(0, UINT64_MAX - 1, 65536), 65536);
	assert_true(px_chan_grant_size(0, UINT64_MAX, UINT64_MAX) ==
	    UINT64_MAX);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small),
		cmocka_unit_test(test_near_max),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
