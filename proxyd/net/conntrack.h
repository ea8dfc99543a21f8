/* The original destination of a REDIRECT/DNAT'ed connection
 * (SO_ORIGINAL_DST, or libnetfilter_conntrack asked without blocking), and
 * the kernel's view of a session's flows for the admin listing (a
 * synchronous round trip, on the admin thread only). One handle per
 * thread; never a dump on the request path. */
#ifndef PX_CONNTRACK_H
#define PX_CONNTRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct px_conntrack;

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

/* The original destination of a REDIRECT/DNAT'ed socket from the kernel's
 * NAT entry for it (SO_ORIGINAL_DST, IP6T_SO_ORIGINAL_DST): no netlink
 * round trip. 0, or -1 with errno. */
int	px_origdst_sockopt(int fd, int family, struct sockaddr_storage *out);

/* Asynchronous lookups on a worker's event loop: ask, then read the
 * answers when px_conntrack_fd() is readable. */
int	px_conntrack_fd(const struct px_conntrack *ct);
/* Asks for the conntrack entry whose reply tuple is (local -> client), in
 * zone; *seq names its answer. 0, or -1 with errno (nothing asked). */
int	px_conntrack_ask_origdst(struct px_conntrack *ct, uint16_t zone,
	    const struct sockaddr *client, const struct sockaddr *local,
	    uint32_t *seq);
/* One call per answer: dst is the entry's original destination, NULL when
 * there is no such entry. */
typedef void	(*px_conntrack_answer_cb)(void *arg, uint32_t seq,
		    const struct sockaddr_storage *dst);
/* Reads what has arrived without blocking. 0, or -1 on a socket error. */
int	px_conntrack_answers(struct px_conntrack *ct, px_conntrack_answer_cb cb,
	    void *arg);
/* The flow whose reply direction (by_reply) or original direction goes
 * from `from` to `to`. For a proxied client use by_reply with our end and
 * the client: it finds the flow whatever NAT did to its destination. */
int	px_conntrack_flow(struct px_conntrack *ct, bool by_reply,
	    uint16_t zone, const struct sockaddr *from,
	    const struct sockaddr *to, struct px_flow *flow);

#endif
