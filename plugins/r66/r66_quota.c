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
 * the day's count never goes past the limit.
 *
 * With <cluster store> (quota_store.h) the cluster's store decides at a
 * request instead: the request frame stays where it is, with every client
 * frame after it, until the store answered (R66_FV_WAIT), then it is
 * judged again on the answer alone; a store that cannot answer gets
 * ServerOverloaded 'l' (on-store-error="refuse": Waarp retries later) or
 * leaves it to this node's own count ("local"). Under a byte quota the
 * store charges the bytes before they move, in leases, as for FTP: the
 * request's answer grants the first (px_qstore_lease_size of the quota,
 * or what the day has left), and a block that the lease does not cover
 * waits, with every frame of its direction, for the next; a block the
 * store has no bytes for ends the transfer (cut) unforwarded, so the
 * nodes together never move more than quota-bytes. What a transfer was
 * granted and did not move goes back when its channel ends; what one the
 * store could not answer for moved on this node's count is added to the
 * store's then (as for FTP). */
#include <stdatomic.h>
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

/* The store's answer came: the request is judged again. */
static void
r66_quota_resume(void *arg)
{
	struct r66_state *st = arg;

	px_session_resume(st->qs, PX_TO_SERVER);
}

bool
r66_quota_waiting(const struct r66_state *st, const struct r66_frame *f)
{
	return st->qwait && f->code == R66_REQUEST && f->src == st->qcid;
}

void
r66_quota_close(struct r66_state *st)
{
	px_qstore_wait_forget(&st->qask);
}

bool
r66_quota_leasing(const struct r66_state *st, bool from_client)
{
	int k;

	for (k = 0; k < R66_CHAN_MAX; k++)
		if (st->ch[k].qlease != NULL &&
		    r66_client_sends(&st->ch[k]) == from_client)
			return true;
	return false;
}

void
r66_quota_chan_end(struct r66_state *st, struct r66_chan *c)
{
	uint64_t back;

	if (!c->qstore)
		return;
	c->qstore = false;
	px_qstore_cancel(c->qlease);
	c->qlease = NULL;
	back = c->qleft < c->qcharged ? c->qleft : c->qcharged;
	if (back != 0 && px_qstore_enabled() && st->qs != NULL)
		px_qstore_give_back(px_session_base(st->qs),
		    px_session_service(st->qs), st->host, c->qdate, back);
	/* What moved while the store could not answer counts for the
	 * whole cluster too: added now (the store back by then). */
	if (c->qtaken != 0 && px_qstore_enabled() && st->qs != NULL)
		px_qstore_add_bytes(px_session_base(st->qs),
		    px_session_service(st->qs), st->host, c->qdate, c->qtaken);
	/* This node's count had the leases (r66_quota_granted, and the
	 * first raised in by px_qstore_decide): what did not move goes. */
	if (st->quota != NULL && c->qdate == px_quota_day())
		px_quota_settle(st->quota, c->qcharged, c->qcharged - back);
}

/* The cluster's store decides: PX_QUOTA_OK, a refusal (*store_down: it
 * could not answer), or -1 while it is asked; under a byte quota, the
 * answer charges the transfer's first lease. */
static int
r66_quota_cluster(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, const struct px_quota_limit *l, uint64_t *used,
    uint64_t *limit, bool *store_down, const char *host)
{
	int v;

	st->qs = s;
	st->qask.resume = r66_quota_resume;
	st->qask.arg = st;
	v = px_qstore_decide(&st->qask, px_session_base(s),
	    px_session_service(s), st->host, st->quota, l,
	    l->bytes != 0 ? px_qstore_lease_size(l->bytes) : 0, used, limit,
	    store_down);
	if (v == -1) {
		st->qwait = true;
		st->qcid = c->cid;
		return -1;
	}
	st->qwait = false;
	if (st->qask.ans.result == PX_QSTORE_ERROR)
		px_session_log(s, LOG_WARNING, "r66-quota host=%s "
		    "kind=store-error store=%s verdict=%s (%s)", host,
		    px_qstore_name(), *store_down ? "refused" : "local",
		    st->qask.ans.why);
	return v;
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
	bool store_down = false;
	int v;

	c->quota_bytes = c->qtaken = 0;
	c->qstore = false;
	r66_host_quota(p, st->host, &l);
	if (!px_quota_limited(&l)) {
		st->qask.answered = st->qwait = false;
		return R66_FV_PASS;
	}
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
	if ((v = px_qstore_enabled() ? r66_quota_cluster(s, st, c, &l, &used,
	    &limit, &store_down, host) : (int)px_quota_begin(st->quota, &l,
	    &used, &limit)) == -1)
		return R66_FV_WAIT;
	if ((k = (enum px_quota_kind)v) == PX_QUOTA_OK) {
		c->quota_bytes = l.bytes;
		c->qstore = px_qstore_enabled() && l.bytes != 0;
		if (c->qstore) {
			c->qlocal = st->qask.ans.result != PX_QSTORE_OK;
			c->qleft = c->qcharged = c->qlocal ? 0 :
			    st->qask.ans.lease;
			c->qday = c->qlocal ? 0 : st->qask.ans.bytes - c->qleft;
			c->qdate = st->qask.ans.day;
		}
		return R66_FV_PASS;
	}
	if (store_down)
		return r66_refuse(s, st, c, R66_C_DENIED_QUOTA, 'l',
		    "the quota store cannot be reached", "quota-store", ref,
		    PX_ACT_DENY, false);
	px_session_log(s, LOG_NOTICE, "r66-quota host=%s kind=%s used=%llu "
	    "limit=%llu verdict=refused%s rule=%s", host,
	    k == PX_QUOTA_BYTES ? "bytes" : "transfers",
	    (unsigned long long)used, (unsigned long long)limit,
	    px_qstore_enabled() ? " by=cluster" : "", ref);
	if (k == PX_QUOTA_BYTES)
		return r66_refuse(s, st, c, R66_C_DENIED_QUOTA, 'd',
		    "daily byte quota used up", "quota-bytes", ref,
		    PX_ACT_DENY, false);
	return r66_refuse(s, st, c, R66_C_DENIED_QUOTA, 'l',
	    "daily transfer quota used up", "quota-transfers", ref,
	    PX_ACT_DENY, false);
}

