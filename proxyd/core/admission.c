/* Admission and destination: a connection accepted on a listener becomes
 * a session once its client is allowed, its original destination is known
 * (the socket, or conntrack asked without blocking), a shared port has
 * chosen its service and the destination is not the proxy itself. */
#include "session.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "data_channel.h"
#include "conntrack.h"
#include "log.h"
#include "rules.h"
#include "tls_hello.h"
#include "tcp_progress.h"
#include "upstream.h"
#include "worker.h"
#include "session_int.h"
#include "srclimit.h"

static atomic_uint_fast64_t px_session_ids;

uint64_t
px_session_ids_next(void)
{
	return atomic_load(&px_session_ids) + 1;
}

void
px_session_ids_from(uint64_t first)
{
	atomic_store(&px_session_ids, first - 1);
}

/* Whether addr is one of this host's own addresses: only those can be
 * bound without IP_FREEBIND/IP_TRANSPARENT. */
static bool
px_is_local_address(const struct sockaddr *addr)
{
	struct sockaddr_storage ss;
	socklen_t len = px_sockaddr_len(addr);
	int fd, rc;

	px_sockaddr_copy(&ss, addr);
	px_sockaddr_set_port(&ss, 0);
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return true;	/* can't tell: refuse rather than loop */
	rc = bind(fd, (struct sockaddr *)&ss, len);
	close(fd);
	return rc == 0 || errno != EADDRNOTAVAIL;
}

/* A connection addressed to the listener itself rather than diverted to
 * it: relaying it would loop back into the proxy (Zorp refuses it too).
 * On a wildcard listener that means the listen port on one of our own
 * addresses; a diverted connection to a far host on that port is fine. */
static bool
px_is_direct(const struct px_service *svc, const struct sockaddr *dst)
{
	const struct sockaddr *l = (const struct sockaddr *)&svc->listen;

	if (px_sockaddr_port(dst) != px_sockaddr_port(l))
		return false;
	if (!px_sockaddr_is_wildcard(l))
		return px_sockaddr_same_host(dst, l);
	return px_is_local_address(dst);
}

/* Sets s->dst and s->server from the deployment mode. 0, or -1 after
 * closing the session. */
static int
px_session_destination(struct px_session *s)
{
	const struct px_service *svc = s->svc;
	socklen_t len = sizeof(s->local);

	/* Fixed mode never needs our end of the client socket (the admin
	 * listing asks for it itself): one syscall less per session. */
	if (svc->mode != PX_MODE_FIXED &&
	    getsockname(s->cfd, (struct sockaddr *)&s->local, &len) == -1) {
		px_session_endf(s, PX_END_CLIENT_FAIL, "client-error: %s",
		    strerror(errno));
		return -1;
	}
	switch (svc->mode) {
	case PX_MODE_TRANSPARENT:
		/* TPROXY keeps the original destination as our local end. */
		memcpy(&s->dst, &s->local, sizeof(s->dst));
		break;
	case PX_MODE_REDIRECT:
		/* SO_ORIGINAL_DST first, as HAProxy and nginx do: no netlink
		 * round trip. conntrack otherwise, asked without blocking: its
		 * answer continues the session (px_session_origdst_answer). */
		if (!svc->origdst_conntrack && px_origdst_sockopt(s->cfd,
		    s->local.ss_family, &s->dst) == 0) {
			PX_SC_ADD(s->m, origdst[PX_ORIGDST_SOCKOPT], 1);
			break;
		}
		if (px_session_ask_conntrack(s) == 0)
			return 1;
		PX_SC_ADD(s->m, origdst[PX_ORIGDST_FAILED], 1);
		px_session_endf(s, PX_END_PROXY, "error: original destination "
		    "unknown (no SO_ORIGINAL_DST, conntrack: %s)",
		    strerror(errno));
		return -1;
	case PX_MODE_FORWARD:
		/* The analyser learns it from each request. */
		return 0;
	default:
		memcpy(&s->dst, &svc->target, svc->target_len);
		break;
	}
	return px_session_check_dst(s);
}

/* rule= of a refusal by <clients> or <servers> l of s's service; NULL:
 * by no single list (several services share the listener). */
