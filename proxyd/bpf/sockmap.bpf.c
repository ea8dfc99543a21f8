/* splice="sockmap": the kernel half of the plug relay (proxyd/sockmap.c is
 * the other). Each relayed socket has a key, 2 * slot + side; its peer is
 * key ^ 1. Every segment a socket receives goes out of its peer (egress
 * redirect) and is counted, so user space never sees the bytes but still
 * knows how many moved (session-end line, metrics, idle timer, and when
 * a FIN may be passed on). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "sockmap_keys.h"

/* The redirect targets. No program is attached to this map: user space
 * puts both sockets here first, so the verdict below always finds the
 * peer, even for the first byte. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, PX_SOCKMAP_KEYS);
	__type(key, __u32);
	__type(value, __u32);
} px_peers SEC(".maps");

/* The sources: adding a socket here attaches the verdict to it. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, PX_SOCKMAP_KEYS);
	__type(key, __u32);
	__type(value, __u32);
} px_srcs SEC(".maps");

/* A sk_skb program is not told under which key it was found: the socket
 * cookie (SO_COOKIE, never reused) leads back to it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PX_SOCKMAP_KEYS);
	__type(key, __u64);
	__type(value, __u32);
} px_keys SEC(".maps");

/* Bytes each key's socket received and sent on, by key. Mappable: the
 * worker reads them with a plain load, no syscall. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, PX_SOCKMAP_KEYS);
	__type(key, __u32);
	__type(value, __u64);
} px_bytes SEC(".maps");

SEC("sk_skb/stream_verdict")
int px_verdict(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	__u32 *key = bpf_map_lookup_elem(&px_keys, &cookie);
	__u32 k;
	__u64 *n;

	/* Not (or no longer) a relayed socket: leave the bytes to the
	 * socket's reader, which then ends the session as an error rather
	 * than lose them silently. */
	if (key == 0)
		return SK_PASS;
	/* A bare FIN comes here too. Sent on, it would reach the peer after
	 * user space passed the FIN on itself (shutdown), and a write on a
	 * shut socket fails the peer (EPIPE in its sk_err). */
	if (skb->len == 0)
		return SK_DROP;
	k = *key;
	if (bpf_sk_redirect_map(skb, &px_peers, k ^ 1, 0) != SK_PASS)
		return SK_PASS;
	/* One writer per key (the socket's softirq, under its lock); the
	 * atomic add keeps the reader from seeing a torn value anyway. */
	n = bpf_map_lookup_elem(&px_bytes, &k);
	if (n != 0)
		__sync_fetch_and_add(n, skb->len);
	return SK_PASS;
}

char _license[] SEC("license") = "GPL";
