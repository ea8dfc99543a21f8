/* The one libevent helper every layer uses: keeping an event's pending
 * state as wanted without a syscall when it already is. */
#ifndef PX_EVENT_WANT_H
#define PX_EVENT_WANT_H

#include <stdbool.h>

struct event;

/* Adds or deletes ev so that its pending state (*on) becomes want, with
 * no syscall when it already is. */
void	px_event_want(struct event *ev, bool *on, bool want);

#endif
