/* Unit tests for proxyd/policy/rules.c: first match decides, every default, the
 * action and choice readers with their file:line errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "config.h"
#include "rules.h"

static xmlDoc *doc;

/* The n-th element child (0-based) of the root of the test document. */
static xmlNode *
child(int n)
{
	xmlNode *c;

	for (c = xmlDocGetRootElement(doc)->children; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE && n-- == 0)
			return c;
	fail_msg("no child %d", n);
	return NULL;
}

static int
setup(void **state)
{
	static const char xml[] =
	    "<r>\n"
	    "  <file pattern=\"*.exe  *.com\" action=\"deny\"/>\n"
	    "  <file pattern=\"secret*\" action=\"abort\"/>\n"
	    "  <file pattern=\"*.bin\" action=\"accept\"/>\n"
	    "  <file pattern=\"  \" action=\"maybe\"/>\n"
	    "  <plug splice=\"sometimes\" half-close=\"no\"/>\n"
	    "  <user name=\"Anonymous\"/>\n"
	    "</r>\n";

	(void)state;
	doc = xmlReadMemory(xml, sizeof(xml) - 1, "t.xml", NULL, XML_PARSE_NONET);
	return doc == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	(void)state;
	xmlFreeDoc(doc);
	return 0;
}

static void
test_first_match_and_defaults(void **state)
{
	struct px_cfgerr e = { .file = "t.xml" };
	struct px_rules l;
	const struct px_rule *hit;
	enum px_action a;
	int i;

	(void)state;
	px_rules_init(&l, PX_DEFAULT_ALLOW_LIST, 0);
	/* An empty allow-list accepts: nothing was configured. */
	assert_int_equal(px_rules_decide(&l, "x.txt", &hit), PX_ACT_ACCEPT);
	assert_null(hit);
	for (i = 0; i < 3; i++) {
		assert_int_equal(px_attr_action(&e, child(i), PX_ACTIONS_ADA, true,
		    &a), 0);
		assert_non_null(px_rules_add(&e, &l, child(i), "pattern", true, a));
	}
	assert_int_equal(e.count, 0);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.r[0].npats, 2);
	assert_int_equal(l.r[0].line, 2);
	assert_int_equal(px_rules_decide(&l, "tool.com", &hit), PX_ACT_DENY);
	assert_ptr_equal(hit, &l.r[0]);
	assert_int_equal(px_rules_decide(&l, "secret.bin", &hit), PX_ACT_ABORT);
	assert_ptr_equal(hit, &l.r[1]);	/* first match, not best match */
	assert_int_equal(px_rules_decide(&l, "a.bin", &hit), PX_ACT_ACCEPT);
	/* A configured allow-list denies what it does not name. */
	assert_int_equal(px_rules_decide(&l, "a.txt", &hit), PX_ACT_DENY);
	assert_null(hit);
	l.dflt = PX_DEFAULT_ACCEPT;
	assert_int_equal(px_rules_decide(&l, "a.txt", NULL), PX_ACT_ACCEPT);
	px_rules_free(&l);
	px_rules_init(&l, PX_DEFAULT_DENY, 0);
	assert_int_equal(px_rules_decide(&l, "a.txt", NULL), PX_ACT_DENY);
	px_rules_free(&l);
}

static void
test_case_folding(void **state)
{
	struct px_cfgerr e = { .file = "t.xml" };
	struct px_rules l;

	(void)state;
	px_rules_init(&l, PX_DEFAULT_DENY, FNM_CASEFOLD);
	assert_non_null(px_rules_add(&e, &l, child(5), "name", true, PX_ACT_ACCEPT));
	assert_int_equal(px_rules_decide(&l, "anonymous", NULL), PX_ACT_ACCEPT);
	l.fnm_flags = 0;
	assert_int_equal(px_rules_decide(&l, "anonymous", NULL), PX_ACT_DENY);
	px_rules_free(&l);
}

