/* An ICAP client (RFC 3507) for the worker threads: one body a request
 * (REQMOD for a request's body, RESPMOD for a response's), sent in chunks
 * as it arrives, with "Allow: 204"; the verdict comes back once through a
 * callback on the worker's event base.
 *
 * Per worker and per scanner: keep-alive connections (an idle one is
 * reused after a 204; one that carried a 200 is closed, its body unread),
 * at most min(max-connections, the server's Max-Connections) at once (the
 * others wait their turn, up to the scanner's timeout: then they fail as
 * "scanner-busy"; a scan's timeout starts afresh with its connection, so
 * its wait in the queue never shortens the scanner's time to answer), and
 * one OPTIONS at first use (Methods, Preview, Transfer-Preview,
 * Max-Connections, ISTag, Options-TTL; again once its TTL has passed). Previews (RFC 3507 4.5)
 * as the OPTIONS ask: the first Preview bytes, with "ieof" when they are
 * the whole body; on 100 Continue the rest; a 204 to the preview passes
 * the body with its rest unscanned, as the scanner decided. The
 * Transfer-Preview, -Complete and -Ignore lists pick, by the file's
 * extension in the request line, a preview, the whole body, or nothing
 * (a file the scanner does not want passes unsent, and says so); a
 * scanner with preview="no" gets every body whole.
 *
 * Memory: what waits to go to the scanner is the caller's to bound
 * (px_icap_queued); a response head from the scanner is cut at
 * PX_ICAP_HEAD_MAX. The scanner's timeout bounds each wait: the queue for
 * a connection, the connect, the OPTIONS answer, a write that does not
 * drain, and the verdict after the body's end. */
#ifndef PX_ICAP_H
#define PX_ICAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct evbuffer;
struct px_scanner;

#define PX_ICAP_HEAD_MAX	(64 * 1024)

/* ---- the response parser (pure) ------------------------------------ */

struct px_icap_head {
	int		status;		/* ICAP status: 100, 200, 204, ... */
	/* Encapsulated: offsets from the end of the ICAP head; -1 absent. */
	long		req_hdr, res_hdr, body;
	bool		null_body;
	bool		conn_close;
	/* The encapsulated HTTP status (200 with res-hdr), 0: none. */
	int		http_status;
	char		threat[128];	/* X-Infection-Found's Threat=, or
					 * X-Violations-Found's, X-Virus-ID */
	char		istag[64];
	char		methods[64];
	long		preview;	/* -1: absent */
	long		max_connections;	/* 0: absent */
	long		options_ttl;	/* seconds; 0: absent */
	char		transfer_preview[64];
	char		transfer_complete[64];
	char		transfer_ignore[64];
};

/* Looks for a complete ICAP response head at buf (up to the empty line),
 * and, when Encapsulated says one follows at offset 0 or 
 * more, the encapsulated HTTP head after it. Returns the bytes of both
 * heads (what precedes the body), 0 when more bytes are needed, -1 when
 * malformed (*why says how). */
ssize_t	px_icap_parse(const char *buf, size_t len, struct px_icap_head *h,
	    const char **why);

/* A chunked body's decoder (RFC 9112 7.1), for a changed message: what
 * came of it in `in` is taken from there, its data added to `out`, at
 * most `max` bytes in all. Chunk extensions and trailer lines (32 at
 * most) are skipped. 1 the body's end came, 0 more is needed, -1
 * malformed or over max (*why says how). Starts zeroed. */
struct px_icap_dechunk {
	uint64_t	left;		/* data bytes of the chunk under way */
	bool		need_crlf;	/* after a chunk's data */
	bool		last;		/* the 0 chunk came: trailers */
	unsigned	trailers;
};
int	px_icap_dechunk(struct px_icap_dechunk *d, struct evbuffer *in,
	    struct evbuffer *out, size_t max, const char **why);

/* ---- the client ----------------------------------------------------- */

enum px_icap_verdict {
	PX_ICAP_CLEAN = 0,	/* 204: unchanged */
	PX_ICAP_INFECTED,	/* 200 naming a threat, or a blocking page */
	PX_ICAP_MODIFIED,	/* 200 with a changed message, no threat
				 * named: in mod_head and mod_body when
				 * the caller asked for them */
	PX_ICAP_ERROR,		/* no answer, or not one we understand */
};

struct px_icap_result {
	enum px_icap_verdict	verdict;
	int			icap_status;	/* 0: none came */
	int			http_status;	/* the encapsulated one */
	char			threat[128];	/* INFECTED: the name */
	char			error[128];	/* ERROR: what went wrong */
	char			istag[64];
	/* MODIFIED, after px_icap_want_modified: the scanner's HTTP
	 * response head (empty line included) and its body, de-chunked.
	 * The callback may take their bytes; freed after it. Else NULL. */
	struct evbuffer		*mod_head;
	struct evbuffer		*mod_body;
};

struct px_icap_req;
/* res NULL: what was queued for the scanner drained (room again). Else
 * the verdict: the request is freed once the callback returns. */
typedef void (*px_icap_cb)(void *arg, const struct px_icap_result *res);

/* Starts a scan of one body on the calling worker: REQMOD (respmod false)
 * with req_hdr, or RESPMOD with req_hdr and res_hdr (each a whole HTTP
 * head, empty line included). The callback never runs from inside a
 * px_icap_* call. NULL when out of memory. */
struct px_icap_req *px_icap_start(struct event_base *base,
	    const struct px_scanner *sc, bool respmod, const void *req_hdr,
	    size_t req_len, const void *res_hdr, size_t res_len,
	    px_icap_cb cb, void *arg);
/* The caller can relay a changed response (RESPMOD) whose body has up
 * to max bytes: a 200 naming no threat, with an HTTP status under 400,
 * is then read whole (its body bounded by max, its chunks checked, under
 * the timeout) and handed over in the result. Without this call such a
 * 200 is PX_ICAP_MODIFIED with its body unread. */
void	px_icap_want_modified(struct px_icap_req *r, size_t max);
/* Copies the first n bytes of src (left there) into the body, as one
 * chunk. */
void	px_icap_body(struct px_icap_req *r, struct evbuffer *src, size_t n);
/* The body is complete: the verdict follows. */
void	px_icap_end(struct px_icap_req *r);
/* Bytes accepted and not yet written to the scanner. */
size_t	px_icap_queued(const struct px_icap_req *r);
/* Drops the scan, without a callback; its connection is closed. */
void	px_icap_cancel(struct px_icap_req *r);
/* The calling worker's connections and state (at its exit). */
void	px_icap_worker_exit(void);

#endif
