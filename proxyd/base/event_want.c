/* px_event_want (event_want.h). */
#include "event_want.h"

#include <event2/event.h>

void
px_event_want(struct event *ev, bool *on, bool want)
{
	if (want == *on)
		return;
	if (want)
		event_add(ev, NULL);
	else
		event_del(ev);
	*on = want;
}
