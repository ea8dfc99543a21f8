/* ftp: per-user daily quotas, quota-bytes= and quota-transfers= of the
 * <user> rule that accepted the login, or with <auth> of the <login> that
 * took the proven user, when it sets one (quota.h keeps the counts, per
 * service and user name, across reloads).
 *
 * A RETR, STOR, APPE or STOU about to go to the server counts as one of
 * the day's transfers; one that would go past quota-transfers, or comes
 * once the day's bytes reached quota-bytes, is answered by the proxy and
 * never reaches the server, its data connection reset: 552 for an upload
 * (RFC 959: "exceeded storage allocation"), 550 for a download (not
 * taken, and not for retrying today: a 4xx would have clients retry at
 * once). Bytes count on the data channel (px_channel_meter: spliced,
 * charged before they pass, so that parallel transfers share the limit):
 * a transfer that crosses quota-bytes is cut there, its receiver's
 * connection reset, and the client hears the server's own reply to the
 * broken transfer (426 as a rule). Listings count for nothing.
 *
 * With <cluster store> (quota_store.h) the cluster's store decides at a
 * transfer's start instead: the command waits for its answer (held with
 * what the client sends after it, ftp_must_wait), then runs again with
 * it; a store that cannot answer gets a 451 (on-store-error="refuse") or
 * leaves it to this node's own count ("local"). Under a byte quota the
 * store charges the transfer's bytes ahead, in leases: the first with
 * its answer, the next ones asked for when the channel used them
 * (ftp_quota_more: it waits meanwhile); what it was granted and did not
 * move goes back when its channel ends. (A transfer the store could not
 * answer for, left to this node: what it moved is added at its end.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "analyser.h"
#include "quota.h"
#include "ftp/ftp_int.h"

void
ftp_quota_user(struct ftp_state *st, const struct ftp_policy *p,
    const char *user)
{
	st->quota = NULL;
	st->qlogin = NULL;
	ftp_user_quota(p, user, &st->qlimit);
}

static const char *const ftp_quota_kinds[] = {
	[PX_QUOTA_OK] = "-",
	[PX_QUOTA_TRANSFERS] = "transfers",
	[PX_QUOTA_BYTES] = "bytes",
};

/* The store's answer came: the held command runs again. */
static void
ftp_quota_resume(void *arg)
{
	struct ftp_state *st = arg;

	st->qreplay = true;
	px_session_resume(st->qs, PX_TO_SERVER);
}

/* The cluster's store decides: PX_QUOTA_OK, a refusal, or -1 (*rc set)
 * while it is asked. A store that cannot answer: refused with the 451
 * (on-store-error="refuse", *store_down) or this node's own count. */
static int
ftp_quota_cluster(struct px_session *s, struct ftp_state *st,
    const struct ftp_cmd *c, int *rc, uint64_t *used, uint64_t *limit,
    bool *store_down)
{
	int v;

	st->qs = s;
	st->qwait.resume = ftp_quota_resume;
	st->qwait.arg = st;
	v = px_qstore_decide(&st->qwait, px_session_base(s),
	    px_session_service(s), st->user, st->quota, &st->qlimit,
	    px_qstore_lease_size(st->qlimit.bytes), used, limit, store_down);
	if (v == -1) {
		*rc = FTP_RC_WAIT;
		return -1;
	}
	if (st->qwait.ans.result == PX_QSTORE_ERROR)
		px_session_log(s, LOG_WARNING, "ftp-quota user=%s "
		    "kind=store-error cmd=%s store=%s verdict=%s (%s)", st->user,
		    c->verb, px_qstore_name(), *store_down ? "refused" : "local",
		    st->qwait.ans.why);
	return v;
}

static void ftp_quota_more(void *arg, struct px_channel *ch);

/* The store's answer to a running transfer's lease: it goes on with the
 * bytes granted, or stops (the day's bytes all charged; a store that
 * cannot answer and on-store-error="refuse"; "local": this node's count). */
static void
ftp_quota_leased(void *arg, const struct px_qstore_answer *a)
{
	struct ftp_meter *m = arg;
	struct ftp_state *st = m->st;
	uint64_t used = 0, n = px_qstore_lease_size(st->qlimit.bytes);

	m->req = NULL;
	if (a->result == PX_QSTORE_OK) {
		m->leased += a->lease;
		/* This node's count has what the cluster charged: settled to
		 * what moved at the end (ftp_quota_settle). */
		if (st->quota != NULL && m->day == px_quota_day())
			atomic_fetch_add(px_quota_bytes(st->quota), a->lease);
		px_channel_meter_grow(m->ch, a->lease);
		return;
	}
	if (a->result == PX_QSTORE_ERROR) {
		px_session_log(st->qs, LOG_WARNING, "ftp-quota user=%s "
		    "kind=store-error cmd=lease store=%s verdict=%s (%s)",
		    st->user, px_qstore_name(), px_qstore_refuses() ?
		    "refused" : "local", a->why);
		if (!px_qstore_refuses() && px_quota_take(st->quota,
		    st->qlimit.bytes, n, &used)) {
			m->taken += n;
			px_channel_meter_grow(m->ch, n);
			return;
		}
	}
	px_channel_meter_grow(m->ch, 0);
}