static void
test_errors(void **state)
{
	struct px_cfgerr e = { .file = "t.xml" };
	struct px_rules l;
	enum px_action a = PX_ACT_ACCEPT;
	int v = 7;
	static const char *const splice[] = { "auto", "no", NULL };

	(void)state;
	px_rules_init(&l, PX_DEFAULT_DENY, 0);
	assert_int_equal(px_attr_action(&e, child(3), PX_ACTIONS_ADA, true, &a),
	    -1);
	assert_string_equal(e.first,
	    "t.xml:5: action=\"maybe\": expected accept, deny or abort");
	e.count = 0;
	/* abort where only accept and deny are allowed */
	assert_int_equal(px_attr_action(&e, child(1), PX_ACTIONS_AD, true, &a),
	    -1);
	assert_string_equal(e.first,
	    "t.xml:3: action=\"abort\": expected accept or deny");
	e.count = 0;
	assert_int_equal(px_attr_action(&e, child(4), PX_ACTIONS_AD, true, &a),
	    -1);
	assert_string_equal(e.first,
	    "t.xml:6: <plug> needs action= (accept or deny)");
	e.count = 0;
	a = PX_ACT_DENY;
	assert_int_equal(px_attr_action(&e, child(4), PX_ACTIONS_AD, false, &a), 0);
	assert_int_equal(a, PX_ACT_DENY);
	assert_null(px_rules_add(&e, &l, child(3), "pattern", true, PX_ACT_DENY));
	assert_string_equal(e.first, "t.xml:5: <file> needs a non-empty pattern=");
	assert_int_equal(l.n, 0);
	e.count = 0;
	assert_int_equal(px_attr_choice(&e, child(4), "splice", splice, &v), -1);
	assert_string_equal(e.first,
	    "t.xml:6: splice=\"sometimes\": expected auto or no");
	assert_int_equal(v, 7);
	assert_int_equal(px_attr_choice(&e, child(4), "absent", splice, &v), 0);
	assert_int_equal(v, 7);
	px_rules_free(&l);
}

/* What deny lines print as rule=: FILE:LINE with the policy file's base
 * name, the label when the rule has one, "default" without a rule; and
 * the labels a deny line could not hold as one word are refused. */
static void
test_rule_ref(void **state)
{
	static const char xml[] =
	    "<r>\n"
	    "  <file pattern=\"*.exe\" action=\"deny\"/>\n"
	    "  <file pattern=\"*.com\" label=\"no-dos_1.0:a/b\" action=\"deny\"/>\n"
	    "  <file pattern=\"*.x\" label=\"two words\" action=\"deny\"/>\n"
	    "  <file pattern=\"*.y\" label=\"\" action=\"deny\"/>\n"
	    "  <file pattern=\"*.z\" label=\"a=b\" action=\"deny\"/>\n"
	    "  <file pattern=\"*.w\" label=\"%s\" action=\"deny\"/>\n"
	    "</r>\n";
	char text[sizeof(xml) + PX_LABEL_MAX + 8], buf[PX_RULE_REF_MAX];
	char longest[PX_LABEL_MAX + 2];
	struct px_cfgerr e = { .file = "t.xml" };
	const struct px_rule *hit;
	struct px_rules l;
	xmlDoc *d;
	xmlNode *c;
	int i;

	(void)state;
	memset(longest, 'a', PX_LABEL_MAX + 1);
	longest[PX_LABEL_MAX + 1] = '\0';
	snprintf(text, sizeof(text), xml, longest);
	d = xmlReadMemory(text, (int)strlen(text), "t.xml", NULL,
	    XML_PARSE_NONET);
	assert_non_null(d);
	px_rules_init(&l, PX_DEFAULT_DENY, 0);
	for (i = 0, c = xmlDocGetRootElement(d)->children; c != NULL;
	    c = c->next) {
		if (c->type != XML_ELEMENT_NODE)
			continue;
		e.count = 0;
		if (i++ < 2) {
			assert_non_null(px_rules_add(&e, &l, c, "pattern", true,
			    PX_ACT_DENY));
			continue;
		}
		assert_null(px_rules_add(&e, &l, c, "pattern", true,
		    PX_ACT_DENY));
		assert_int_equal(e.count, 1);
		assert_non_null(strstr(e.first, ": expected 1 to 64 letters, "
		    "digits or ._:/-"));
	}
	assert_int_equal(l.n, 2);
	px_rules_decide(&l, "a.exe", &hit);
	assert_string_equal(px_rule_ref(hit, "/etc/proxyd/conf.d/web.xml", buf,
	    sizeof(buf)), "web.xml:2");
	assert_string_equal(px_rule_ref(hit, "web.xml", buf, sizeof(buf)),
	    "web.xml:2");
	assert_string_equal(px_rule_ref(hit, NULL, buf, sizeof(buf)), "-:2");
	px_rules_decide(&l, "a.com", &hit);
	assert_string_equal(px_rule_ref(hit, "/x/web.xml", buf, sizeof(buf)),
	    "no-dos_1.0:a/b");
	px_rules_decide(&l, "a.txt", &hit);
	assert_null(hit);
	assert_string_equal(px_rule_ref(hit, "/x/web.xml", buf, sizeof(buf)),
	    "default");
	assert_string_equal(px_rule_ref_at(12, NULL, "/a/b/ftp.xml", buf,
	    sizeof(buf)), "ftp.xml:12");
	/* A label of the longest length is taken whole. */
	longest[PX_LABEL_MAX] = '\0';
	assert_string_equal(px_rule_ref_at(12, longest, "/a/b/ftp.xml", buf,
	    sizeof(buf)), longest);
	px_rules_free(&l);
	xmlFreeDoc(d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_match_and_defaults),
		cmocka_unit_test(test_case_folding),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_rule_ref),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
