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
 * leaves it to this node's own count ("local"). What a metered transfer
 * moved is added to the store when its channel ends. */
#include <stdio.h>
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

/* The store's answer, on the worker's loop: the held command runs again. */
static void
ftp_quota_answer(void *arg, const struct px_qstore_answer *a)
{
	struct ftp_state *st = arg;

	st->qask = NULL;
	st->qans = *a;
	st->qanswered = st->qreplay = true;
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
	struct px_qstore_answer a;

	*store_down = false;
	if (st->qanswered) {
		a = st->qans;
		st->qanswered = false;
	} else {
		st->qs = s;
		st->qask = px_qstore_begin(px_session_base(s),
		    px_session_service(s), st->user, &st->qlimit,
		    ftp_quota_answer, st, &a);
		if (st->qask != NULL) {
			*rc = FTP_RC_WAIT;
			return -1;
		}
	}
	switch (a.result) {
	case PX_QSTORE_OK:
		px_quota_admit(st->quota, a.bytes);
		return PX_QUOTA_OK;
	case PX_QSTORE_TRANSFERS:
		px_quota_refused(st->quota, PX_QUOTA_TRANSFERS);
		*used = a.transfers;
		*limit = st->qlimit.transfers;
		return PX_QUOTA_TRANSFERS;
	case PX_QSTORE_BYTES:
		px_quota_refused(st->quota, PX_QUOTA_BYTES);
		*used = a.bytes;
		*limit = st->qlimit.bytes;
		return PX_QUOTA_BYTES;
	case PX_QSTORE_ERROR:
		break;
	}
	px_session_log(s, LOG_WARNING, "ftp-quota user=%s kind=store-error "
	    "cmd=%s store=%s verdict=%s (%s)", st->user, c->verb,
	    px_qstore_name(), px_qstore_refuses() ? "refused" : "local",
	    a.why);
	if (px_qstore_refuses()) {
		*store_down = true;
		return PX_QUOTA_TRANSFERS;
	}
	return px_quota_begin(st->quota, &st->qlimit, used, limit);
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
		if (st->qanswered && st->qans.result == PX_QSTORE_OK)
			px_qstore_refund(px_session_base(s),
			    px_session_service(s), st->user);
		st->qanswered = false;
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
		if (st->qlimit.bytes != 0) {
			px_channel_meter(st->ch, upload ? PX_TO_SERVER :
			    PX_TO_CLIENT, px_quota_bytes(st->quota),
			    st->qlimit.bytes);
			st->qmetered = st->ch;
		}
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
ftp_quota_close(struct ftp_state *st)
{
	px_qstore_cancel(st->qask);
	st->qask = NULL;
}

void
ftp_quota_chan_done(struct px_session *s, struct ftp_state *st,
    const struct px_chan_result *r)
{
	uint64_t bytes = 0, transfers = 0;

	/* What a metered transfer moved counts for the whole cluster. */
	if (r->ch == st->qmetered && st->qmetered != NULL) {
		st->qmetered = NULL;
		if (px_qstore_enabled())
			px_qstore_add_bytes(px_session_base(s),
			    px_session_service(s), st->user,
			    r->bytes[0] + r->bytes[1]);
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