/* The channel used its lease: the next one is asked for. */
static void
ftp_quota_more(void *arg, struct px_channel *ch)
{
	struct ftp_meter *m = arg;
	struct ftp_state *st = m->st;
	struct px_qstore_answer a;

	(void)ch;
	m->req = px_qstore_lease(px_session_base(st->qs),
	    px_session_service(st->qs), st->user, m->day, st->qlimit.bytes,
	    px_qstore_lease_size(st->qlimit.bytes), ftp_quota_leased, m, &a);
	if (m->req == NULL)
		ftp_quota_leased(m, &a);
}

/* The transfer's byte meter: the store's leases when it granted one, else
 * this node's count of the day (what moved told to the store at the end,
 * when there is one). */
static void
ftp_quota_meter(struct ftp_state *st, bool upload)
{
	enum px_dir dir = upload ? PX_TO_SERVER : PX_TO_CLIENT;
	struct ftp_meter *m;
	bool leasing = px_qstore_enabled() &&
	    st->qwait.ans.result == PX_QSTORE_OK && st->qwait.ans.lease != 0;

	if (px_qstore_enabled() && (m = calloc(1, sizeof(*m))) != NULL) {
		m->st = st;
		m->ch = st->ch;
		m->day = st->qwait.ans.day;
		m->next = st->qmeters;
		st->qmeters = m;
	} else
		m = NULL;
	if (!leasing || m == NULL) {
		/* (Out of memory: the lease goes back, this node counts.) */
		if (leasing)
			px_qstore_give_back(px_session_base(st->qs),
			    px_session_service(st->qs), st->user,
			    st->qwait.ans.day, st->qwait.ans.lease);
		px_channel_meter(st->ch, dir, px_quota_bytes(st->quota),
		    st->qlimit.bytes);
		return;
	}
	m->leasing = true;
	m->leased = st->qwait.ans.lease;
	px_channel_meter_lease(st->ch, ftp_quota_more, m);
	px_channel_meter(st->ch, dir, &m->used, m->leased);
}

/* The meter of ch, off the session's list (NULL: ch is not metered). */
static struct ftp_meter *
ftp_quota_unlink(struct ftp_state *st, const struct px_channel *ch)
{
	struct ftp_meter **pp, *m;

	for (pp = &st->qmeters; (m = *pp) != NULL; pp = &m->next)
		if (m->ch == ch) {
			*pp = m->next;
			px_qstore_cancel(m->req);
			return m;
		}
	return NULL;
}

/* A leased transfer's end, moved bytes of it: what it was granted and did
 * not move goes back, to the day it was charged to; what it moved past its
 * leases (the buffered relay, which reads a buffer at a time, ended or cut
 * before the next lease came; bytes this node took while the store could
 * not answer) is charged, but the one byte past its lease a spliced
 * transfer reads, which the store's count never had. This node's count,
 * which had the leases and what it took, comes to what moved (the day
 * still the same). */
static void
ftp_quota_settle(struct px_session *s, struct ftp_state *st,
    const struct ftp_meter *m, uint64_t moved)
{
	px_qstore_give_back(px_session_base(s), px_session_service(s),
	    st->user, m->day, m->leased > moved ? m->leased - moved : 0);
	if (moved > m->leased + 1)
		px_qstore_add_bytes(px_session_base(s), px_session_service(s),
		    st->user, m->day, moved - m->leased - 1);
	if (st->quota != NULL && m->day == px_quota_day())
		px_quota_settle(st->quota, m->leased + m->taken, moved);
}