static void
px_session_rule_list(struct px_session *s, const struct px_addrlist *l)
{
	char ref[PX_RULE_REF_MAX];

	px_session_set_rule(s, l == NULL ? "default" : px_rule_ref_at(l->line,
	    NULL, px_session_policy_file(s), ref, sizeof(ref)));
}

/* The source s counts as under its service's <source-limits>: its key in
 * the table, and (name not NULL) how the limited line names it (an
 * address, a prefix, zone:NAME or ja4:FP); only a line needs the name, so
 * an admitted connection or request does not format it. */
static uint64_t
px_session_source(const struct px_session *s, const struct px_sl_rule *r,
    const char *user, char *name, size_t size)
{
	uint8_t bytes[17];
	char a[INET6_ADDRSTRLEN];
	struct px_key k;
	unsigned bits, i;
	const char *zn;
	uint64_t h;

	if (r->per == PX_SL_JA4 && s->ja4 != NULL && s->ja4[0] != '\0') {
		if (name != NULL)
			snprintf(name, size, "ja4:%s", s->ja4);
		h = px_sl_hash_str(s->ja4);
		memcpy(bytes, &h, sizeof(h));
		return px_sl_key(r->svc_hash, 4, bytes, sizeof(h));
	}
	/* per="user": the proven user once known (a Kerberos principal or a
	 * directory's name: case as the authenticator spells it). */
	if (r->per == PX_SL_USER && user != NULL && user[0] != '\0') {
		if (name != NULL) {
			char esc[132];

			px_log_escape(esc, sizeof(esc), user, strlen(user),
			    false);
			snprintf(name, size, "user:%s", esc);
		}
		h = px_sl_hash_str(user);
		memcpy(bytes, &h, sizeof(h));
		return px_sl_key(r->svc_hash, 5, bytes, sizeof(h));
	}
	/* per="ja4": a hello with no JA4 (none computed) counts by address;
	 * per="user": a request before any proof, by address too. */
	if (r->per == PX_SL_ZONE && s->client_zone >= 0) {
		zn = px_zone_name(&s->cfg->zones, s->client_zone);
		if (name != NULL)
			snprintf(name, size, "zone:%s", zn);
		h = px_sl_hash_str(zn);
		memcpy(bytes, &h, sizeof(h));
		return px_sl_key(r->svc_hash, 3, bytes, sizeof(h));
	}
	/* per="zone": a client in no zone is a source of its own. */
	px_key_from_sockaddr(&k, (const struct sockaddr *)&s->client);
	bits = k.v6 ? 128 : 32;
	if (r->per == PX_SL_PREFIX)
		bits = k.v6 ? r->prefix6 : r->prefix4;
	for (i = bits; i < (k.v6 ? 128u : 32u); i++)
		k.addr[i / 8] &= (uint8_t)~(0x80u >> (i % 8));
	if (name != NULL) {
		inet_ntop(k.v6 ? AF_INET6 : AF_INET, k.addr, a, sizeof(a));
		if (bits == (k.v6 ? 128u : 32u))
			snprintf(name, size, "%s", a);
		else
			snprintf(name, size, "%s/%u", a, bits);
	}
	memcpy(bytes, k.addr, 16);
	bytes[16] = k.v6;
	return px_sl_key(r->svc_hash, r->per == PX_SL_PREFIX ? 2u | bits << 8 :
	    1u, bytes, sizeof(bytes));
}

const char *
px_session_limit_whose(const struct px_session *s, const char *user)
{
	const struct px_sl_rule *r = &s->svc->srclimit;

	/* The same choices, in the same order, as px_session_source. */
	if (r->per == PX_SL_JA4 && s->ja4 != NULL && s->ja4[0] != '\0')
		return "from your TLS client";
	if (r->per == PX_SL_USER && user != NULL && user[0] != '\0')
		return "of yours";
	if (r->per == PX_SL_ZONE && s->client_zone >= 0)
		return "from your zone";
	if (r->per == PX_SL_PREFIX)
		return "from your network";
	return "from your address";
}

static int px_session_limits_judge(struct px_session *s);

/* A client refused at accept by limit (rule: FILE:LINE) gets its
 * protocol's refusal (analyser->limit_refusal) when it speaks plain text
 * first; the bytes go straight to the fresh socket, whose send buffer
 * is empty (they fit: a few hundred bytes), and the session then closes
 * with a FIN (px_session_end, s->limit_answered) rather than a reset.
 * wait_ns: until the source's bucket has a token (0: not known). */
