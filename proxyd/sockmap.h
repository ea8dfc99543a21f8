/* splice="sockmap": relaying a plug session inside the kernel with BPF
 * sockmap redirection (proxyd/bpf/sockmap.bpf.c). Loaded once at start, as
 * root, when a service asks for it; when that fails (no CAP_BPF, an old
 * kernel, a build without libbpf) every such service splices instead.
 * The relay (relay.c) owns both sockets and drives the rest: EOF, FIN,
 * counters. */
#ifndef PX_SOCKMAP_H
#define PX_SOCKMAP_H

#include <stdbool.h>
#include <stdint.h>

/* One relayed pair in the maps: keys 2 * slot (client) and 2 * slot + 1. */
struct px_sockmap_link {
	uint32_t	 slot;
	uint64_t	 cookie[2];	/* by side */
	uint64_t	 written0[2];	/* bytes written into each before */
};

/* A policy asks for it (plug's splice="sockmap"): load at start. */
void	px_sockmap_want(void);
bool	px_sockmap_wanted(void);
/* At start, before privileges are dropped. 0 or -1; either way the
 * outcome is said once by px_sockmap_log() (the log is not open yet). */
int	px_sockmap_load(void);
void	px_sockmap_log(void);
bool	px_sockmap_loaded(void);
void	px_sockmap_unload(void);

/* Puts client fd[0] and server fd[1] into the maps and starts the kernel
 * relay, bytes already queued included. 0, or -1 with errno (no slot
 * left, or the kernel refused): nothing is left in the maps. */
int	px_sockmap_attach(struct px_sockmap_link *l, const int fd[2]);
/* Takes the pair out of the verdict's sight and frees the slot; the
 * sockets leave the socket maps when they are closed. */
void	px_sockmap_detach(struct px_sockmap_link *l);
/* Bytes side `side` received and the kernel redirected to its peer. */
uint64_t px_sockmap_bytes(const struct px_sockmap_link *l, int side);
/* Bytes written into the send stream of fd so far (acked + queued):
 * compared with the peer's count, whether the redirect has caught up. */
uint64_t px_sockmap_written(int fd);

#endif
