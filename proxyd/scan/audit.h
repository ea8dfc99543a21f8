/* The audit record: one JSON line per transfer (an HTTP body, an FTP or
 * an R66 file) to the daemon file's <audit target=...>, with the
 * sha256 of its content computed on the way. Analyser-neutral: the
 * analyser begins a record when a transfer starts, feeds it the bytes as
 * they pass (a buffer or the front of an evbuffer, not drained), and ends
 * it with what it knows (struct px_audit_info). The line goes through the
 * log thread (px_log_record): a worker never writes to the file.
 * Counted in proxyd_audit_records_total{service,verdict}. */
#ifndef PX_AUDIT_H
#define PX_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ja4.h"

struct evbuffer;
struct sockaddr;

/* One transfer under way: allocated by px_audit_begin, freed by
 * px_audit_end or px_audit_cancel. */
struct px_audit {
	struct evp_md_ctx_st	*sha;		/* EVP_MD_CTX */
	uint64_t		 size;		/* bytes fed */
	int64_t			 announced;	/* -1: not said */
	/* The TLS peers' certificate subjects (RFC 2253), taken while the
	 * connections are there; "": none. */
	char			 tls_server[256];
	char			 tls_client[256];
	/* The fingerprints of the transfer's own data connection (FTPS),
	 * taken when it ends: its client's JA4, its server's JA4S (ja4.h);
	 * "": none (no TLS there, or no data connection of its own). */
	char			 data_ja4[PX_JA4_LEN + 1];
	char			 data_ja4s[PX_JA4S_LEN + 1];
	/* The scanner's name for what it found, when the analyser has it
	 * (written unless px_audit_info.threat says otherwise); "": none. */
	char			 threat[128];
};

/* What the analyser knows at the transfer's end. A NULL string is
 * written as null (not known, or not applicable). */
struct px_audit_info {
	const char		*service;
	const char		*analyser;
	uint64_t		 session;
	const struct sockaddr	*client, *server;
	const char		*client_zone, *server_zone;
	const char		*user;		/* FTP user, R66 partner, HTTP's
						 * proven user (<auth>) */
	/* Written only when not NULL: how user proved who it is
	 * (negotiate, basic). */
	const char		*auth;
	/* Written only when not NULL: the client's TLS fingerprint (JA4),
	 * the server's (JA4S, where proxyd speaks TLS to it). */
	const char		*ja4;
	const char		*ja4s;
	const char		*rule;		/* the deciding rule, FILE:LINE */
	/* Written only when not NULL: the R66 transfer rule the partner
	 * asked for, and why a refused transfer was (its log's reason=). */
	const char		*transfer_rule;
	const char		*reason;
	const char		*file;		/* HTTP: the URL path */
	const char		*direction;	/* upload, download */
	const char		*scan_verdict, *threat;
	const char		*content_type, *content_action;
	const char		*verdict;	/* accept, deny, error */
	bool			 complete;	/* the receiver got all of it */
};

/* A record is to be written (a target is configured). */
bool	px_audit_enabled(void);
/* A transfer of announced bytes (-1: unknown) starts. NULL when audit
 * is off or out of memory (then the transfer goes unrecorded, and the
 * caller need not care). */
struct px_audit *px_audit_begin(int64_t announced);
void	px_audit_feed(struct px_audit *a, const void *buf, size_t n);
/* The first n bytes of b, left in it. */
void	px_audit_feed_evbuffer(struct px_audit *a, struct evbuffer *b,
	    size_t n);
/* Writes the record, counts it and frees a. */
void	px_audit_end(struct px_audit *a, const struct px_audit_info *info);
void	px_audit_cancel(struct px_audit *a);
/* The transfer is below the service's audit min-size: fewer bytes passed
 * and it did not announce as many (one cut short counts by what it
 * announced). Then *a is cancelled and set NULL, and the answer is true. */
bool	px_audit_drop_below(struct px_audit **a, uint64_t min_size);

/* The record as a JSON line (no newline) into buf: its length, or 0
 * when it does not fit. Pure but for the clock; for the tests. */
size_t	px_audit_format(char *buf, size_t cap, const struct px_audit *a,
	    const char *sha256_hex, const struct px_audit_info *info);

/* ---- counters: proxyd_audit_records_total{service,verdict} -------- */
void	px_audit_metrics(struct evbuffer *b);

#endif