static void
px_session_limit_answer(struct px_session *s, const char *limit,
    const char *rule, uint64_t wait_ns)
{
	const struct px_service *svc = s->svc;
	const struct px_analyser *a = svc->analyser;
	char buf[8192];
	uint32_t retry_s;
	size_t n;
	ssize_t w;

	if (a == NULL || a->limit_refusal == NULL || svc->tls_client != NULL ||
	    svc->tls_passthrough != NULL)
		return;
	retry_s = (uint32_t)((wait_ns + 999999999ULL) / 1000000000ULL);
	if (retry_s == 0)
		retry_s = 1;
	n = a->limit_refusal(svc->analyser_policy, limit,
	    px_session_limit_whose(s, NULL), rule, retry_s,
	    s->id, buf, sizeof(buf));
	if (n == 0 || n > sizeof(buf))
		return;
	w = send(s->cfd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w == (ssize_t)n)
		s->limit_answered = true;
}

/* <source-limits> of s's (final) service: the source's sessions and new
 * connections. Over a limit the client gets its protocol's refusal
 * (px_session_limit_answer) or a reset, at once, before any analyser,
 * with no session-end line: one "limited" line a second per source says
 * it (with how many refusals it stands for) and proxyd_limited_total
 * counts each. 0, or -1 after ending the session. */
static int
px_session_source_limits(struct px_session *s)
{
	const struct px_sl_rule *r = &s->svc->srclimit;

	/* per="ja4": once the ClientHello is read (px_session_limits_hello);
	 * per="user": once a request proved who the client is
	 * (px_session_user_allowed). */
	if (r->on && (r->per == PX_SL_JA4 || r->per == PX_SL_USER))
		return 0;
	return px_session_limits_judge(s);
}

int
px_session_limits_hello(struct px_session *s, bool done)
{
	const struct px_sl_rule *r = &s->svc->srclimit;

	if (!r->on || r->per != PX_SL_JA4 || s->sl_judged)
		return 0;
	if (!done && (s->ja4 == NULL || s->ja4[0] == '\0'))
		return 0;	/* not read yet */
	s->sl_judged = true;
	return px_session_limits_judge(s);
}

static int
px_session_limits_judge(struct px_session *s)
{
	const struct px_sl_rule *r = &s->svc->srclimit;
	struct px_sl_refusal rf;
	enum px_sl_verdict v;
	char src[PX_ADDRSTRLEN + 80], client[PX_ADDRSTRLEN];
	char ref[PX_RULE_REF_MAX];
	uint64_t key;

	/* requests= alone: judged per request (px_session_request_allowed). */
	if (!r->on || (r->sessions == 0 && r->interval_ns == 0))
		return 0;
	key = px_session_source(s, r, NULL, NULL, 0);
	v = px_sl_admit(key, r, px_sl_now_ns(), &s->sl_ref, &rf);
	switch (v) {
	case PX_SL_OK:
		s->sl_held = s->sl_ref.idx != UINT32_MAX;
		return 0;
	case PX_SL_UNTRACKED:
		PX_SC_ADD(s->m, limit_untracked, 1);
		return 0;
	default:
		break;
	}
	PX_SC_ADD(s->m, limited[v == PX_SL_SESSIONS ? PX_LIMITED_SESSIONS :
	    PX_LIMITED_CONNECTIONS], 1);
	px_rule_ref_at(r->line, NULL, px_session_policy_file(s), ref,
	    sizeof(ref));
	if (rf.log) {
		(void)px_session_source(s, r, NULL, src, sizeof(src));
		px_log(LOG_INFO, 0, "limited service=%s client=%s source=%s "
		    "limit=%s rule=%s refused=%llu", s->svc->name,
		    px_sockaddr_str((struct sockaddr *)&s->client, client,
		    sizeof(client)), src,
		    v == PX_SL_SESSIONS ? "sessions" : "connections", ref,
		    (unsigned long long)rf.count);
	}
	s->limited = true;
	px_session_limit_answer(s, v == PX_SL_SESSIONS ? "sessions" :
	    "connections", ref, rf.wait_ns);
	px_session_end(s, PX_END_POLICY, "denied: source-limits");
	return -1;
}

