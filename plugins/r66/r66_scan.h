/* r66: the files of a transfer through the service's scanner (<scan>,
 * proxyd/scan/). One struct r66_scan per scanned transfer, owned by its
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
	bool		 upload;	/* the client sends the file */
	int64_t		 length;	/* announced size, -1: unknown */
	uint32_t	 rank;		/* > 0: a restart */
};

/* Why a transfer is refused: the ErrorPacket's code and text, and the
 * reason= of its r66-transfer line. */
struct r66_scan_refusal {
	char		 code;
	char		 msg[128];
	const char	*why;
};

enum r66_scan_state {
	R66_SCAN_OFF = 0,	/* not scanned (any more): frames go on */
	R66_SCAN_ON,		/* scanning, or waiting for the verdict */
	R66_SCAN_REFUSE,	/* refuse the transfer (see the refusal) */
};

/* A transfer starts (its request was answered). ON: *out is its scan;
 * OFF: not scanned (no <scan> for that direction, or allowed unscanned);
 * REFUSE: *why says how to refuse it. */
enum r66_scan_state r66_scan_begin(struct px_session *s,
	    const struct r66_scan_what *w, struct r66_scan **out,
	    struct r66_scan_refusal *why);
/* The direction its blocks go in. */
enum px_dir	r66_scan_dir(const struct r66_scan *sc);
/* A whole, checked frame of the transfer from its sender, at the start of
 * src: taken (held, the block copied to the scanner; what was held before
 * a Data frame goes to out). REFUSE (the block went past max-size with
 * over-size="block"): the frame is left in src. OFF: it went past with
 * over-size="allow": what was held and the frame went to out; the scan
 * is over (free it). */
enum r66_scan_state r66_scan_take(struct r66_scan *sc, struct evbuffer *src,
	    const struct r66_frame *f, struct evbuffer *out,
	    struct r66_scan_refusal *why);
/* The scanner has as much queued as a transfer may have: read no more of
 * that direction until it drains (the scan resumes the session then). */
bool		r66_scan_full(const struct r66_scan *sc);
/* From on_data(r66_scan_dir()): the verdict, if it came. ON: none yet.
 * OFF: passed (clean, or allowed): what was held went to out; free it.
 * REFUSE: what was held is dropped; refuse the transfer. */
enum r66_scan_state r66_scan_settle(struct r66_scan *sc, struct evbuffer *out,
	    struct r66_scan_refusal *why);
/* Drops the scan and what it holds, saying why in its r66-scan line
 * (verdict=none): the sender left before the verdict. */
void		r66_scan_abandon(struct r66_scan *sc, const char *why);
/* Drops the scan and what it holds (the transfer ended otherwise). */
void		r66_scan_free(struct r66_scan *sc);

#endif
