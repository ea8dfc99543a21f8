/* r66: the session state shared by the state machine (r66.c), the checks
 * of each frame against the <r66> policy (r66_check.c), the quotas
 * (r66_quota.c) and the inspection of files (r66_scan.c). */
#ifndef R66_INT_H
#define R66_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyser.h"
#include "r66_policy.h"
#include "r66_wire.h"
#include "quota_store.h"
#include "rules.h"

struct evbuffer;
struct r66_scan;

#define R66_CHAN_MAX		8	/* concurrent local channels per connection */
/* Channels remembered after their end, and for how long: a sender's frames
 * already in flight when the receiver's ErrorPacket (or the sender's own
 * end) went out are dropped, not a violation (Waarp ignores them too). */
#define R66_ENDED_MAX		8
#define R66_LATE_MS		10000
#define R66_JSON_RENAME_CLASS \
	"org.waarp.openr66.protocol.localhandler.packet.json.RequestJsonPacket"

/* Counter indexes, in r66_counters[] order. */
enum {
	R66_C_TRANSFERS = 0,
	R66_C_TRANSFERS_DENIED,
	R66_C_TRANSFERS_FAILED,
	R66_C_DENIED_HOST,
	R66_C_DENIED_RULE,
	R66_C_DENIED_MODE,
	R66_C_DENIED_FILE,
	R66_C_DENIED_SIZE,
	R66_C_DENIED_BLOCK,
	R66_C_DENIED_DIGEST,
	R66_C_DENIED_ADMIN,
	R66_C_VIOLATIONS,
	R66_C_LATE_FRAMES,
	R66_C_DENIED_SCAN,
	R66_C_DENIED_QUOTA,
	R66_C_DENIED_CONTENT,
};


enum r66_cstate {
	R66_CH_FREE = 0,
	R66_CH_AUTH_ASKED,
	R66_CH_AUTHED,
	R66_CH_REQ_ASKED,
	R66_CH_XFER,
	R66_CH_ET_ASKED,
	R66_CH_ET_DONE,
	R66_CH_ER_ASKED,
	R66_CH_OTHER,		/* information, test, valid... */
};

struct r66_chan {
	enum r66_cstate	 st;
	uint32_t	 cid, sid;	/* client's and server's channel ids */
	char		 host[128];	/* Authent way 0, until answered */
	bool		 has_req;
	struct r66_request req;
	uint64_t	 max_size;	/* of the matching <file>; 0 = none */
	uint64_t	 quota_bytes;	/* the host's byte quota; 0 = none */
	bool		 qstore;	/* its bytes go to the cluster's store */
	/* With qstore: the store's leases (r66_quota.c). Granted and not
	 * moved yet, charged in all, the lease asked for (the blocks in
	 * its direction wait for it), the store's count of the day without
	 * qleft at its last answer; qcut: no more granted, qlocal: the store
	 * could not answer and on-store-error="local" (this node counts:
	 * qtaken, what it took meanwhile, goes to the store at the end);
	 * qdate: the UTC day the store counted the request in (its leases
	 * are charged to, and given back to, that day). */
	uint64_t	 qleft, qcharged, qday, qdate, qtaken;
	struct px_qstore_req *qlease;
	struct r66_state *qst;
	bool		 qcut, qlocal;
	const struct px_rule *file_rule; /* that <file>, for rule=; NULL */
	uint32_t	 next_rank;
	uint32_t	 start_rank;	/* > 0: a restart, sizes are partial */
	uint64_t	 bytes, blocks;
	/* Block bytes spliced by passes, and through user space: the log's
	 * payload= (no policy check reads a block's bytes). */
	uint64_t	 payload_spliced, payload_copied;
	char		 hash_algo[24];
	bool		 size_told;	/* its size mismatch was logged */
	/* Its file through the scanner (r66_scan.h); NULL: not scanned. */
	struct r66_scan	*scan;
};

/* A channel that ended lately (see R66_LATE_MS). */
struct r66_ended {
	uint32_t	 cid, sid;
	uint64_t	 at_ms;		/* 0: slot unused */
	uint64_t	 dropped;	/* its late frames */
};

