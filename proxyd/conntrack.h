/* libnetfilter_conntrack: the original destination of a REDIRECT/DNAT'ed
 * connection, and the kernel's view of a session's flows for the admin
 * listing. One handle per thread; queries are single netlink round trips
 * to the local kernel (microseconds), never a dump on the request path. */
#ifndef PX_CONNTRACK_H
#define PX_CONNTRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct px_conntrack;

enum px_origdst {
	PX_ORIGDST_CONNTRACK = 0,	/* conntrack lookup (the fallback) */
	PX_ORIGDST_SOCKOPT,		/* SO_ORIGINAL_DST (tried first) */
	PX_ORIGDST_FAILED,
};

struct px_flow {
	bool		found;
	char		tuple[160];	/* "tcp A -> B" as the kernel has it */
	char		state[16];	/* TCP state */
	uint32_t	mark;
};

/* NULL if conntrack is unavailable (no module, no CAP_NET_ADMIN): callers
 * fall back to SO_ORIGINAL_DST. */
struct px_conntrack *px_conntrack_open(void);
void	px_conntrack_close(struct px_conntrack *ct);

/* fd: the accepted socket; client and local: its two ends.
 * SO_ORIGINAL_DST (v4, v6) first; a conntrack lookup (one synchronous
 * netlink round trip) only when the socket option cannot answer. ct may
 * be NULL. */
enum px_origdst px_conntrack_original_dst(struct px_conntrack *ct, int fd,
	    const struct sockaddr *client, const struct sockaddr *local,
	    struct sockaddr_storage *out);
/* The flow whose reply direction (by_reply) or original direction goes
 * from `from` to `to`. For a proxied client use by_reply with our end and
 * the client: it finds the flow whatever NAT did to its destination. */
int	px_conntrack_flow(struct px_conntrack *ct, bool by_reply,
	    uint16_t zone, const struct sockaddr *from,
	    const struct sockaddr *to, struct px_flow *flow);

#endif
