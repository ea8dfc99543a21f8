/* The service schema is joined at start from the core's and each
 * registered analyser's fragment (plugins/NAME/NAME.rng): every analyser
 * is in it, it compiles, it takes each analyser's section and refuses an
 * attribute no fragment declares. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/relaxng.h>

#include "analyser.h"

static void
quiet(void *ctx, const char *msg, ...)
{
	(void)ctx; (void)msg;
}

static int
validate(const char *schema, const char *xml)
{
	xmlRelaxNGParserCtxtPtr pc;
	xmlRelaxNGPtr rng;
	xmlRelaxNGValidCtxtPtr vc;
	xmlDocPtr doc;
	int rc;

	pc = xmlRelaxNGNewMemParserCtxt(schema, (int)strlen(schema));
	assert_non_null(pc);
	rng = xmlRelaxNGParse(pc);
	xmlRelaxNGFreeParserCtxt(pc);
	assert_non_null(rng);
	doc = xmlReadMemory(xml, (int)strlen(xml), "t.xml", NULL,
	    XML_PARSE_NONET);
	assert_non_null(doc);
	vc = xmlRelaxNGNewValidCtxt(rng);
	xmlRelaxNGSetValidErrors(vc, (xmlRelaxNGValidityErrorFunc)quiet,
	    (xmlRelaxNGValidityWarningFunc)quiet, NULL);
	rc = xmlRelaxNGValidateDoc(vc, doc);
	xmlRelaxNGFreeValidCtxt(vc);
	xmlFreeDoc(doc);
	xmlRelaxNGFree(rng);
	return rc;
}

static void
test_joined(void **state)
{
	const char *s = px_service_schema();
	char want[96];
	size_t i;

	(void)state;
	assert_non_null(s);
	assert_ptr_equal(s, px_service_schema());	/* built once */
	assert_int_equal(px_analyser_registry_check(), 0);
	for (i = 0; px_analysers[i] != NULL; i++) {
		snprintf(want, sizeof(want), "<define name=\"%s\">",
		    px_analysers[i]->name);
		assert_non_null(strstr(s, want));
		snprintf(want, sizeof(want), "<ref name=\"%s\"/>",
		    px_analysers[i]->name);
		assert_non_null(strstr(s, want));
	}
	/* One grammar, not one per fragment. */
	assert_null(strstr(strstr(s, "<grammar") + 1, "<grammar"));
}

static void
test_sections(void **state)
{
	const char *s = px_service_schema();

	(void)state;
	assert_int_equal(validate(s,
	    "<service name=\"w\" analyser=\"http\">"
	    "<listen address=\"127.0.0.1\" port=\"80\"/>"
	    "<http via=\"no\"><request-header name=\"X\" action=\"drop\"/></http>"
	    "</service>"), 0);
	assert_int_equal(validate(s,
	    "<service name=\"f\" analyser=\"ftp\">"
	    "<listen address=\"127.0.0.1\" port=\"21\"/>"
	    "<ftp client-data=\"passive\"><command name=\"RETR\" action=\"deny\"/></ftp>"
	    "</service>"), 0);
	assert_int_equal(validate(s,
	    "<service name=\"p\" analyser=\"plug\">"
	    "<listen address=\"127.0.0.1\" port=\"1\"/><plug splice=\"no\"/>"
	    "</service>"), 0);
	/* What no fragment declares. */
	assert_int_not_equal(validate(s,
	    "<service name=\"p\" analyser=\"plug\">"
	    "<listen address=\"127.0.0.1\" port=\"1\"/><plug turbo=\"yes\"/>"
	    "</service>"), 0);
	assert_int_not_equal(validate(s,
	    "<service name=\"p\" analyser=\"plug\">"
	    "<listen address=\"127.0.0.1\" port=\"1\"/><smtp/>"
	    "</service>"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_joined),
		cmocka_unit_test(test_sections),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
