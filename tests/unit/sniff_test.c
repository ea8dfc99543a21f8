/* Unit tests for proxyd/scan/sniff.c: <content> rules as loaded (types,
 * actions, errors, the rule's FILE:LINE), the first-match choice against
 * a naive model over random rule lists, and the libmagic judge on bytes
 * of known types. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <libxml/parser.h>

#include "cfgread.h"
#include "sniff.h"

/* Loads the <content> children of <service>...</service>; the number
 * of errors reported. */
static unsigned
load(struct px_content_policy *p, const char *xml)
{
	xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "svc.xml", NULL,
	    0);
	struct px_cfgerr e = { .out = NULL, .file = "svc.xml" };

	assert_non_null(doc);
	(void)px_content_policy_load(p, xmlDocGetRootElement(doc), "svc.xml",
	    &e);
	xmlFreeDoc(doc);
	return e.count;
}

static void
test_load(void **state)
{
	struct px_content_policy p;
	const struct px_content_rule *r;

	(void)state;
	assert_int_equal(load(&p, "<service>\n"
	    "<content type=\"application/x-dosexec  application/x-executable\" "
	    "action=\"deny\"/>\n"
	    "<scan scanner=\"av\"/>\n"
	    "<content type=\"text/*\" action=\"accept\"/>\n"
	    "</service>"), 0);
	assert_int_equal(p.n, 2);
	assert_int_equal(p.v[0].ntypes, 2);
	assert_true(p.v[0].deny);
	assert_string_equal(p.v[0].ref, "svc.xml:2");
	assert_false(p.v[1].deny);
	assert_true(p.v[1].types[0].prefix);
	assert_string_equal(p.v[1].ref, "svc.xml:4");
	r = px_content_match(&p, "APPLICATION/X-Executable");
	assert_ptr_equal(r, &p.v[0]);
	assert_ptr_equal(px_content_match(&p, "text/plain"), &p.v[1]);
	assert_null(px_content_match(&p, "texts/plain"));
	assert_null(px_content_match(&p, "application/x-executables"));
	assert_null(px_content_match(&p, "application/x-pie-executable"));
	px_content_policy_free(&p);

	assert_int_equal(load(&p, "<service/>"), 0);
	assert_int_equal(p.n, 0);
	assert_null(px_content_match(&p, "text/plain"));

	/* Each bad value is an error. */
	assert_int_equal(load(&p, "<service><content type=\"text\" "
	    "action=\"deny\"/></service>"), 1);
	px_content_policy_free(&p);
	assert_int_equal(load(&p, "<service><content type=\"*/*\" "
	    "action=\"deny\"/></service>"), 1);
	px_content_policy_free(&p);
	assert_int_equal(load(&p, "<service><content type=\"text/pl*\" "
	    "action=\"deny\"/></service>"), 1);
	px_content_policy_free(&p);
	assert_int_equal(load(&p, "<service><content type=\"text/\" "
	    "action=\"deny\"/></service>"), 1);
	px_content_policy_free(&p);
	assert_int_equal(load(&p, "<service><content type=\"text/plain\" "
	    "action=\"drop\"/></service>"), 1);
	px_content_policy_free(&p);
	assert_int_equal(load(&p, "<service><content type=\" \" "
	    "action=\"deny\"/></service>"), 1);
	px_content_policy_free(&p);
}

/* The model: rules as (type string, deny); a type ending in slash-star
 * matches by what is before the star, case-insensitively. */
static const char *const majors[] = { "text", "application", "image",
	"Text" };
static const char *const minors[] = { "plain", "x-executable",
	"x-dosexec", "html", "x-Executable", "*" };

static int
model_match(char types[][40], const int *rule_of, size_t ntypes,
    const char *mime)
{
	size_t i;

	for (i = 0; i < ntypes; i++) {
		size_t len = strlen(types[i]);

		if (types[i][len - 1] == '*' ?
		    strncasecmp(mime, types[i], len - 1) == 0 :
		    strcasecmp(mime, types[i]) == 0)
			return rule_of[i];
	}
	return -1;
}

