/* Original destinations and the flow view (conntrack.h). */
#include "conntrack.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack_tcp.h>

#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80		/* linux/netfilter_ipv6/ip6_tables.h */
#endif

/* Why libmnl for the request: nfct_query() always sends an original-
 * direction tuple (the library requires ATTR_ORIG_L3PROTO and then emits
 * CTA_TUPLE_ORIG), so the kernel never looks at a reply tuple. A REDIRECT'ed
 * connection is only known to us by its reply tuple. So the request is built
 * here; the answer is still parsed by libnetfilter_conntrack. */
struct px_conntrack {
	struct mnl_socket	*nl;
	unsigned		 portid;
	uint32_t		 seq;
	char			 buf[8192];	/* one message: 8k is plenty */
};

struct px_conntrack *
px_conntrack_open(void)
{
	struct px_conntrack *c = calloc(1, sizeof(*c));
	struct timeval tv = { 0, 200 * 1000 };
	int err;

	if (c == NULL)
		return NULL;
	if ((c->nl = mnl_socket_open(NETLINK_NETFILTER)) == NULL)
		goto fail;
	if (mnl_socket_bind(c->nl, 0, MNL_SOCKET_AUTOPID) == -1)
		goto fail;
	/* The kernel answers a GET within sendto(); the timeout only bounds
	 * how long a worker could ever wait if it did not. */
	(void)setsockopt(mnl_socket_get_fd(c->nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
	    sizeof(tv));
	c->portid = mnl_socket_get_portid(c->nl);
	return c;
fail:
	err = errno;
	if (c->nl != NULL)
		mnl_socket_close(c->nl);
	free(c);
	errno = err;
	return NULL;
}

void
px_conntrack_close(struct px_conntrack *c)
{
	if (c == NULL)
		return;
	mnl_socket_close(c->nl);
	free(c);
}

static void
px_ct_put_tuple(struct nlmsghdr *nlh, int type, const struct sockaddr *src,
    const struct sockaddr *dst)
{
	struct nlattr *tuple, *ip, *proto;
	uint16_t sport, dport;

	tuple = mnl_attr_nest_start(nlh, (uint16_t)type);
	ip = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
	if (src->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)src;
		const struct sockaddr_in *d = (const struct sockaddr_in *)dst;

		mnl_attr_put_u32(nlh, CTA_IP_V4_SRC, s->sin_addr.s_addr);
		mnl_attr_put_u32(nlh, CTA_IP_V4_DST, d->sin_addr.s_addr);
		sport = s->sin_port;
		dport = d->sin_port;
	} else {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)src;
		const struct sockaddr_in6 *d = (const struct sockaddr_in6 *)dst;

		mnl_attr_put(nlh, CTA_IP_V6_SRC, 16, &s->sin6_addr);
		mnl_attr_put(nlh, CTA_IP_V6_DST, 16, &d->sin6_addr);
		sport = s->sin6_port;
		dport = d->sin6_port;
	}
	mnl_attr_nest_end(nlh, ip);
	proto = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
	mnl_attr_put_u8(nlh, CTA_PROTO_NUM, IPPROTO_TCP);
	mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, sport);	/* network order */
	mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, dport);
	mnl_attr_nest_end(nlh, proto);
	mnl_attr_nest_end(nlh, tuple);
}

static int
px_ct_data_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nf_conntrack **out = data;

	if (*out == NULL && (*out = nfct_new()) != NULL &&
	    nfct_nlmsg_parse(nlh, *out) == -1) {
		nfct_destroy(*out);
		*out = NULL;
	}
	return MNL_CB_OK;
}

/* One GET round trip by the original or the reply tuple; the caller
 * destroys the result. NULL: no such flow (or no conntrack). */
