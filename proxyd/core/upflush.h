/* Server connections the worker closes once their output is written
 * (upflush.c). */
#ifndef PX_UPFLUSH_H
#define PX_UPFLUSH_H

#include <stdint.h>

struct px_worker;
struct px_upconn;

/* Takes u (off its session's list already): written out as the socket
 * lets it, then closed; reset after idle_ms without progress (0: a
 * minute). */
void	px_upflush_take(struct px_worker *w, struct px_upconn *u,
	    uint64_t idle_ms);
/* Resets and closes all that w still holds. */
void	px_upflush_worker_exit(struct px_worker *w);

#endif