static void
test_match_random(void **state)
{
	unsigned seed = 28, round;

	(void)state;
	for (round = 0; round < 2000; round++) {
		char xml[4096], types[32][40], mime[40];
		int rule_of[32];
		size_t ntypes = 0, nrules = 1 + rand_r(&seed) % 5, r, k;
		struct px_content_policy p;
		const struct px_content_rule *got;
		int want, q;

		k = (size_t)snprintf(xml, sizeof(xml), "<service>");
		for (r = 0; r < nrules; r++) {
			size_t t, nt = 1 + rand_r(&seed) % 3;

			k += (size_t)snprintf(xml + k, sizeof(xml) - k,
			    "<content type=\"");
			for (t = 0; t < nt; t++) {
				snprintf(types[ntypes], sizeof(types[0]),
				    "%s/%s", majors[rand_r(&seed) % 4],
				    minors[rand_r(&seed) % 6]);
				rule_of[ntypes] = (int)r;
				k += (size_t)snprintf(xml + k, sizeof(xml) - k,
				    "%s%s", t ? " " : "", types[ntypes++]);
			}
			k += (size_t)snprintf(xml + k, sizeof(xml) - k,
			    "\" action=\"%s\"/>", rand_r(&seed) % 2 ?
			    "deny" : "accept");
		}
		snprintf(xml + k, sizeof(xml) - k, "</service>");
		assert_int_equal(load(&p, xml), 0);
		for (q = 0; q < 8; q++) {
			snprintf(mime, sizeof(mime), "%s/%s",
			    majors[rand_r(&seed) % 4],
			    minors[rand_r(&seed) % 5]);
			want = model_match(types, rule_of, ntypes, mime);
			got = px_content_match(&p, mime);
			if (want == -1)
				assert_null(got);
			else
				assert_ptr_equal(got, &p.v[want]);
		}
		px_content_policy_free(&p);
	}
}

static void
test_judge(void **state)
{
	static const unsigned char elf[64] = { 0x7f, 'E', 'L', 'F', 2, 1, 1, 0,
		[16] = 2, 0, 0x3e, 0, 1, 0, 0, 0, [52] = 64, 0, 56, 0, 1 };
	unsigned char mz[128] = { 'M', 'Z', 0x90, 0 };
	const char *text = "hello, world\nthis is text\n";
	struct px_content_policy p;
	struct px_content_verdict v;

	(void)state;
	assert_int_equal(load(&p, "<service>"
	    "<content type=\"application/x-dosexec application/x-executable\" "
	    "action=\"deny\"/></service>"), 0);
	px_content_judge(&p, elf, sizeof(elf), &v);
	assert_string_equal(v.type, "application/x-executable");
	assert_true(v.deny);
	assert_ptr_equal(v.rule, &p.v[0]);
	px_content_judge(&p, mz, sizeof(mz), &v);
	assert_string_equal(v.type, "application/x-dosexec");
	assert_true(v.deny);
	px_content_judge(&p, text, strlen(text), &v);
	assert_string_equal(v.type, "text/plain");
	assert_false(v.deny);
	assert_null(v.rule);
	px_content_judge(&p, "", 0, &v);
	assert_false(v.deny);
	px_content_policy_free(&p);
	px_sniff_worker_exit();
}

static void
test_sniff_add(void **state)
{
	struct evbuffer *b = evbuffer_new();
	struct px_sniff *sn = calloc(1, sizeof(*sn));
	char data[10000];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(data); i++)
		data[i] = (char)i;
	evbuffer_add(b, data, sizeof(data));
	/* Runs of 700, 0 and 3000: only the first want bytes, in order. */
	assert_false(px_sniff_add(sn, b, 700, 4096));
	evbuffer_drain(b, 700);
	assert_false(px_sniff_add(sn, b, 0, 4096));
	assert_true(px_sniff_add(sn, b, 5000, 4096));
	assert_int_equal(sn->n, 4096);
	assert_memory_equal(sn->buf, data, 4096);
	assert_int_equal(evbuffer_get_length(b), sizeof(data) - 700);
	assert_true(px_sniff_add(sn, b, 100, 4096));
	assert_int_equal(sn->n, 4096);
	memset(sn, 0, sizeof(*sn));
	assert_true(px_sniff_add(sn, b, 100, 50));
	assert_int_equal(sn->n, 50);
	free(sn);
	evbuffer_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_match_random),
		cmocka_unit_test(test_judge),
		cmocka_unit_test(test_sniff_add),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