struct r66_state {
	struct evbuffer	*hold[2];	/* partial frame, per px_dir */
	bool		 done;		/* ending: drop whatever comes */
	bool		 abort;		/* action="abort": reset, no reply */
	char		 abort_why[160];
	bool		 authed;
	bool		 proven;	/* host proven to proxyd (<partner>) */
	bool		 proven_cert;	/* ... by a client certificate */
	char		 host[128];	/* the connection's identity */
	struct px_quota	*quota;		/* its quota entry, once needed */
	/* With cluster/@store (quota_store.h): the question for the
	 * request of channel qcid under way (the client's frames wait in
	 * `in` meanwhile), then its answer for when that frame comes again. */
	struct px_session *qs;
	struct px_qstore_wait qask;
	bool		 qwait;
	uint32_t	 qcid;
	char		 server_host[128];
	char		 cdigest[24], sdigest[24];	/* advertised DIGESTALGO */
	bool		 creuse, sreuse;		/* R66VERSION >= 3.6.1 */
	struct r66_chan	 ch[R66_CHAN_MAX];
	struct r66_ended ended[R66_ENDED_MAX];	/* a ring */
	unsigned	 ended_next;
};

/* What a frame check decided. */
enum r66_fv {
	R66_FV_PASS = 0,	/* forward it */
	R66_FV_DROP,		/* swallow it (channel refused) */
	R66_FV_END,		/* the session is finishing */
	R66_FV_LATE,		/* for a channel that ended lately: dropped
				 * once whole, and counted */
	R66_FV_WAIT,		/* a request waits for the cluster's quota
				 * store: kept, judged again on its answer */
};

/* r66.c */
void	r66_xfer_log(struct px_session *s, struct r66_state *st,
	    const struct r66_chan *c, const char *verdict, const char *why,
	    const char *ref);
void	r66_chan_free(struct r66_state *st, struct r66_chan *c);
enum r66_fv r66_refuse(struct px_session *s, struct r66_state *st,
	    struct r66_chan *c, unsigned counter, char code, const char *msg,
	    const char *why, const char *ref, enum px_action act, bool whole);
const char *r66_ref(struct px_session *s, const struct px_rule *hit,
	    char *buf, size_t size);
enum r66_fv r66_violation(struct px_session *s, struct r66_state *st,
	    enum px_dir dir, const char *what);
bool	r66_client_sends(const struct r66_chan *c);
/* r66_check.c: a frame of channel c, checked; R66_FV_*. */
enum r66_fv r66_check_request(struct px_session *s, struct r66_state *st,
	    struct r66_chan *c, const struct r66_request *rq, bool answer);
enum r66_fv r66_check_data(struct px_session *s, struct r66_state *st,
	    struct r66_chan *c, const struct r66_frame *f, uint32_t rank,
	    bool from_client);
enum r66_fv r66_check_endtransfer(struct px_session *s, struct r66_state *st,
	    struct r66_chan *c, const struct r66_frame *f, bool from_client);
enum r66_fv r66_check_endrequest(struct px_session *s, struct r66_state *st,
	    struct r66_chan *c, const struct r66_frame *f, bool from_client);
enum r66_fv r66_check_other(struct px_session *s, struct r66_state *st,
	    struct r66_chan *c, const struct r66_frame *f);
/* r66_quota.c: the host's daily quotas at a request and at each block.
 * With the cluster's store, a request's check is R66_FV_WAIT until the
 * store answered (r66_quota_waiting: its frame comes again, and
 * r66_quota_request runs again on it alone), and so is a block's when
 * the transfer used its lease (r66_quota_leasing: the blocks of its
 * direction wait, r66_quota_data runs again on the answer; it changes
 * nothing of the channel before it passes a block); r66_quota_close
 * forgets a question under way, r66_quota_chan_end gives the store back
 * what a transfer was granted and did not move. */
enum r66_fv r66_quota_request(struct px_session *s, struct r66_state *st,
	    struct r66_chan *c);
bool	r66_quota_waiting(const struct r66_state *st, const struct r66_frame *f);
bool	r66_quota_leasing(const struct r66_state *st, bool from_client);
void	r66_quota_close(struct r66_state *st);
void	r66_quota_chan_end(struct r66_state *st, struct r66_chan *c);
enum r66_fv r66_quota_data(struct px_session *s, struct r66_state *st,
	    struct r66_chan *c, uint64_t n);
void	r66_caps(const struct r66_authent *a, char *digest, size_t dsz,
	    bool *reuse);

#endif