bool
px_session_request_allowed(struct px_session *s, const char *user,
    uint32_t *retry_s, char *rule, size_t size)
{
	const struct px_sl_rule *r = &s->svc->srclimit;
	struct px_sl_refusal rf;
	char src[PX_ADDRSTRLEN + 80], client[PX_ADDRSTRLEN];
	uint64_t key, wait_ns;

	*retry_s = 0;
	if (!r->on || r->req_interval_ns == 0)
		return true;
	key = px_session_source(s, r, user, NULL, 0);
	if (px_sl_request(key, r, px_sl_now_ns(), &wait_ns, &rf))
		return true;
	/* Retry-After is in whole seconds: rounded up, so that a client
	 * that waits that long finds a token. */
	*retry_s = (uint32_t)((wait_ns + 999999999ULL) / 1000000000ULL);
	if (*retry_s == 0)
		*retry_s = 1;
	px_rule_ref_at(r->line, NULL, px_session_policy_file(s), rule, size);
	PX_SC_ADD(s->m, limited[PX_LIMITED_REQUESTS], 1);
	if (rf.log) {
		(void)px_session_source(s, r, user, src, sizeof(src));
		px_log(LOG_INFO, 0, "limited service=%s client=%s source=%s "
		    "limit=requests rule=%s refused=%llu", s->svc->name,
		    px_sockaddr_str((struct sockaddr *)&s->client, client,
		    sizeof(client)), src, rule, (unsigned long long)rf.count);
	}
	return false;
}

bool
px_session_transfer_allowed(struct px_session *s, const char *user,
    uint32_t *retry_s, char *rule, size_t size)
{
	const struct px_sl_rule *r = &s->svc->srclimit;
	struct px_sl_refusal rf;
	char src[PX_ADDRSTRLEN + 80], client[PX_ADDRSTRLEN];
	uint64_t key, wait_ns;

	*retry_s = 0;
	if (!r->on || r->xfer_interval_ns == 0)
		return true;
	key = px_session_source(s, r, user, NULL, 0);
	if (px_sl_transfer(key, r, px_sl_now_ns(), &wait_ns, &rf))
		return true;
	*retry_s = (uint32_t)((wait_ns + 999999999ULL) / 1000000000ULL);
	if (*retry_s == 0)
		*retry_s = 1;
	px_rule_ref_at(r->line, NULL, px_session_policy_file(s), rule, size);
	PX_SC_ADD(s->m, limited[PX_LIMITED_TRANSFERS], 1);
	if (rf.log) {
		(void)px_session_source(s, r, user, src, sizeof(src));
		px_log(LOG_INFO, 0, "limited service=%s client=%s source=%s "
		    "limit=transfers rule=%s refused=%llu", s->svc->name,
		    px_sockaddr_str((struct sockaddr *)&s->client, client,
		    sizeof(client)), src, rule, (unsigned long long)rf.count);
	}
	return false;
}

bool
px_session_user_allowed(struct px_session *s, const char *user,
    uint32_t *retry_s, char *rule, size_t size)
{
	const struct px_sl_rule *r = &s->svc->srclimit;
	struct px_sl_refusal rf;
	enum px_sl_verdict v;
	char src[PX_ADDRSTRLEN + 160], client[PX_ADDRSTRLEN];
	uint64_t key;

	*retry_s = 0;
	/* Once per connection (its first proven request); an HTTP/2 stream
	 * is a request of its connection, not a session of its own. */
	if (!r->on || r->per != PX_SL_USER || s->sl_judged ||
	    user == NULL || user[0] == '\0' ||
	    (r->sessions == 0 && r->interval_ns == 0))
		return true;
	s->sl_judged = true;
	key = px_session_source(s, r, user, NULL, 0);
	v = px_sl_admit(key, r, px_sl_now_ns(), &s->sl_ref, &rf);
	switch (v) {
	case PX_SL_OK:
		s->sl_held = s->sl_ref.idx != UINT32_MAX;
		return true;
	case PX_SL_UNTRACKED:
		PX_SC_ADD(s->m, limit_untracked, 1);
		return true;
	default:
		break;
	}
	*retry_s = (uint32_t)((rf.wait_ns + 999999999ULL) / 1000000000ULL);
	if (*retry_s == 0)
		*retry_s = 1;
	PX_SC_ADD(s->m, limited[v == PX_SL_SESSIONS ? PX_LIMITED_SESSIONS :
	    PX_LIMITED_CONNECTIONS], 1);
	px_rule_ref_at(r->line, NULL, px_session_policy_file(s), rule, size);
	if (rf.log) {
		(void)px_session_source(s, r, user, src, sizeof(src));
		px_log(LOG_INFO, 0, "limited service=%s client=%s source=%s "
		    "limit=%s rule=%s refused=%llu", s->svc->name,
		    px_sockaddr_str((struct sockaddr *)&s->client, client,
		    sizeof(client)), src,
		    v == PX_SL_SESSIONS ? "sessions" : "connections", rule,
		    (unsigned long long)rf.count);
	}
	return false;
}

