/* r66: per-host daily quotas, quota-bytes= and quota-transfers= of the
 * <host> rule that accepted the connection's host id (quota.h keeps the
 * counts, per service and host id, across reloads).
 *
 * A request counts as one of the day's transfers once every other check
 * passed it; one that would go past quota-transfers, or comes once the
 * day's bytes reached quota-bytes, gets an ErrorPacket before any data
 * (ServerOverloaded 'l' for transfers: Waarp retries it later, as a
 * quota that comes back tomorrow wants; SizeNotAllowed 'd' for bytes),
 * and the connection goes on. Bytes count per DataPacket, before it is
 * forwarded: a block that would take the day past quota-bytes is not
 * forwarded and not counted, and the transfer ends with an ErrorPacket
 * 'd' to the client (with the connection, as any refusal mid-transfer):
 * the day's count never goes past the limit. */
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "analyser.h"
#include "parse.h"
#include "quota.h"
#include "r66_int.h"
#include "r66_policy.h"

/* The connection's entry, made at its first limited request; NULL when
 * the table is full (counted). */
static struct px_quota *
r66_quota_entry(struct px_session *s, struct r66_state *st)
{
	if (st->quota == NULL &&
	    (st->quota = px_quota_get(px_session_service(s), st->host)) == NULL)
		px_quota_refuse_full();
	return st->quota;
}

/* rule= of its lines: the <host> rule that set the quota. */
static const char *
r66_quota_ref(struct px_session *s, const struct r66_state *st, char *buf,
    size_t size)
{
	const struct r66_policy *p = px_session_policy(s);
	const struct px_rule *hit;

	(void)px_rules_decide(&p->hosts, st->host, &hit);
	return px_rule_ref(hit, px_session_policy_file(s), buf, size);
}

enum r66_fv
r66_quota_request(struct px_session *s, struct r66_state *st,
    struct r66_chan *c)
{
	const struct r66_policy *p = px_session_policy(s);
	struct px_quota_limit l;
	enum px_quota_kind k;
	uint64_t used = 0, limit = 0;
	char host[200], ref[PX_RULE_REF_MAX];

	c->quota_bytes = 0;
	r66_host_quota(p, st->host, &l);
	if (!px_quota_limited(&l))
		return R66_FV_PASS;
	r66_quota_ref(s, st, ref, sizeof(ref));
	px_log_escape(host, sizeof(host), st->host, strlen(st->host), false);
	if (r66_quota_entry(s, st) == NULL) {
		px_session_log(s, LOG_WARNING, "r66-quota host=%s kind=table-full "
		    "verdict=refused rule=%s (the quota table is full)", host,
		    ref);
		return r66_refuse(s, st, c, R66_C_DENIED_QUOTA, 'l',
		    "quota table full", "quota-table-full", ref, PX_ACT_DENY,
		    false);
	}
	if ((k = px_quota_begin(st->quota, &l, &used, &limit)) == PX_QUOTA_OK) {
		c->quota_bytes = l.bytes;
		return R66_FV_PASS;
	}
	px_session_log(s, LOG_NOTICE, "r66-quota host=%s kind=%s used=%llu "
	    "limit=%llu verdict=refused rule=%s", host,
	    k == PX_QUOTA_BYTES ? "bytes" : "transfers",
	    (unsigned long long)used, (unsigned long long)limit, ref);
	if (k == PX_QUOTA_BYTES)
		return r66_refuse(s, st, c, R66_C_DENIED_QUOTA, 'd',
		    "daily byte quota used up", "quota-bytes", ref,
		    PX_ACT_DENY, false);
	return r66_refuse(s, st, c, R66_C_DENIED_QUOTA, 'l',
	    "daily transfer quota used up", "quota-transfers", ref,
	    PX_ACT_DENY, false);
}

enum r66_fv
r66_quota_data(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, uint64_t n)
{
	uint64_t used = 0;
	char host[200], ref[PX_RULE_REF_MAX];

	if (st->quota == NULL || px_quota_take(st->quota, c->quota_bytes, n,
	    &used))
		return R66_FV_PASS;
	/* Not forwarded: not counted in the transfer's size either. */
	c->bytes -= n;
	c->blocks--;
	px_quota_cut(st->quota);
	px_session_log(s, LOG_NOTICE, "r66-quota host=%s kind=bytes used=%llu "
	    "limit=%llu block=%llu verdict=cut rule=%s", px_log_escape(host,
	    sizeof(host), st->host, strlen(st->host), false),
	    (unsigned long long)used, (unsigned long long)c->quota_bytes,
	    (unsigned long long)n, r66_quota_ref(s, st, ref, sizeof(ref)));
	return r66_refuse(s, st, c, R66_C_DENIED_QUOTA, 'd',
	    "daily byte quota used up", "quota-bytes", ref, PX_ACT_DENY, true);
}
