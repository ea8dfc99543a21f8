/* Unit tests for proxyd/policy/directive.c and the tables config.c
 * declares: every declared attribute has its row in docs/CONFIG.md with
 * the same default (and, for the daemon file, the same range), and the
 * loader applies defaults, ranges and choices as declared. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>

#include "config.h"
#include "directive.h"

static char *
read_doc(void)
{
	const char *src = getenv("PROXYD_SOURCE_DIR");
	char path[1024];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/docs/CONFIG.md", src ? src : ".");
	f = fopen(path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* Column col (1: the name) of the table row naming `elem/@attr`, without
 * backquotes and outer spaces, into out. false if there is no such row. */
static bool
doc_column(const char *doc, const char *elem, const char *attr, int col,
    char *out, size_t size)
{
	char key[128];
	const char *row, *end, *p;
	size_t k = 0;
	int c;

	snprintf(key, sizeof(key), "\n| `%s/@%s` |", elem, attr);
	if ((row = strstr(doc, key)) == NULL)
		return false;
	row += 2;
	end = strchr(row, '\n');
	for (c = 0, p = row; p < end && c < col; p++)
		if (*p == '|')
			c++;
	while (p < end && *p != '|' && k + 1 < size) {
		if (*p != '`')
			out[k++] = *p;
		p++;
	}
	while (k > 0 && out[k - 1] == ' ')
		k--;
	out[k] = '\0';
	memmove(out, out + strspn(out, " "), strlen(out + strspn(out, " ")) + 1);
	return true;
}

static void
check_table(const struct px_directive *t, size_t n, bool with_range)
{
	char *doc = read_doc();
	char got[256], want[256];
	size_t i;

	for (i = 0; i < n; i++) {
		if (!doc_column(doc, t[i].element, t[i].attr, 1, got,
		    sizeof(got)))
			fail_msg("docs/CONFIG.md has no row for `%s/@%s`",
			    t[i].element, t[i].attr);
		if (t[i].dflt != NULL && strcmp(got, t[i].dflt) != 0)
			fail_msg("`%s/@%s`: docs say default \"%s\", the loader "
			    "\"%s\"", t[i].element, t[i].attr, got, t[i].dflt);
		if (!with_range || t[i].type == PX_D_PATH ||
		    t[i].type == PX_D_BOOL)
			continue;
		assert_true(doc_column(doc, t[i].element, t[i].attr, 2, got,
		    sizeof(got)));
		px_directive_range(&t[i], want, sizeof(want));
		if (strcmp(got, want) != 0)
			fail_msg("`%s/@%s`: docs say range \"%s\", the loader "
			    "\"%s\"", t[i].element, t[i].attr, got, want);
	}
	free(doc);
}

static void
test_daemon_table_matches_docs(void **state)
{
	(void)state;
	assert_true(px_ndaemon_directives >= 10);
	check_table(px_daemon_directives, px_ndaemon_directives, true);
}

static void
test_service_table_matches_docs(void **state)
{
	(void)state;
	assert_true(px_nservice_directives >= 5);
	check_table(px_service_directives, px_nservice_directives, false);
}

struct sample {
	uint64_t	 big;
	uint16_t	 small;
	bool		 flag;
	int		 level;
	char		*path;
};

static const char *const levels[] = { "low", "high", NULL };
static const int level_values[] = { 10, 20 };
static const struct px_directive sample_table[] = {
	{ "a", "big", PX_D_SIZE, "64k", 4096, 1ULL << 30, NULL, NULL,
	    PX_FIELD(struct sample, big) },
	{ "a", "small", PX_D_UINT, "7", 1, 100, NULL, NULL,
	    PX_FIELD(struct sample, small) },
	{ "b", "flag", PX_D_BOOL, "no", 0, 0, NULL, NULL,
	    PX_FIELD(struct sample, flag) },
	{ "b", "level", PX_D_CHOICE, "high", 0, 0, levels, level_values,
	    PX_FIELD(struct sample, level) },
	{ "b", "path", PX_D_PATH, "x/y", 0, 0, NULL, NULL,
	    PX_FIELD(struct sample, path) },
};

static int
load_sample(const char *xml, struct sample *out, struct px_cfgerr *e)
{
	xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "t.xml", NULL,
	    XML_PARSE_NONET);
	int rc;

	assert_non_null(doc);
	memset(out, 0, sizeof(*out));
	memset(e, 0, sizeof(*e));
	e->file = "/etc/t.xml";
	rc = px_directives_load(sample_table, 5, out, xmlDocGetRootElement(doc),
	    "/etc/t.xml", e);
	xmlFreeDoc(doc);
	return rc;
}

static void
test_loader(void **state)
{
	struct sample s;
	struct px_cfgerr e;

	(void)state;
	assert_int_equal(load_sample("<r/>", &s, &e), 0);
	assert_int_equal(s.big, 65536);
	assert_int_equal(s.small, 7);
	assert_false(s.flag);
	assert_int_equal(s.level, 20);
	assert_string_equal(s.path, "/etc/x/y");
	free(s.path);

	assert_int_equal(load_sample("<r><a big=\"1m\" small=\"100\"/>"
	    "<b flag=\"yes\" level=\"low\" path=\"/abs\"/></r>", &s, &e), 0);
	assert_int_equal(s.big, 1 << 20);
	assert_int_equal(s.small, 100);
	assert_true(s.flag);
	assert_int_equal(s.level, 10);
	assert_string_equal(s.path, "/abs");
	free(s.path);

	assert_int_equal(load_sample("<r><a big=\"1k\" small=\"101\"/>\n"
	    "<b flag=\"maybe\" level=\"mid\" path=\"\"/></r>", &s, &e), -1);
	assert_int_equal(e.count, 5);
	assert_non_null(strstr(e.first, "/etc/t.xml:1: big=\"1k\": must be "
	    "between 4096 and 1073741824 bytes"));
	assert_non_null(strstr(e.last, "/etc/t.xml:2: path=\"\": expected a "
	    "path"));
	free(s.path);
}

static void
test_ranges(void **state)
{
	char buf[64];

	(void)state;
	px_directive_range(&sample_table[0], buf, sizeof(buf));
	assert_string_equal(buf, "4k..1g");
	px_directive_range(&sample_table[1], buf, sizeof(buf));
	assert_string_equal(buf, "1..100");
	px_directive_range(&sample_table[3], buf, sizeof(buf));
	assert_string_equal(buf, "low, high");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_daemon_table_matches_docs),
		cmocka_unit_test(test_service_table_matches_docs),
		cmocka_unit_test(test_loader),
		cmocka_unit_test(test_ranges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