/* Some service of the listener takes this client: its <clients> (or
 * none) holds it. 0, or -1 after ending the session. */
int
px_session_client_allowed(struct px_session *s)
{
	const struct px_group *g = s->svc->group;
	int16_t spec[PX_GROUP_MAX];
	struct px_zone_path zp;
	struct px_key k;
	size_t i;

	px_key_from_sockaddr(&k, (struct sockaddr *)&s->client);
	px_zones_path(&s->cfg->zones, &k, &zp);
	s->client_zone = px_zone_path_zone(&zp);
	px_group_specs(g, &s->cfg->zones, PX_DIM_CLIENT, &k, &zp, spec);
	for (i = 0; i < g->n; i++)
		if (spec[i] >= 0)
			return 0;
	px_metrics_denied(s, PX_DENY_ACL, 1);
	px_session_rule_list(s, g->n == 1 ? &s->svc->clients : NULL);
	px_session_end(s, PX_END_POLICY, "denied: client not allowed");
	return -1;
}

/* The destination's zone and what <servers> lists (addresses, ports=)
 * make of it; with several services on the listener, the one both ends
 * select becomes s->svc. 0, or -1 after ending the session. */
static int
px_session_choose(struct px_session *s)
{
	const struct px_group *g = s->svc->group;
	int16_t cspec[PX_GROUP_MAX], sspec[PX_GROUP_MAX];
	struct px_zone_path czp, szp;
	struct px_key ck, sk;
	bool addr_in;
	int pick;

	px_key_from_sockaddr(&ck, (struct sockaddr *)&s->client);
	px_key_from_sockaddr(&sk, (struct sockaddr *)&s->dst);
	px_zones_path(&s->cfg->zones, &ck, &czp);
	px_zones_path(&s->cfg->zones, &sk, &szp);
	s->server_zone = px_zone_path_zone(&szp);
	px_group_specs(g, &s->cfg->zones, PX_DIM_CLIENT, &ck, &czp, cspec);
	px_group_specs(g, &s->cfg->zones, PX_DIM_SERVER, &sk, &szp, sspec);
	addr_in = sspec[0] >= 0;	/* (g->n == 1: the one list) */
	px_group_ports(g, px_sockaddr_port((struct sockaddr *)&s->dst), sspec);
	pick = px_group_choose(g, cspec, sspec, NULL);
	if (pick >= 0) {
		s->svc = g->svc[pick];
		px_metrics_session_rebind(s);
		s->svc_chosen = true;
		/* The service is known only now on a shared listener. */
		return g->n > 1 ? px_session_source_limits(s) : 0;
	}
	if (g->n == 1) {
		px_metrics_denied(s, PX_DENY_SERVER, 1);
		px_session_rule_list(s, &s->svc->servers);
		px_session_end(s, PX_END_POLICY, addr_in && sspec[0] < 0 ?
		    "denied: server port not allowed" :
		    "denied: server not allowed");
	} else {
		/* --check refuses configs that could be ambiguous (-2). */
		px_metrics_denied(s, PX_DENY_NO_SERVICE, 1);
		px_session_rule_list(s, NULL);
		px_session_end(s, PX_END_POLICY, pick == -1 ?
		    "denied: no service for this client and server" :
		    "denied: no single service for this client and server");
	}
	return -1;
}

/* The destination is known: refuse the proxy's own address and what the
 * service lists refuse. 0 or -1. */
