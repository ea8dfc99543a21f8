/* What the scan's two files share (http_scan.c: bodies held and released
 * by the verdict; http_scan_mod.c: the scanner's changed response in
 * place of a held one). Not for the rest of the analyser: http_int.h. */
#ifndef HTTP_SCAN_INT_H
#define HTTP_SCAN_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "http_head.h"
#include "http_int.h"

struct px_icap_result;

/* A response head held (struct http_scan.kept): the judged head and what
 * the writer is given with it, its extra field lines copied (the
 * caller's go once the head is judged). */
struct http_scan_head {
	struct http_head	*m;		/* http_head_dup */
	struct http_resp_ctx	 rs;		/* rs.extra: extra, or NULL */
	size_t			 size;		/* its bytes, counted when kept */
	char			 extra[];
};

/* "upload" (PX_TO_SERVER) or "download". */
const char *http_scan_dir_name(enum px_dir dir);
/* The service's scanner. */
const struct px_scanner *http_scanner(const struct http_txn *t);
/* The scan's verdict in dir, for its audit record and its counter. */
void	http_scan_count(struct http_txn *t, enum px_dir dir,
	    const char *verdict);
/* The held head of sc goes: its bytes, counted when it was kept. */
size_t	http_scan_head_free(struct http_scan *sc);
/* Verdict clean (or passed): what is held goes on, the transfer
 * completes. */
void	http_scan_pass(struct http_txn *t, enum px_dir dir);
/* MODIFIED: the scanner changed the message in dir (http_scan_mod.c).
 * true when relayed in place of the held one (passed on); false: to be
 * refused as an infected one. */
bool	http_scan_modified(struct http_txn *t, enum px_dir dir,
	    const struct px_icap_result *res);

#endif
