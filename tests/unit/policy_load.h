/* For the analysers' policy tests: load one section through the analyser's
 * own vtable, as the config loader does. Include after cmocka.h. */
#ifndef PX_TEST_POLICY_LOAD_H
#define PX_TEST_POLICY_LOAD_H

#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "analyser.h"
#include "config.h"

/* The root element of xml as a's section: its policy, or NULL with the
 * first error in *e (e->file is "t.xml"). The tree is freed at once: a
 * loader must copy out what it keeps. */
static inline void *
px_test_policy_load(const struct px_analyser *a, const char *xml,
    struct px_cfgerr *e)
{
	xmlDoc *doc;
	void *pol = NULL;
	int rc;

	memset(e, 0, sizeof(*e));
	e->file = "t.xml";
	doc = xmlReadMemory(xml, (int)strlen(xml), "t.xml", NULL,
	    XML_PARSE_NONET);
	assert_non_null(doc);
	rc = a->policy_load(xmlDocGetRootElement(doc), &pol, e);
	xmlFreeDoc(doc);
	if (rc == -1) {
		assert_true(e->count > 0);
		if (pol != NULL && a->policy_free != NULL)
			a->policy_free(pol);
		return NULL;
	}
	assert_int_equal(e->count, 0);
	assert_non_null(pol);
	return pol;
}

#endif
