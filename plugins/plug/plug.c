/* plug: relays bytes both ways without looking at them. The first analyser,
 * and the model for the others: a policy loader and an on_open that hands
 * the whole stream to the core's relay. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "analyser.h"
#include "config.h"

struct plug_policy {
	bool	splice;		/* splice="auto" */
	bool	half_close;
};

static int
plug_attr_choice(const xmlNode *sec, const char *name, const char *yes,
    const char *no, bool *out, struct px_cfgerr *e)
{
	xmlChar *v;
	int rc = 0;

	if (sec == NULL ||
	    (v = xmlGetProp((xmlNode *)sec, (const xmlChar *)name)) == NULL)
		return 0;
	if (strcmp((char *)v, yes) == 0)
		*out = true;
	else if (strcmp((char *)v, no) == 0)
		*out = false;
	else {
		px_cfg_error(e, sec, "%s=\"%s\": expected %s or %s", name,
		    (char *)v, yes, no);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

static int
plug_policy_load(const xmlNode *sec, void **pol, struct px_cfgerr *e)
{
	struct plug_policy *p;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		px_cfg_error(e, sec, "out of memory");
		return -1;
	}
	p->splice = true;
	p->half_close = true;
	if (plug_attr_choice(sec, "splice", "auto", "no", &p->splice, e) == -1 ||
	    plug_attr_choice(sec, "half-close", "yes", "no", &p->half_close,
	    e) == -1) {
		free(p);
		return -1;
	}
	*pol = p;
	return 0;
}

static void
plug_policy_free(void *pol)
{
	free(pol);
}

static int
plug_on_open(struct px_session *s, void *st)
{
	const struct plug_policy *p = px_session_policy(s);

	(void)st;
	return px_session_relay(s, p->splice ? PX_RELAY_SPLICE :
	    PX_RELAY_BUFFERED, p->half_close);
}

const struct px_analyser plug_analyser = {
	.name = "plug",
	.state_size = 0,
	.policy_load = plug_policy_load,
	.policy_free = plug_policy_free,
	.on_open = plug_on_open,
	.on_data = NULL,
	.on_close = NULL,
};
