#ifndef PX_TCP_PROGRESS_H
#define PX_TCP_PROGRESS_H

#include <stdint.h>

/* Bytes the kernel has moved on this TCP socket so far: acked by the peer
 * plus received from it (TCP_INFO). It grows while a peer drains what
 * proxyd already handed to the kernel, which proxyd itself cannot see.
 * 0 if unknown. */
uint64_t px_tcp_progress(int fd);

#endif
