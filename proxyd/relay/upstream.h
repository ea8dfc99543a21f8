/* Server connections: connecting out (SO_MARK, a spoofed source with
 * IP_TRANSPARENT) and the per-worker keep-alive pool of idle ones, each
 * with its transform's state (a handshaken SSL), keyed by what makes them
 * interchangeable (struct px_pool_key: address, source, mark, TLS context
 * and name). It knows no service: its callers hand it those. */
#ifndef PX_UPSTREAM_H
#define PX_UPSTREAM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

struct event_base;
struct px_tls_ctx;
struct px_pool_conn;
struct px_pool_bucket;
struct px_conn_transform;

/* What makes pooled server connections interchangeable. Compared with
 * memcmp: always built by px_pool_key_init. */
struct px_pool_key {
	struct sockaddr_storage	dst;
	struct sockaddr_storage	src;	/* spoofed source; zero if none */
	uint32_t		mark;
	/* TLS (mode="originate"): the context it was made with and the
	 * name it was verified for; zero if plain. */
	uint64_t		tls_ctx;
	char			tls_name[256];
	bool			tls_unverified;	/* keybridge: the client was told */
};

/* A parked connection: its socket and, for TLS, its transform's state
 * (the SSL, still handshaken). */
struct px_pooled {
	int				 fd;
	const struct px_conn_transform	*tf;	/* NULL: plain */
	void				*tf_state;
	atomic_uint_fast64_t		*stale;	/* counts it found dead; NULL */
	/* Parked with its socket known empty (px_conn_quiet): its last
	 * read found no more, and nothing was reported since. */
	bool				 quiet;
	/* Taken from the pool: its entry, whose read event still watches
	 * fd until the new owner's own does (px_pool_release). NULL when
	 * not from the pool. */
	struct px_pool_conn		*held;
};

/* Starts a non-blocking connect to dst, from `source` when it is not NULL
 * (the client's address: spoof-source), with SO_MARK *mark (NULL: none).
 * Returns the fd with *in_progress set when the connect is under way, or
 * -1 with errno set and *stage naming the step that failed. */
int	px_upstream_connect(const uint32_t *mark,
	    const struct sockaddr *dst, socklen_t len,
	    const struct sockaddr *source, bool *in_progress,
	    const char **stage);
/* 0 when the socket connected, else the errno of the failure. */
int	px_upstream_result(int fd);

/* A worker's idle server connections; only that worker touches it. They
 * are grouped by key (one bucket per key, its connections oldest first),
 * so a lookup compares one key per bucket, not one per connection. */
TAILQ_HEAD(px_pool_list, px_pool_conn);
TAILQ_HEAD(px_pool_buckets, px_pool_bucket);
struct px_pool {
	struct px_pool_buckets	 buckets;
	unsigned		 n;
	struct event_base	*base;
	bool			 closed;	/* draining: park nothing */
	/* Parked connections found dead (one writer: the worker). */
	atomic_uint_fast64_t	*stale;
};

void	px_pool_init(struct px_pool *p, struct event_base *base,
	    atomic_uint_fast64_t *stale);
/* mark: SO_MARK (NULL: none); tls: the context connections are
 * originated with (NULL: plain); tls_name: the name a TLS connection was
 * verified for (NULL: none); tls_unverified: its chain did not verify
 * (keybridge let it through). */
void	px_pool_key_init(struct px_pool_key *k, const uint32_t *mark,
	    const struct px_tls_ctx *tls, const struct sockaddr *dst,
	    const struct sockaddr *source, const char *tls_name,
	    bool tls_unverified);
/* An idle connection for k that still looks alive into *out: 0, or -1
 * (none). Its entry stays behind in out->held, its read event still
 * armed: px_pool_release() once the new owner watches the socket (its
 * read event added first, the fd's epoll registration never changes). */
int	px_pool_take(struct px_pool *p, const struct px_pool_key *k,
	    struct px_pooled *out);
/* Frees a taken connection's entry (NULL: nothing), its event deleted;
 * the socket stays open. */
void	px_pool_release(struct px_pool_conn *held);
/* Parks c for reuse (for idle_ms; past max for k, for a second at most,
 * and past 4 times max the oldest dropped), or closes it (and frees its
 * transform's state). Called while the old
 * owner's read event still watches the socket, the pool's takes over
 * without an epoll change. */
void	px_pool_put(struct px_pool *p, const struct px_pool_key *k,
	    const struct px_pooled *c, unsigned max, uint64_t idle_ms);
void	px_pool_flush(struct px_pool *p);

#endif
