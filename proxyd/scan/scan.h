/* Content scanning: the scanners of the daemon file (<scanners><icap>),
 * a service's <scan> (which scanner, which direction, up to which size),
 * and the verdict counters /metrics exports. The ICAP client that talks
 * to a scanner is icap.h. This layer sits between relay and config: it
 * knows no px_config; config.c hands it the XML nodes and the scanner
 * list to look names up in. */
#ifndef PX_SCAN_H
#define PX_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sniff.h"

struct _xmlNode;
struct px_cfgerr;
struct evbuffer;

/* One <icap>: immutable once loaded, shared by every worker. */
struct px_scanner {
	char			*name;
	char			*url;		/* as written, for the log */
	struct sockaddr_storage	 addr;
	socklen_t		 addrlen;
	char			 authority[72];	/* host:port, for Host */
	char			 path[128];	/* the service, "/avscan" */
	uint64_t		 timeout_ms;
	unsigned		 max_connections;	/* per worker */
	bool			 on_error_allow;
	bool			 no_preview;	/* preview="no" */
};

struct px_scanners {
	struct px_scanner	*v;
	size_t			 n;
	char			*spool_dir;	/* <scanners spool=>; NULL:
						 * PX_SPOOL_DIR_DEFAULT */
};

/* Which bodies a <scan> sends: requests' (upload), responses'
 * (download), or both. */
#define PX_SCAN_UPLOAD		1u
#define PX_SCAN_DOWNLOAD	2u

/* A service's <scan>: scanner NULL when the service has none. */
struct px_scan_policy {
	const struct px_scanner	*scanner;
	unsigned		 direction;	/* PX_SCAN_* bits */
	uint64_t		 max_size;
	bool			 over_size_allow;
	/* partial="allow": a file moved in pieces (FTP REST and APPE,
	 * HTTP Range) goes on, each piece scanned alone; "refuse" (the
	 * default): FTP refuses REST and APPE, HTTP asks the server for
	 * the whole body. */
	bool			 partial_allow;
	/* deliver="tail": the body streams to its receiver as it comes,
	 * its last part held (the former way); else (after-verdict) none
	 * of it goes before the verdict, held in a spool (spool.h) in
	 * spool_dir (the scanners' <scanners spool=>). */
	bool			 deliver_tail;
	const char		*spool_dir;
	/* user=/group=: the transfers of those users alone are scanned
	 * (px_scan_on); none: everyone's. */
	struct px_who_set	 who;
	/* The service's <content> rules (sniff.h), loaded apart from
	 * <scan>: they apply with or without a scanner. */
	struct px_content_policy content;
	/* <audit>: bodies of at least audit_min_size bytes get a record
	 * (audit.h), when the daemon file has an <audit target>. */
	bool			 audit;
	uint64_t		 audit_min_size;
};

/* Reads <scanners> (NULL: none). Each bad value is reported as
 * file:line; 0, or -1 if any. */
int	px_scanners_load(struct px_scanners *sc, const struct _xmlNode *n,
	    struct px_cfgerr *e);
void	px_scanners_free(struct px_scanners *sc);
const struct px_scanner *px_scanner_find(const struct px_scanners *sc,
	    const char *name);
/* Reads a service's <scan> (NULL: no scanning), the scanner named from
 * sc. 0, or -1 after reporting. */
int	px_scan_policy_load(struct px_scan_policy *p,
	    const struct _xmlNode *n, const struct px_scanners *sc,
	    struct px_cfgerr *e);
void	px_scan_policy_free(struct px_scan_policy *p);
/* Whether p has a scanner for transfers in direction bit (PX_SCAN_*)
 * of who (NULL: nobody proven). */
bool	px_scan_on(const struct px_scan_policy *p, unsigned bit,
	    const struct px_content_who *who);
/* Reads a service's <audit> into p (after px_scan_policy_load). 0, or
 * -1 after reporting. */
int	px_scan_audit_load(struct px_scan_policy *p, const struct _xmlNode *n,
	    struct px_cfgerr *e);
/* "icap://HOST:PORT/SERVICE" (port 1344 when absent; HOST an IP
 * literal): fills addr, authority and path. 0, or -1 with *why. */
int	px_icap_url_parse(const char *url, struct px_scanner *out,
	    const char **why);

/* ---- counters: proxyd_scan_total{service,scanner,verdict} ---------- */
/* One scanned (or refused unscanned) body. verdict: clean, infected,
 * error, error-allowed, over-size, over-size-allowed. Any thread. */
void	px_scan_count(const char *service, const char *scanner,
	    const char *verdict);
/* Appends the family in the Prometheus text format. */
void	px_scan_metrics(struct evbuffer *b);

#endif