/* The store's answer to a block's lease (no session resumed). */
static void
r66_quota_granted(struct r66_chan *c, const struct px_qstore_answer *a)
{
	struct r66_state *st = c->qst;

	c->qlease = NULL;
	if (a->result == PX_QSTORE_OK && a->lease != 0) {
		c->qleft += a->lease;
		c->qcharged += a->lease;
		if (st->quota != NULL && c->qdate == px_quota_day())
			atomic_fetch_add(px_quota_bytes(st->quota), a->lease);
		c->qday = a->bytes - c->qleft;
		return;
	}
	if (a->result == PX_QSTORE_ERROR) {
		px_session_log(st->qs, LOG_WARNING, "r66-quota host=%s "
		    "kind=store-error cmd=lease store=%s verdict=%s (%s)",
		    st->host, px_qstore_name(), px_qstore_refuses() ?
		    "refused" : "local", a->why);
		if (!px_qstore_refuses()) {
			c->qlocal = true;
			return;
		}
	} else
		c->qday = a->bytes - c->qleft;
	c->qcut = true;
}

/* ... and from the store's loop: the blocks it held are judged again. */
static void
r66_quota_leased(void *arg, const struct px_qstore_answer *a)
{
	struct r66_chan *c = arg;

	r66_quota_granted(c, a);
	px_session_resume(c->qst->qs, r66_client_sends(c) ? PX_TO_SERVER :
	    PX_TO_CLIENT);
}

/* A block of n bytes under the cluster's leases: PASS (taken from the
 * lease), WAIT (the next lease asked for), or false in *cut. */
static enum r66_fv
r66_quota_lease(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, uint64_t n, bool *cut)
{
	struct px_qstore_answer a;
	uint64_t want;

	*cut = false;
	while (!c->qlocal) {
		if (c->qlease != NULL)
			return R66_FV_WAIT;
		if (c->qleft >= n) {
			c->qleft -= n;
			return R66_FV_PASS;
		}
		if (c->qcut) {
			*cut = true;
			return R66_FV_PASS;
		}
		want = px_qstore_lease_size(c->quota_bytes);
		if (want < n - c->qleft)
			want = n - c->qleft;
		c->qst = st;
		c->qlease = px_qstore_lease(px_session_base(s),
		    px_session_service(s), st->host, c->qdate, c->quota_bytes,
		    want, r66_quota_leased, c, &a);
		if (c->qlease != NULL)
			return R66_FV_WAIT;
		r66_quota_granted(c, &a);
	}
	return R66_FV_PASS;
}

enum r66_fv
r66_quota_data(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, uint64_t n)
{
	uint64_t used = 0;
	char host[200], ref[PX_RULE_REF_MAX];
	enum r66_fv v;
	bool cut = false;

	if (c->qstore && (v = r66_quota_lease(s, st, c, n, &cut)) !=
	    R66_FV_PASS)
		return v;
	if (c->qstore && !c->qlocal) {
		if (!cut)
			return R66_FV_PASS;
		used = c->qday;
	} else if (st->quota == NULL)
		return R66_FV_PASS;
	else if (px_quota_take(st->quota, c->quota_bytes, n, &used)) {
		c->qtaken += n;
		return R66_FV_PASS;
	}
	/* Not forwarded: not counted in the transfer's size either. */
	if (st->quota != NULL)
		px_quota_cut(st->quota);
	px_session_log(s, LOG_NOTICE, "r66-quota host=%s kind=bytes used=%llu "
	    "limit=%llu block=%llu verdict=cut rule=%s", px_log_escape(host,
	    sizeof(host), st->host, strlen(st->host), false),
	    (unsigned long long)used, (unsigned long long)c->quota_bytes,
	    (unsigned long long)n, r66_quota_ref(s, st, ref, sizeof(ref)));
	return r66_refuse(s, st, c, R66_C_DENIED_QUOTA, 'd',
	    "daily byte quota used up", "quota-bytes", ref, PX_ACT_DENY, true);
}
