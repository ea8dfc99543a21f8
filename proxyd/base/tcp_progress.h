/* How far the kernel got with a TCP socket (TCP_INFO), for log lines and
 * the progress of a peer that drains what proxyd already handed over. */
#ifndef PX_TCP_PROGRESS_H
#define PX_TCP_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* Bytes the kernel has moved on this TCP socket so far: acked by the peer
 * plus received from it (TCP_INFO). It grows while a peer drains what
 * proxyd already handed to the kernel, which proxyd itself cannot see.
 * 0 if unknown. */
uint64_t px_tcp_progress(int fd);

/* For a log line: how far a connect on fd got ("connecting, tcp state N,
 * K SYNs again": state 2 is SYN_SENT, K the kernel's retransmissions). */
void	px_tcp_connect_note(int fd, char *buf, size_t size);

#endif
