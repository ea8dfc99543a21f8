/* r66: the files of a transfer through the service's scanner (<scan>),
 * its file policy by content (<content>) and its audit record (<audit>),
 * proxyd/scan/. One struct r66_scan per inspected transfer, owned by its
 * channel in r66.c; this file knows frames, not channels. */
#ifndef R66_SCAN_H
#define R66_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyser.h"
#include "r66_wire.h"

struct evbuffer;
struct r66_scan;

/* What names a transfer, for the scanner's HTTP head and the log. The
 * strings are the channel's and must live as long as the scan. */
struct r66_scan_what {
	const char	*file, *host, *server, *rule;
	const char	*auth;		/* how host proved itself to proxyd */
	bool		 upload;	/* the client sends the file */
	int64_t		 length;	/* announced size, -1: unknown */
	uint32_t	 rank;		/* > 0: a restart */
	/* The last Data frame must be held even without a scanner: the
	 * size checked against the announced one may refuse the end. */
	bool		 hold_end;
};

/* Why a transfer is refused: the ErrorPacket's code and text, and the
 * reason= of its r66-transfer line. */
struct r66_scan_refusal {
	char		 code;
	char		 msg[128];
	const char	*why;
	char		 ref[280];	/* policy-rule=; "": "scan" */
	unsigned	 counter;	/* R66_C_DENIED_* */
};

enum r66_scan_state {
	R66_SCAN_OFF = 0,	/* not scanned (any more): frames go on */
	R66_SCAN_ON,		/* scanning, or waiting for the verdict */
	R66_SCAN_REFUSE,	/* refuse the transfer (see the refusal) */
};

/* A transfer starts (its request was answered). ON: *out is its scan;
 * OFF: not inspected (no <scan> for that direction or allowed unscanned,
 * no <content>, no <audit>, no size to hold the end for); REFUSE: *why
 * says how to refuse it. */
enum r66_scan_state r66_scan_begin(struct px_session *s,
	    const struct r66_scan_what *w, struct r66_scan **out,
	    struct r66_scan_refusal *why);
/* The direction its blocks go in. */
enum px_dir	r66_scan_dir(const struct r66_scan *sc);
/* A whole, checked frame of the transfer from its sender, at the start of
 * src: taken (held, the block copied to the scanner, the sniffer, the
 * record; what was held before a Data frame goes to out, once the file's
 * type is judged). REFUSE (the block went past max-size with
 * over-size="block", or its type is denied): the frame is dropped. OFF:
 * nothing more to inspect (it went past max-size with over-size="allow"
 * and there is no record): what was held and the frame went to out; free
 * the scan. */
enum r66_scan_state r66_scan_take(struct r66_scan *sc, struct evbuffer *src,
	    const struct r66_frame *f, struct evbuffer *out,
	    struct r66_scan_refusal *why);
/* The scanner has as much queued as a transfer may have: read no more of
 * that direction until it drains (the scan resumes the session then). */
bool		r66_scan_full(const struct r66_scan *sc);
/* From on_data(r66_scan_dir()): the verdict, if it came. ON: none yet,
 * or passed with a record still to write (what was held went to out; the
 * rest passes through r66_scan_take). OFF: passed (clean, or allowed):
 * what was held went to out; free it. REFUSE: what was held is dropped;
 * refuse the transfer. */
enum r66_scan_state r66_scan_settle(struct r66_scan *sc, struct evbuffer *out,
	    struct r66_scan_refusal *why);
/* Drops the scan and what it holds, saying why in its r66-scan line
 * (verdict=none): the sender left before the verdict. */
void		r66_scan_abandon(struct r66_scan *sc, const char *why);
/* How the transfer ended (its r66-transfer line's verdict, reason= and
 * policy-rule=), for its audit record. */
void		r66_scan_outcome(struct r66_scan *sc, const char *verdict,
		    const char *why, const char *ref);
/* Drops the scan and what it holds (the transfer ended otherwise), and
 * writes its audit record, if it has one. */
void		r66_scan_free(struct r66_scan *sc);

#endif