static struct nf_conntrack *
px_ct_get(struct px_conntrack *c, bool reply, uint16_t zone,
    const struct sockaddr *src, const struct sockaddr *dst)
{
	struct nf_conntrack *ct = NULL;
	struct nlmsghdr *nlh;
	struct nfgenmsg *nfh;
	ssize_t n;
	int rc, rounds;

	if (c == NULL || src->sa_family != dst->sa_family ||
	    (src->sa_family != AF_INET && src->sa_family != AF_INET6))
		return NULL;
	nlh = mnl_nlmsg_put_header(c->buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = ++c->seq;
	nfh = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfh));
	nfh->nfgen_family = (uint8_t)src->sa_family;
	nfh->version = NFNETLINK_V0;
	nfh->res_id = 0;
	px_ct_put_tuple(nlh, reply ? CTA_TUPLE_REPLY : CTA_TUPLE_ORIG, src, dst);
	if (zone != 0)
		mnl_attr_put_u16(nlh, CTA_ZONE, htons(zone));
	if (mnl_socket_sendto(c->nl, nlh, nlh->nlmsg_len) < 0)
		return NULL;
	/* Bounded: the answer and its ACK, plus any late answer to an
	 * earlier request that timed out (wrong sequence: skipped). */
	for (rounds = 0; rounds < 8; rounds++) {
		n = mnl_socket_recvfrom(c->nl, c->buf, sizeof(c->buf));
		if (n <= 0)
			break;
		rc = mnl_cb_run(c->buf, (size_t)n, c->seq, c->portid,
		    px_ct_data_cb, &ct);
		if (rc == -1 && errno == ESRCH)
			continue;
		if (rc <= MNL_CB_STOP)
			break;
	}
	return ct;
}

/* The original direction's destination of a conntrack entry. */
static void
px_ct_orig_dst(const struct nf_conntrack *ct, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (nfct_get_attr_u8(ct, ATTR_L3PROTO) == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)out;

		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = nfct_get_attr_u32(ct, ATTR_IPV4_DST);
		sin->sin_port = nfct_get_attr_u16(ct, ATTR_PORT_DST);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, nfct_get_attr(ct, ATTR_IPV6_DST), 16);
		sin6->sin6_port = nfct_get_attr_u16(ct, ATTR_PORT_DST);
	}
}

int
px_origdst_sockopt(int fd, int family, struct sockaddr_storage *out)
{
	socklen_t len = sizeof(*out);

	memset(out, 0, sizeof(*out));
	if (family == AF_INET)
		return getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, out, &len);
	if (family == AF_INET6)
		return getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, out, &len);
	errno = EAFNOSUPPORT;
	return -1;
}

int
px_conntrack_fd(const struct px_conntrack *c)
{
	return mnl_socket_get_fd(c->nl);
}

int
px_conntrack_ask_origdst(struct px_conntrack *c, uint16_t zone,
    const struct sockaddr *client, const struct sockaddr *local,
    uint32_t *seq)
{
	struct nlmsghdr *nlh;
	struct nfgenmsg *nfh;
	char buf[MNL_SOCKET_BUFFER_SIZE];

	if (c == NULL || client->sa_family != local->sa_family ||
	    (local->sa_family != AF_INET && local->sa_family != AF_INET6)) {
		errno = EINVAL;
		return -1;
	}
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	/* 0 is never used: it would match any answer. */
	if (++c->seq == 0)
		++c->seq;
	nlh->nlmsg_seq = *seq = c->seq;
	nfh = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfh));
	nfh->nfgen_family = (uint8_t)local->sa_family;
	nfh->version = NFNETLINK_V0;
	nfh->res_id = 0;
	/* After REDIRECT/DNAT the reply tuple is (our end -> client). */
	px_ct_put_tuple(nlh, CTA_TUPLE_REPLY, local, client);
	if (zone != 0)
		mnl_attr_put_u16(nlh, CTA_ZONE, htons(zone));
	return sendto(mnl_socket_get_fd(c->nl), nlh, nlh->nlmsg_len,
	    MSG_DONTWAIT, NULL, 0) < 0 ? -1 : 0;
}