int
px_session_check_dst(struct px_session *s)
{
	const struct px_service *svc = s->svc;

	if (svc->mode != PX_MODE_FIXED &&
	    px_is_direct(svc, (struct sockaddr *)&s->dst)) {
		px_metrics_denied(s, PX_DENY_DIRECT, 1);
		px_session_end(s, PX_END_POLICY,
		    "denied: direct connection to the proxy");
		return -1;
	}
	if (svc->mode != PX_MODE_FIXED && px_session_choose(s) == -1)
		return -1;
	memcpy(&s->server, &s->dst, sizeof(s->dst));
	return 0;
}

/* Asks the worker's conntrack handle for the original destination. 0
 * (the session waits for the answer, bounded by connect-timeout), or -1
 * with errno. */
int
px_session_ask_conntrack(struct px_session *s)
{
	struct px_worker *w = s->w;
	struct px_conntrack *ct = px_worker_conntrack(w);

	if (ct == NULL)
		return -1;
	if (px_conntrack_ask_origdst(ct, 0, (struct sockaddr *)&s->client,
	    (struct sockaddr *)&s->local, &s->ct_seq) == -1)
		return -1;
	s->ct_waiting = true;
	TAILQ_INSERT_TAIL(&w->ct_wait, s, ct_link);
	px_session_arm_timer(s, s->svc->connect_timeout_ms);
	return 0;
}

void
px_session_origdst_answer(struct px_session *s,
    const struct sockaddr_storage *dst)
{
	struct px_worker *w = s->w;

	TAILQ_REMOVE(&w->ct_wait, s, ct_link);
	s->ct_waiting = false;
	px_session_stop_timer(s);
	if (dst == NULL || dst->ss_family == AF_UNSPEC) {
		PX_SC_ADD(s->m, origdst[PX_ORIGDST_FAILED], 1);
		px_session_end(s, PX_END_PROXY, "error: original destination "
		    "unknown (no SO_ORIGINAL_DST, no conntrack entry)");
		return;
	}
	PX_SC_ADD(s->m, origdst[PX_ORIGDST_CONNTRACK], 1);
	memcpy(&s->dst, dst, sizeof(s->dst));
	if (px_session_check_dst(s) == -1)
		return;
	px_session_proceed(s);
}

void
px_session_accept(struct px_listener *l, int fd, const struct sockaddr *sa,
    int salen)
{
	struct px_worker *w = l->w;
	const struct px_service *svc = l->svc;
	struct px_session *s;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		close(fd);
		return;
	}
	s->id = atomic_fetch_add_explicit(&px_session_ids, 1,
	    memory_order_relaxed) + 1;
	s->w = w;
	s->cfg = px_config_ref(w->cfg);
	s->svc = svc;
	s->cfd = fd;
	s->sfd = -1;
	/* Not looked up yet (0 would name the first zone). */
	s->client_zone = s->server_zone = -1;
	gettimeofday(&s->start_tv, NULL);
	s->start_ms = px_now_ms(w);
	if ((size_t)salen <= sizeof(s->client))
		memcpy(&s->client, sa, (size_t)salen);
	evtimer_assign(&s->timer, w->base, px_session_timer_cb, s);
	TAILQ_INSERT_TAIL(&w->sessions, s, link);
	px_worker_load_add(w, 1);
	px_metrics_session_start(s, l);
	/* Counted before the checks so the close path is the same for all. */
	if (atomic_fetch_add_explicit(&px_live_sessions, 1,
	    memory_order_relaxed) >= s->cfg->max_sessions) {
		px_metrics_denied(s, PX_DENY_MAX_SESSIONS, 1);
		px_session_set_rule(s, "limits/@max-sessions");
		px_session_end(s, PX_END_POLICY, "denied: max-sessions");
		return;
	}
	if (px_session_client_allowed(s) == -1)
		return;
	/* A listener of one service knows it at once: limited before the
	 * destination is looked for (a shared one: px_session_choose). */
	if (svc->group->n == 1 && px_session_source_limits(s) == -1)
		return;
	/* (TCP_NODELAY: inherited from the listener.) */
	if (px_session_destination(s) != 0)
		return;		/* ended, or waiting for conntrack */
	px_session_proceed(s);
}
