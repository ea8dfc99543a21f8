/* Core side of the data channels declared in analyser.h. A channel knows
 * no session: what it needs of its owner comes in a px_chan_host, and the
 * owner (an opaque pointer here) is handed back to the analyser's
 * callback. */
#ifndef PX_CHANNEL_H
#define PX_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyser-t.h"

struct event_base;
struct px_pipe_pool;

struct px_chan_host {
	struct px_session	*owner;		/* passed back to callbacks */
	struct event_base	*base;
	struct px_pipe_pool	*pipes;
	uint64_t		 id;		/* the owner's, for log lines */
	size_t			 buffer;	/* pipe size per direction */
	uint64_t		 idle_ms;	/* the owner's idle timeout */
	bool			 transparent;	/* foreign addresses (TPROXY) */
	bool			 has_mark;
	uint32_t		 mark;		/* SO_MARK towards servers */
	struct px_channel	*list;		/* the owner's open channels */
	struct px_data_listener	*listeners;	/* its kept listeners */
	/* n bytes delivered in dir: into the owner's totals (and keeps it
	 * from idling out). */
	void			(*bytes)(struct px_session *owner,
				    enum px_dir dir, uint64_t n);
	/* A relaying channel's keep-alive for its owner. */
	void			(*touch)(struct px_session *owner);
};

struct px_channel *px_chan_new(struct px_chan_host *host, uint64_t timeout_ms,
	    px_channel_cb cb, void *arg);
struct px_tls_ctx;
struct px_tls_peer;
/* px_channel_tls's core: that end gets TLS with t for peer (copied; its
 * resume conn must outlive the channel's start). 0, or -1. */
int	px_chan_tls(struct px_channel *ch, enum px_chan_end end,
	    const struct px_tls_ctx *t, const struct px_tls_peer *peer);
/* px_data_listener_new's core. */
struct px_data_listener *px_chan_listener_new(struct px_chan_host *host,
	    const struct sockaddr *local, uint16_t lo, uint16_t hi,
	    const struct sockaddr *peer, uint64_t idle_ms);
/* What a metered direction may read next with used bytes counted against
 * limit: up to buffer, as far as the limit leaves plus the byte past it
 * (the one that shows the transfer goes on); 0 once used is past limit.
 * Exact for any limit, UINT64_MAX included. */
uint64_t px_chan_grant_size(uint64_t used, uint64_t limit, uint64_t buffer);
/* Frees every channel of host, without callbacks (the owner is ending:
 * its analyser's on_close ran first); relaying ones are reset. Then its
 * kept listeners. */
void	px_channels_close(struct px_chan_host *host);

#endif