bool
ftp_quota_refused(struct px_session *s, struct ftp_state *st,
    const struct ftp_policy *p, const struct ftp_cmd *c, int *rc)
{
	enum px_quota_kind k;
	uint64_t used = 0, limit = 0;
	char ref[PX_RULE_REF_MAX];
	bool upload, store_down = false;
	int v;

	if (!px_quota_limited(&st->qlimit))
		return false;
	if (strcmp(c->verb, "RETR") == 0)
		upload = false;
	else if (strcmp(c->verb, "STOR") == 0 || strcmp(c->verb, "APPE") == 0 ||
	    strcmp(c->verb, "STOU") == 0)
		upload = true;
	else
		return false;
	/* No data can move: the 425 follows, nothing to count (a transfer
	 * the store counted meanwhile is given back). */
	if (st->ch == NULL || st->data_lost) {
		if (st->qwait.answered && st->qwait.ans.result == PX_QSTORE_OK) {
			px_qstore_refund(px_session_base(s),
			    px_session_service(s), st->user, st->qwait.ans.day);
			px_qstore_give_back(px_session_base(s),
			    px_session_service(s), st->user, st->qwait.ans.day,
			    st->qwait.ans.lease);
		}
		st->qwait.answered = false;
		return false;
	}
	if (st->quota == NULL &&
	    (st->quota = px_quota_get(px_session_service(s), st->user)) == NULL) {
		px_quota_refuse_full();
		px_session_log(s, LOG_WARNING, "ftp-quota user=%s kind=table-full "
		    "cmd=%s verdict=refused (the quota table is full)",
		    st->user, c->verb);
		k = PX_QUOTA_TRANSFERS;
	} else if ((v = px_qstore_enabled() ? ftp_quota_cluster(s, st, c, rc,
	    &used, &limit, &store_down) : (int)px_quota_begin(st->quota,
	    &st->qlimit, &used, &limit)) == -1)
		return true;
	else if ((k = (enum px_quota_kind)v) == PX_QUOTA_OK) {
		if (st->qlimit.bytes != 0)
			ftp_quota_meter(st, upload);
		return false;
	} else if (!store_down)
		px_session_log(s, LOG_NOTICE, "ftp-quota user=%s kind=%s "
		    "used=%llu limit=%llu cmd=%s verdict=refused%s rule=%s",
		    st->user, ftp_quota_kinds[k], (unsigned long long)used,
		    (unsigned long long)limit, c->verb,
		    px_qstore_enabled() ? " by=cluster" : "",
		    st->qlogin != NULL ? px_rule_ref_at(st->qlogin->line, NULL,
		    px_session_policy_file(s), ref, sizeof(ref)) :
		    ftp_user_ref(p, st->user, px_session_policy_file(s), ref,
		    sizeof(ref)));
	/* No data connection for it: the one the client opened is reset. */
	px_channel_abort(st->ch, PX_CHAN_CLIENT, "denied: daily quota used");
	px_channel_abort(st->ch, PX_CHAN_SERVER, "denied: daily quota used");
	st->ch = NULL;
	st->xfer[0] = '\0';
	if (store_down)
		*rc = ftp_reply_local(s, st, c->verb, "451 %s: the quota "
		    "store cannot be reached, try again later (proxy policy)",
		    c->verb);
	else
		*rc = ftp_reply_local(s, st, c->verb, "%s %s: daily %s quota "
		    "used up (proxy policy)", upload ? "552" : "550", c->verb,
		    k == PX_QUOTA_BYTES ? "byte" : "transfer");
	return true;
}

void
ftp_quota_chan_gone(struct px_session *s, struct ftp_state *st,
    const struct px_channel *ch)
{
	struct ftp_meter *m;

	if (ch == NULL || (m = ftp_quota_unlink(st, ch)) == NULL)
		return;
	/* What it charged against its leases: what it moved, and at most
	 * a buffer read ahead (its result, exact, is not to be had). */
	if (m->leasing)
		ftp_quota_settle(s, st, m, atomic_load(&m->used));
	free(m);
}

void
ftp_quota_close(struct px_session *s, struct ftp_state *st)
{
	px_qstore_wait_forget(&st->qwait);
	while (st->qmeters != NULL)
		ftp_quota_chan_gone(s, st, st->qmeters->ch);
}

void
ftp_quota_chan_done(struct px_session *s, struct ftp_state *st,
    const struct px_chan_result *r)
{
	uint64_t bytes = 0, transfers = 0, moved = r->bytes[0] + r->bytes[1];
	struct ftp_meter *m;

	/* What a metered transfer moved counts for the whole cluster: with
	 * leases, charged already (ftp_quota_settle), else added now. */
	if ((m = ftp_quota_unlink(st, r->ch)) != NULL) {
		if (m->leasing)
			ftp_quota_settle(s, st, m, moved);
		else
			px_qstore_add_bytes(px_session_base(s),
			    px_session_service(s), st->user, m->day, moved);
		free(m);
	}
	if (!r->metered_out || st->quota == NULL)
		return;
	px_quota_cut(st->quota);
	px_quota_usage(st->quota, &bytes, &transfers);
	px_session_log(s, LOG_NOTICE, "ftp-quota user=%s kind=bytes used=%llu "
	    "limit=%llu verdict=cut moved=%llu", st->user,
	    (unsigned long long)bytes, (unsigned long long)st->qlimit.bytes,
	    (unsigned long long)(r->bytes[0] + r->bytes[1]));
}
