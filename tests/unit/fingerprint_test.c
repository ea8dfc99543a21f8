/* Unit tests for proxyd/policy/fingerprint.c: <fingerprint> rules in file
 * order, ja4= lists and patterns, list files (comments, blank lines, bad
 * lines reported at the list's own line), and what is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "cfgread.h"
#include "fingerprint.h"

#define FA "t13d1516h2_8daaf6152771_e5627efa2ab1"
#define FB "t13d3112h2_e8f1e7e78f70_b26ce05bbdd6"
#define FC "t13d311000_e8f1e7e78f70_1f22a2ca17c4"
#define FD "t12d4605h2_85626a9a5f7f_aaf95bb78ec9"

static char dir[64];

/* Loads every <fingerprint> under <s> of xml (the policy file being
 * dir/t.xml); the errors go to *e, their text to buf. */
static int
load(const char *xml, struct px_fp_rules *l, struct px_cfgerr *e,
    char *buf, size_t size)
{
	char file[128];
	xmlDoc *doc;
	xmlNode *n;
	FILE *out = fmemopen(buf, size, "w");
	int rc = 0;

	assert_non_null(out);
	memset(buf, 0, size);
	snprintf(file, sizeof(file), "%s/t.xml", dir);
	memset(e, 0, sizeof(*e));
	e->file = file;
	e->out = out;
	memset(l, 0, sizeof(*l));
	doc = xmlReadMemory(xml, (int)strlen(xml), file, NULL, XML_PARSE_NONET);
	assert_non_null(doc);
	for (n = xmlDocGetRootElement(doc)->children; n != NULL; n = n->next)
		if (n->type == XML_ELEMENT_NODE &&
		    px_fp_load(e, n, file, l) == -1)
			rc = -1;
	xmlFreeDoc(doc);
	fclose(out);
	return rc;
}

static void
write_list(const char *name, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/fp_test.XXXXXX");
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* First match in file order; no match, or no fingerprint: NULL. */
static void
test_order(void **state)
{
	struct px_fp_rules l;
	struct px_cfgerr e;
	const struct px_fp_rule *r;
	char err[512];

	(void)state;
	assert_int_equal(load("<s>\n"
	    "<fingerprint ja4=\"" FA "\" action=\"accept\"/>\n"
	    "<fingerprint ja4=\"t13d*  " FD "\" action=\"deny\" label=\"scripts\"/>\n"
	    "<fingerprint ja4=\"*\" action=\"accept\"/>\n"
	    "</s>", &l, &e, err, sizeof(err)), 0);
	assert_int_equal(l.n, 3);
	r = px_fp_match(&l, FA);
	assert_non_null(r);
	assert_int_equal(r->action, PX_ACT_ACCEPT);
	assert_int_equal(r->line, 2);
	r = px_fp_match(&l, FB);
	assert_non_null(r);
	assert_int_equal(r->action, PX_ACT_DENY);
	assert_string_equal(r->label, "scripts");
	r = px_fp_match(&l, FD);
	assert_non_null(r);
	assert_int_equal(r->line, 3);
	r = px_fp_match(&l, "t12d190800_d83cc789557e_7af1ed941c26");
	assert_non_null(r);
	assert_int_equal(r->line, 4);
	/* No JA4 (a hello px_ja4_hello refused): matched as "-", which the
	 * closing "*" takes, not let through unjudged. */
	r = px_fp_match(&l, "");
	assert_non_null(r);
	assert_int_equal(r->line, 4);
	assert_ptr_equal(px_fp_match(&l, NULL), r);
	assert_null(px_fp_match(NULL, FA));
	px_fp_free(&l);
}

/* A list file: one a line, comments, blanks, relative to the policy. */
static void
test_list(void **state)
{
	struct px_fp_rules l;
	struct px_cfgerr e;
	char err[512];

	(void)state;
	write_list("ok.list", "# refused clients\n\n" FC "\n  " FB
	    "   # curl\r\n" FD);
	assert_int_equal(load("<s><fingerprint list=\"ok.list\" "
	    "action=\"deny\"/></s>", &l, &e, err, sizeof(err)), 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.r[0].nfps, 3);
	assert_non_null(px_fp_match(&l, FB));
	assert_non_null(px_fp_match(&l, FC));
	assert_non_null(px_fp_match(&l, FD));
	assert_null(px_fp_match(&l, FA));
	/* no JA4: no exact fingerprint names it */
	assert_null(px_fp_match(&l, ""));
	/* no pattern in a list: '*' is a bad line there */
	px_fp_free(&l);
}

static void
assert_refused(const char *xml, const char *want)
{
	struct px_fp_rules l;
	struct px_cfgerr e;
	char err[512];

	assert_int_equal(load(xml, &l, &e, err, sizeof(err)), -1);
	if (strstr(err, want) == NULL)
		fail_msg("expected \"%s\" in: %s", want, err);
	px_fp_free(&l);
}

static void
test_refused(void **state)
{
	char want[160];

	(void)state;
	assert_refused("<s>\n<fingerprint ja4=\"" FA "x\" action=\"deny\"/></s>",
	    "t.xml:2: ja4=\"" FA "x\": not a JA4 fingerprint");
	assert_refused("<s><fingerprint ja4=\"T13D1516H2_8DAAF6152771_"
	    "E5627EFA2AB1\" action=\"deny\"/></s>", "not a JA4 fingerprint");
	assert_refused("<s><fingerprint ja4=\" \" action=\"deny\"/></s>",
	    "needs a non-empty ja4=");
	assert_refused("<s><fingerprint action=\"deny\"/></s>",
	    "needs one of ja4= and list=");
	assert_refused("<s><fingerprint ja4=\"" FA "\" list=\"ok.list\" "
	    "action=\"deny\"/></s>", "needs one of ja4= and list=");
	assert_refused("<s><fingerprint ja4=\"" FA "\" action=\"abort\"/></s>",
	    "action=\"abort\"");
	assert_refused("<s><fingerprint ja4=\"" FA "\"/></s>", "action");
	write_list("bad.list", FA "\n\n" FA " " FB "\nt13d*\n");
	snprintf(want, sizeof(want), "%s/bad.list:3: one fingerprint a line",
	    dir);
	assert_refused("<s><fingerprint list=\"bad.list\" action=\"deny\"/></s>",
	    want);
	snprintf(want, sizeof(want), "%s/bad.list:4: \"t13d*\" is not a JA4",
	    dir);
	assert_refused("<s><fingerprint list=\"bad.list\" action=\"deny\"/></s>",
	    want);
	assert_refused("<s><fingerprint list=\"none.list\" action=\"deny\"/></s>",
	    "none.list\": No such file");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