int
px_conntrack_answers(struct px_conntrack *c, px_conntrack_answer_cb cb,
    void *arg)
{
	struct nf_conntrack *ct;
	struct sockaddr_storage dst;
	const struct nlmsghdr *nlh;
	ssize_t n;
	int len, rounds;

	/* Bounded per wakeup; level-triggered epoll brings the rest. */
	for (rounds = 0; rounds < 64; rounds++) {
		n = recv(mnl_socket_get_fd(c->nl), c->buf, sizeof(c->buf),
		    MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR ? 0 : -1;
		len = (int)n;
		for (nlh = (const struct nlmsghdr *)c->buf; mnl_nlmsg_ok(nlh, len);
		    nlh = mnl_nlmsg_next(nlh, &len)) {
			if (nlh->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e =
				    mnl_nlmsg_get_payload(nlh);

				/* 0: the ack after an answer already given. */
				if (e->error != 0)
					cb(arg, nlh->nlmsg_seq, NULL);
				continue;
			}
			if ((nlh->nlmsg_type & 0xff) != IPCTNL_MSG_CT_NEW ||
			    (ct = nfct_new()) == NULL)
				continue;
			if (nfct_nlmsg_parse(nlh, ct) == 0) {
				px_ct_orig_dst(ct, &dst);
				cb(arg, nlh->nlmsg_seq, &dst);
			} else
				cb(arg, nlh->nlmsg_seq, NULL);
			nfct_destroy(ct);
		}
	}
	return 0;
}

static const char *
px_tcp_state_name(uint8_t st)
{
	static const char *const names[] = {
		[TCP_CONNTRACK_NONE] = "NONE",
		[TCP_CONNTRACK_SYN_SENT] = "SYN_SENT",
		[TCP_CONNTRACK_SYN_RECV] = "SYN_RECV",
		[TCP_CONNTRACK_ESTABLISHED] = "ESTABLISHED",
		[TCP_CONNTRACK_FIN_WAIT] = "FIN_WAIT",
		[TCP_CONNTRACK_CLOSE_WAIT] = "CLOSE_WAIT",
		[TCP_CONNTRACK_LAST_ACK] = "LAST_ACK",
		[TCP_CONNTRACK_TIME_WAIT] = "TIME_WAIT",
		[TCP_CONNTRACK_CLOSE] = "CLOSE",
		[TCP_CONNTRACK_SYN_SENT2] = "SYN_SENT2",
	};

	return st < sizeof(names) / sizeof(names[0]) && names[st] ? names[st] :
	    "?";
}

static void
px_ct_fill_flow(struct nf_conntrack *ct, struct px_flow *flow)
{
	char a[INET6_ADDRSTRLEN] = "?", b[INET6_ADDRSTRLEN] = "?";
	uint8_t l3 = nfct_get_attr_u8(ct, ATTR_L3PROTO);

	if (l3 == AF_INET) {
		uint32_t s = nfct_get_attr_u32(ct, ATTR_IPV4_SRC);
		uint32_t d = nfct_get_attr_u32(ct, ATTR_IPV4_DST);

		inet_ntop(AF_INET, &s, a, sizeof(a));
		inet_ntop(AF_INET, &d, b, sizeof(b));
		snprintf(flow->tuple, sizeof(flow->tuple), "tcp %s:%u -> %s:%u",
		    a, ntohs(nfct_get_attr_u16(ct, ATTR_PORT_SRC)), b,
		    ntohs(nfct_get_attr_u16(ct, ATTR_PORT_DST)));
	} else {
		inet_ntop(AF_INET6, nfct_get_attr(ct, ATTR_IPV6_SRC), a, sizeof(a));
		inet_ntop(AF_INET6, nfct_get_attr(ct, ATTR_IPV6_DST), b, sizeof(b));
		snprintf(flow->tuple, sizeof(flow->tuple),
		    "tcp [%s]:%u -> [%s]:%u", a,
		    ntohs(nfct_get_attr_u16(ct, ATTR_PORT_SRC)), b,
		    ntohs(nfct_get_attr_u16(ct, ATTR_PORT_DST)));
	}
	snprintf(flow->state, sizeof(flow->state), "%s", nfct_attr_is_set(ct,
	    ATTR_TCP_STATE) ? px_tcp_state_name(nfct_get_attr_u8(ct,
	    ATTR_TCP_STATE)) : "?");
	flow->mark = nfct_attr_is_set(ct, ATTR_MARK) ?
	    nfct_get_attr_u32(ct, ATTR_MARK) : 0;
	flow->found = true;
}

int
px_conntrack_flow(struct px_conntrack *c, bool by_reply, uint16_t zone,
    const struct sockaddr *from, const struct sockaddr *to,
    struct px_flow *flow)
{
	struct nf_conntrack *ct = px_ct_get(c, by_reply, zone, from, to);

	memset(flow, 0, sizeof(*flow));
	if (ct == NULL)
		return -1;
	px_ct_fill_flow(ct, flow);
	nfct_destroy(ct);
	return 0;
}
