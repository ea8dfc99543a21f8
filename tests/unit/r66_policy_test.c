/* Unit tests for plugins/r66/r66_policy.c: the defaults of an absent
 * <r66>, each list's default (an allow-list: empty accepts, configured
 * denies what no rule matches), first match, abort, max-size in the rule's
 * arg, the fixed choices, and the messages of bad values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "config.h"
#include "r66/r66_policy.h"
#include "rules.h"
#include "policy_load.h"

extern const struct px_analyser r66_analyser;

/* Loads the root element of xml as an <r66> section; NULL (with the
 * first error in *e) if the loader refuses it. */
static struct r66_policy *
r66t_load(const char *xml, struct px_cfgerr *e)
{
	return px_test_policy_load(&r66_analyser, xml, e);
}

static void
test_no_section(void **state)
{
	struct px_cfgerr e = { .file = "t.xml" };
	struct r66_policy *p;
	void *pol = NULL;

	(void)state;
	assert_int_equal(r66_policy_load(NULL, &pol, &e), 0);
	p = pol;
	assert_int_equal(p->max_block, 1024 * 1024);
	assert_int_equal(p->modes, 0x1fe);
	assert_true(p->information && p->test);
	assert_false(p->req_block_digest || p->req_global_digest);
	assert_int_equal(px_rules_decide(&p->hosts, "anyone", NULL),
	    PX_ACT_ACCEPT);
	assert_int_equal(px_rules_decide(&p->rules, "any", NULL),
	    PX_ACT_ACCEPT);
	assert_int_equal(px_rules_decide(&p->files, "a/b.bin", NULL),
	    PX_ACT_ACCEPT);
	r66_policy_free(p);
}

static void
test_lists(void **state)
{
	struct px_cfgerr e;
	struct r66_policy *p;
	const struct px_rule *hit;

	(void)state;
	p = r66t_load("<r66>\n"
	    "  <host id=\"a  b\" action=\"accept\"/>\n"
	    "  <host id=\"evil*\" action=\"abort\"/>\n"
	    "  <host id=\"c\" action=\"deny\"/>\n"
	    "  <file pattern=\"*.xml\" max-size=\"10k\"/>\n"
	    "  <file pattern=\"*.pdf\"/>\n"
	    "</r66>\n", &e);
	assert_non_null(p);
	/* first match decides */
	assert_int_equal(px_rules_decide(&p->hosts, "b", &hit), PX_ACT_ACCEPT);
	assert_non_null(hit);
	assert_int_equal(hit->line, 2);
	assert_int_equal(px_rules_decide(&p->hosts, "evil1", &hit),
	    PX_ACT_ABORT);
	assert_int_equal(px_rules_decide(&p->hosts, "c", &hit), PX_ACT_DENY);
	assert_int_equal(hit->line, 4);
	/* configured: what no rule matches is denied, by the default */
	assert_int_equal(px_rules_decide(&p->hosts, "d", &hit), PX_ACT_DENY);
	assert_null(hit);
	/* not configured: everything passes */
	assert_int_equal(p->rules.n, 0);
	assert_int_equal(px_rules_decide(&p->rules, "r", &hit), PX_ACT_ACCEPT);
	assert_null(hit);
	/* action= absent is accept; max-size is the rule's arg, 0 for none;
	 * "*" also matches "/" */
	assert_int_equal(px_rules_decide(&p->files, "d/x.xml", &hit),
	    PX_ACT_ACCEPT);
	assert_int_equal(hit->arg, 10 * 1024);
	assert_int_equal(px_rules_decide(&p->files, "x.pdf", &hit),
	    PX_ACT_ACCEPT);
	assert_int_equal(hit->arg, 0);
	assert_int_equal(px_rules_decide(&p->files, "x.exe", &hit),
	    PX_ACT_DENY);
	assert_null(hit);
	r66_policy_free(p);
}

static void
test_choices(void **state)
{
	static const struct {
		const char *v;
		bool block, global;
	} digests[] = {
		{ "no", false, false }, { "yes", true, true },
		{ "block", true, false }, { "global", false, true },
	};
	struct px_cfgerr e;
	struct r66_policy *p;
	char xml[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(digests) / sizeof(digests[0]); i++) {
		snprintf(xml, sizeof(xml), "<r66 require-digest=\"%s\"/>",
		    digests[i].v);
		assert_non_null(p = r66t_load(xml, &e));
		assert_int_equal(p->req_block_digest, digests[i].block);
		assert_int_equal(p->req_global_digest, digests[i].global);
		r66_policy_free(p);
	}
	assert_non_null(p = r66t_load("<r66 information=\"no\" test=\"yes\" "
	    "max-block=\"64k\"><mode allow=\"send recvmd5\"/></r66>", &e));
	assert_false(p->information);
	assert_true(p->test);
	assert_int_equal(p->max_block, 64 * 1024);
	assert_int_equal(p->modes, (1u << 1) | (1u << 4));
	r66_policy_free(p);
}

static void
test_errors(void **state)
{
	static const struct {
		const char *xml;
		const char *what;
	} cases[] = {
		{ "<r66 require-digest=\"maybe\"/>",
		  "t.xml:1: require-digest=\"maybe\": expected yes, no, block "
		  "or global" },
		{ "<r66 information=\"1\"/>",
		  "information=\"1\": expected yes or no" },
		{ "<r66 test=\"on\"/>", "test=\"on\": expected yes or no" },
		{ "<r66>\n<host id=\"a\" action=\"maybe\"/></r66>",
		  "t.xml:2: action=\"maybe\": expected accept, deny or abort" },
		{ "<r66><rule name=\" \"/></r66>",
		  "name=\"\": expected at least one item" },
		{ "<r66><host/></r66>", "<host> needs id=" },
		{ "<r66><file pattern=\"*\" max-size=\"0\"/></r66>",
		  "max-size=\"0\": must be above 0" },
		{ "<r66><file pattern=\"*\" max-size=\"big\"/></r66>",
		  "max-size=\"big\"" },
		{ "<r66><mode allow=\"send\"/><mode allow=\"recv\"/></r66>",
		  "<mode> given twice" },
		{ "<r66><admin/></r66>", "unknown element <admin> in <r66>" },
	};
	struct px_cfgerr e;
	char xml[512], pat[300];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_null(r66t_load(cases[i].xml, &e));
		if (strstr(e.first, cases[i].what) == NULL)
			fail_msg("%s: got \"%s\", want \"%s\"", cases[i].xml,
			    e.first, cases[i].what);
	}
	/* a pattern over 255 bytes: the helper's message */
	memset(pat, 'x', 256);
	pat[256] = '\0';
	snprintf(xml, sizeof(xml), "<r66><file pattern=\"a %s\"/></r66>", pat);
	assert_null(r66t_load(xml, &e));
	assert_non_null(strstr(e.first, "pattern: a pattern longer than 255"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_section),
		cmocka_unit_test(test_lists),
		cmocka_unit_test(test_choices),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
