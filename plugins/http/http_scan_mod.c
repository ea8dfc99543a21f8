/* The scanner's changed response (ICAP 200 naming no threat) in place of
 * a response held whole (http_scan.c holds it): to an HTTP/1.x client as
 * the scanner's status line and fields, framed anew by a Content-Length,
 * the connection closed after it; to an HTTP/2 stream as HEADERS made
 * from that head parsed (through the response rules) and DATA. Anything
 * else the scanner changed (a request, a response whose head went or
 * that is spooled) is not relayed: the caller refuses it as infected. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "http_head.h"
#include "http_int.h"
#include "http_parse.h"
#include "http_scan_int.h"
#include "icap.h"
#include "scan.h"

/* A header line of the scanner's changed response that the client gets:
 * not its framing nor hop-by-hop ones (proxyd frames the body anew). */
static bool
http_scan_mod_keeps(const char *line, size_t len)
{
	static const char *const drop[] = { "content-length:",
	    "transfer-encoding:", "connection:", "keep-alive:",
	    "proxy-connection:", "trailer:", "upgrade:" };
	size_t i;

	for (i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (len >= strlen(drop[i]) &&
		    strncasecmp(line, drop[i], strlen(drop[i])) == 0)
			return false;
	for (i = 0; i < len; i++)
		if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
			return false;
	return true;
}

/* The scanner's changed head's status line and the field lines the
 * client gets, into to. false when it is not an HTTP response head. */
static bool
http_scan_mod_lines(struct evbuffer *to, const struct px_icap_result *res)
{
	size_t n = evbuffer_get_length(res->mod_head), len;
	char *head = (char *)evbuffer_pullup(res->mod_head, (ssize_t)n);
	char *line, *eol;

	if (head == NULL || n < 12 || strncmp(head, "HTTP/1.", 7) != 0)
		return false;
	for (line = head; line < head + n; line = eol + 1) {
		if ((eol = memchr(line, '\n', (size_t)(head + n - line))) == NULL)
			return false;
		len = (size_t)(eol - line);
		if (len > 0 && line[len - 1] == '\r')
			len--;
		if (len == 0)
			break;
		if (line == head || http_scan_mod_keeps(line, len)) {
			evbuffer_add(to, line, len);
			evbuffer_add(to, "\r\n", 2);
		}
	}
	return true;
}

/* The scanner's changed response, in place of the held one, to an
 * HTTP/1.x client: its status line and fields, a Content-Length for its
 * body, the connection closed after it. false when its head is not one
 * to relay. */
static bool
http_scan_mod_build(struct http_txn *t, struct evbuffer *to,
    const struct px_icap_result *res)
{
	struct http_state *h = t->conn;

	if (!http_scan_mod_lines(to, res))
		return false;
	evbuffer_add_printf(to, "Content-Length: %zu\r\nConnection: close"
	    "\r\n\r\n", evbuffer_get_length(res->mod_body));
	evbuffer_add_buffer(to, res->mod_body);
	h->client_keep = false;
	return true;
}

/* ...to an HTTP/2 stream: the changed head parsed (by the HTTP/1.1
 * parser's rules, as a server's) goes to the stream's writer as its
 * HEADERS (through the response rules, rs of the held head), its body,
 * framed by a content-length, into to. false when its head is not one
 * to relay (nothing went). */
static bool
http_scan_mod_h2(struct http_txn *t, struct evbuffer *to,
    const struct px_icap_result *res, const struct http_resp_ctx *rs)
{
	struct http_state *h = t->conn;
	static _Thread_local struct http_head m;
	struct evbuffer *b;
	const char *why;
	size_t n;
	char *p;
	bool ok = false;

	if ((b = evbuffer_new()) == NULL)
		return false;
	if (http_scan_mod_lines(b, res) &&
	    evbuffer_add_printf(b, "Content-Length: %zu\r\n\r\n",
	    evbuffer_get_length(res->mod_body)) > 0 &&
	    (n = evbuffer_get_length(b)) <= h->pol->lim.max_header_bytes &&
	    (p = (char *)evbuffer_pullup(b, (ssize_t)n)) != NULL &&
	    http_parse_head(p, n, false, &h->pol->lim, &m, &why) == 0 &&
	    m.status >= 200) {
		/* (HEADERS are nghttp2's copy once submitted) */
		http_client(t)->head(t, &m, rs, http_client_out(t));
		evbuffer_add_buffer(to, res->mod_body);
		ok = true;
	}
	evbuffer_free(b);
	return ok;
}

/* MODIFIED: the scanner changed the message. A response held whole (its
 * head not gone, its body all here) is replaced by the changed one;
 * anything else cannot be (the head, or a request's start, went
 * already): refused, as an infected one. true when relayed. */
bool
http_scan_modified(struct http_txn *t, enum px_dir dir,
    const struct px_icap_result *res)
{
	const struct px_scanner *scn = http_scanner(t);
	struct http_scan *sc = &t->scan[dir];
	const char *why = dir == PX_TO_SERVER ? "a request (its head went "
	    "to the server already)" : !sc->whole && sc->spool != NULL ?
	    "held in the spool, too big for a change to be relayed" :
	    !sc->whole ? "its head went to the client already" :
	    res->mod_head == NULL || !sc->ended ? "answered before the body's "
	    "end" : NULL;
	size_t before = evbuffer_get_length(sc->hold);

	if (why == NULL) {
		/* The held head's context (its extra lines are proxyd's for
		 * that response: not for this one). */
		struct http_resp_ctx rs = sc->kept != NULL ? sc->kept->rs :
		    (struct http_resp_ctx){ .client_keep = false };

		rs.extra = NULL;
		/* Replaced (counted as they were): the held head and body. */
		(void)http_scan_head_free(sc);
		evbuffer_drain(sc->hold, before);
		if (t->h2w != NULL ? !http_scan_mod_h2(t, sc->hold, res, &rs) :
		    !http_scan_mod_build(t, sc->hold, res))
			why = "its changed head is not an HTTP response";
	}
	if (why != NULL) {
		http_txn_log(t, LOG_NOTICE, "http-scan verdict=modified "
		    "relayed=no reason=\"%s\" scanner=%s direction=%s "
		    "size=%llu istag=\"%s\"", why, scn->name,
		    http_scan_dir_name(dir), (unsigned long long)sc->size,
		    res->istag);
		return false;
	}
	http_txn_log(t, LOG_NOTICE, "http-scan verdict=modified "
	    "relayed=yes scanner=%s direction=%s size=%llu bytes=%zu "
	    "istag=\"%s\"", scn->name, http_scan_dir_name(dir),
	    (unsigned long long)sc->size, evbuffer_get_length(sc->hold),
	    res->istag);
	http_scan_count(t, dir, "modified");
	http_scan_pass(t, dir);
	return true;
}
