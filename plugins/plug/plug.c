/* plug: relays bytes both ways without looking at them. The first analyser,
 * and the model for the others: a policy loader and an on_open that hands
 * the whole stream to the core's relay. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "analyser.h"
#include "cfgread.h"
#include "rules.h"

struct plug_policy {
	bool	splice;		/* splice="auto" */
	bool	half_close;
};

static const char *const plug_splice_names[] = { "auto", "no", NULL };
static const char *const plug_yes_no[] = { "yes", "no", NULL };

static int
plug_policy_load(const xmlNode *sec, void **pol, struct px_cfgerr *e)
{
	struct plug_policy *p;
	int splice = 0, half_close = 0;	/* auto, yes */

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		px_cfg_error(e, sec, "out of memory");
		return -1;
	}
	if (px_attr_choice(e, sec, "splice", plug_splice_names, &splice) == -1 ||
	    px_attr_choice(e, sec, "half-close", plug_yes_no,
	    &half_close) == -1) {
		free(p);
		return -1;
	}
	p->splice = splice == 0;
	p->half_close = half_close == 0;
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
	/* Nothing but the relay: a quiet session can change processes. */
	.handover = true,
};
