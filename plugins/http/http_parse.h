/* HTTP/1.x message framing: a strict head parser (whose rules also judge
 * a head that comes as fields, an HTTP/2 request's) and a chunked-body
 * parser (http_parse.c), and the request target as the url rules judge
 * it (http_target.c); pure functions over (ptr, len) so they can be
 * fuzzed and unit tested without sockets. Strict means: whatever two
 * parsers could read two ways (the stuff of request smuggling) is an
 * error, never a guess. */
#ifndef HTTP_PARSE_H
#define HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HTTP_MAX_HEADERS	256	/* hard cap above limits/@max-header-lines */

struct http_limits {
	size_t	max_line;		/* request/status line and each header line */
	size_t	max_header_lines;
	size_t	max_header_bytes;	/* whole head */
	size_t	max_url;
};

struct http_hdr {
	const char	*name;
	size_t		 nlen;
	const char	*val;		/* OWS trimmed */
	size_t		 vlen;
	unsigned char	 id;		/* http_field_id(): enum http_field */
};

struct http_head {
	bool		 request;
	/* request line */
	const char	*method;
	size_t		 mlen;
	const char	*target;
	size_t		 tlen;
	/* status line */
	int		 status;
	const char	*reason;
	size_t		 rlen;
	int		 minor;		/* HTTP/1.minor */
	unsigned	 nhdr;
	size_t		 head_len;	/* through the empty line */
	/* What the framing headers say. */
	int64_t		 content_length;	/* -1: none */
	bool		 chunked;	/* Transfer-Encoding ends in chunked */
	bool		 has_te;
	bool		 te_other;	/* a coding other than chunked */
	bool		 underscore;	/* a field name with '_' */
	bool		 empty_line;	/* a CRLF before the request line */
	bool		 conn_close;
	bool		 conn_keep_alive;
	bool		 conn_upgrade;
	int		 host;		/* index of Host, -1 if none */
	int		 upgrade;	/* index of Upgrade, -1 if none */
	bool		 expect_continue;
	/* Last: http_parse_head() clears everything before it. */
	struct http_hdr	 hdr[HTTP_MAX_HEADERS];
};

/* Finds the end of a head in buf: returns its length (through CRLF CRLF),
 * 0 if it is not complete yet (*scanned says how far there is nothing to
 * look at again), or -1 when the head can only be over max bytes. */
ssize_t	http_head_end(const char *buf, size_t len, size_t max, size_t *scanned);

/* Parses a complete head of head_len bytes. 0 on success; otherwise the
 * HTTP status to answer with (400, 414, 431, 501, 505; for a response the
 * caller answers 502) and *why says what was wrong. The head keeps
 * pointers into buf. One empty line (CRLF) before a request line is
 * skipped (RFC 9112 2.2); a second one is refused. A field whose name,
 * read with '_' as '-', is a framing or hop-by-hop field (Content_Length,
 * Transfer_Encoding, Keep_Alive, Proxy_*, ...) is refused: some servers
 * and CGI stacks take one for the other. */
int	http_parse_head(const char *buf, size_t head_len, bool request,
	    const struct http_limits *lim, struct http_head *h,
	    const char **why);

/* A head that comes as fields, not lines (an HTTP/2 request's, from its
 * HEADERS): judged by the same rules as a parsed one, piece by piece.
 * http_head_start empties h for a request or a response; then
 * http_head_request_target sets its method and target (as a request
 * line's, HTTP/1.1: 400 for a method that is no token or a target with a
 * byte a request line could not carry, 414 over max_url),
 * http_head_add_field adds each field (as a field line's: its name's
 * bytes, its value's, OWS trimmed, framing fields and duplicates; 431
 * past HTTP_MAX_HEADERS) and http_head_check makes the checks of the
 * whole head (framing, Host). Each returns 0 or the status (*why). The
 * head points at the caller's bytes; the limits on lines and bytes are
 * the caller's to count (as the head's HTTP/1.1 text would have them). */
void	http_head_start(struct http_head *h, bool request);
int	http_head_request_target(struct http_head *h, const char *method,
	    size_t mlen, const char *target, size_t tlen,
	    const struct http_limits *lim, const char **why);
int	http_head_add_field(struct http_head *h, const char *name,
	    size_t nlen, const char *val, size_t vlen, const char **why);
int	http_head_check(const struct http_head *h, const char **why);

/* Where http_head_judge() is in a head still arriving; all zero before
 * its first byte (and again for the next head). */
struct http_head_scan {
	size_t		off;		/* start of the first line not judged */
	size_t		seen;		/* bytes from off looked at: no LF */
	unsigned	line_no;	/* lines judged (as http_parse_head) */
	unsigned	nhdr;		/* what they said, for the duplicates */
	bool		cl_seen;
	bool		host_seen;
	bool		chunked;
	bool		done;		/* the empty line that ends it came */
};

/* A head that is not complete yet (http_head_end() returned 0, or -1: it
 * is over max_header_bytes), judged line by line as its lines arrive:
 * buf holds its first len bytes, st what earlier calls judged (each byte
 * is looked at once, however the head is cut into reads). 0 while it may
 * still be good; else the status and *why http_parse_head() gives the
 * complete head, whatever comes after (for a response the caller answers
 * 502). The line still arriving is refused when it is over max_line
 * already (414 for the request line, 431 for a header line) or, as a
 * status line, does not start with "HTTP/". Only the checks of the whole
 * head (framing, Host) wait for its end. */
int	http_head_judge(const char *buf, size_t len, bool request,
	    const struct http_limits *lim, struct http_head_scan *st,
	    const char **why);

/* Whether the field name (name, len), read case-insensitively and with
 * '_' as '-', is one a head must not carry twice over: a framing or
 * hop-by-hop field (Content-Length, Transfer-Encoding, Connection,
 * Keep-Alive, TE, Trailer, Upgrade, Host, Proxy-*). */
bool	http_name_is_framing(const char *name, size_t len);

/* The trailer section of a chunked body (RFC 9112 7.1.2), from the byte
 * after the last chunk's CRLF: zero or more fields, each parsed as a
 * header field is (the same grammar, max_line, max_header_lines), then
 * an empty line; max_header_bytes bounds the whole section. Returns its
 * length once complete and good (t->hdr and t->nhdr hold the fields),
 * 0 while it is not complete and still within the limits, -1 when it is
 * malformed or over a limit (*why). */
ssize_t	http_parse_trailers(const char *buf, size_t len,
	    const struct http_limits *lim, struct http_head *t,
	    const char **why);

/* The field names the parser and the head writers act on, told apart by
 * http_field_id() once per field rather than by a string compare per
 * question asked of it. */
enum http_field {
	HTTP_F_OTHER = 0,
	HTTP_F_CONTENT_LENGTH,
	HTTP_F_TRANSFER_ENCODING,
	HTTP_F_CONNECTION,
	HTTP_F_KEEP_ALIVE,
	HTTP_F_PROXY_CONNECTION,
	HTTP_F_TE,
	HTTP_F_TRAILER,
	HTTP_F_UPGRADE,
	HTTP_F_HOST,
	HTTP_F_EXPECT,
	HTTP_F_X_FORWARDED_FOR,
	HTTP_F_CONTENT_ENCODING,
	HTTP_F_CONTENT_TYPE,
	HTTP_F_CONTENT_RANGE,
	HTTP_F_AUTHORIZATION,
	HTTP_F_COOKIE,
	HTTP_F_SET_COOKIE,
	HTTP_F_RANGE,
	HTTP_F_IF_RANGE,
	HTTP_F_PROXY_OTHER,	/* "proxy-" and more, but Proxy-Connection */
};

/* Which of those the name (name, len) is, read case-insensitively ('_'
 * is not '-' here); HTTP_F_OTHER for any other name. */
enum http_field http_field_id(const char *name, size_t len);

/* Case-insensitive token compare. */
bool	http_token_eq(const char *a, size_t alen, const char *b);
/* Field f is named name (in lower case; id is its http_field_id()): told
 * by the id alone when the id stands for that one name, else compared. */
bool	http_field_is(const struct http_hdr *f, enum http_field id,
	    const char *name);
/* Whether the comma list in (v, len) holds the token t. */
bool	http_list_has(const char *v, size_t len, const char *t);
/* The next element of a comma-separated field value from *i on, split as
 * RFC 9110 §5.6.1 says: SP and HTAB trimmed, empty elements skipped. False
 * when none is left; else v[*s .. *e) and *i past it. */
static inline bool
http_list_next(const char *v, size_t len, size_t *i, size_t *s, size_t *e)
{
	for (;;) {
		while (*i < len && (v[*i] == ' ' || v[*i] == '\t' ||
		    v[*i] == ','))
			(*i)++;
		if (*i == len)
			return false;
		*s = *i;
		while (*i < len && v[*i] != ',')
			(*i)++;
		*e = *i;
		while (*e > *s && (v[*e - 1] == ' ' || v[*e - 1] == '\t'))
			(*e)--;
		if (*e != *s)
			return true;
	}
}
bool	http_is_tchar(unsigned char c);
/* The next coding's name in a Transfer-Encoding value from *i on: the
 * token an element of the list starts with (its parameters left out), as
 * http_list_next gives it; v[*s .. *e), or false when none is left. */
static inline bool
http_coding_next(const char *v, size_t len, size_t *i, size_t *s, size_t *e)
{
	size_t k;

	while (http_list_next(v, len, i, s, e)) {
		for (k = *s; k < *e && http_is_tchar((unsigned char)v[k]); k++)
			;
		if (k > *s) {
			*e = k;
			return true;
		}
	}
	return false;
}

/* A request target made canonical by http_target_canon(). */
struct http_target {
	const char	*path;		/* NUL-terminated, in the caller's buf */
	size_t		 plen;
	const char	*query;		/* as sent, NUL-terminated, in buf;
					 * NULL: the target has no '?' */
	const char	*sent_query;	/* as the client sent it (in the
					 * target, after '?'); NULL: none */
	size_t		 sent_qlen;
};

/* The origin-form request target t ("/path?query"; "?query" alone, left of
 * an absolute-form target without a path, has the path "/"; "*") as the
 * url rules judge it and the server is sent it (docs/CONFIG.md, "How url
 * rules read a path"): in the path, each percent-encoding of an
 * unreserved character (RFC 3986 2.3) decoded, the others in upper-case
 * hex; with merge_slashes, empty segments gone ("//" as "/"); the dot
 * segments "." and ".." (encoded ones too) removed (RFC 3986 5.2.4). The
 * query keeps its bytes (o->query, a NUL-terminated copy, which
 * http_query_decode() reads). Refused with 400 and *why, as what cannot be
 * judged as every server would read it: a fragment ('#' anywhere), in the
 * path an encoded '/' (%2F), a '\' (raw or %5C), %00, an invalid
 * percent-encoding, a ".." above the root, a segment whose part before
 * its first ';' is "." or ".." ("..;x": a dot-segment to servers that
 * take ";params" off first), and a target not in origin form. buf (size bytes, at least tlen + 3) receives
 * the canonical path and judged query that o points to. 0 on success. */
int	http_target_canon(const char *t, size_t tlen, bool merge_slashes,
	    char *buf, size_t size, struct http_target *o, const char **why);
/* RFC 3986 2.3 unreserved: ALPHA, DIGIT, '-', '.', '_', '~'. */
bool	http_is_unreserved(unsigned char c);
/* s[0..len) written to out with each valid percent-encoding as
 * http_target_canon() writes it in a path (unreserved characters
 * decoded, the others in upper-case hex) and every other byte as it is;
 * out may be s (it never runs ahead). Returns the length written (at
 * most len; no NUL added). */
size_t	http_pct_canon_str(const char *s, size_t len, char *out);
/* The query q[0..len) as applications read it: every %XX decoded, '+' as
 * a space (application/x-www-form-urlencoded), into out (len + 1 bytes,
 * NUL-terminated; may be q), *olen its length. 0, or 400 and *why for an
 * invalid percent-encoding or a NUL (what could not be judged as the
 * application reads it). */
int	http_query_decode(const char *q, size_t len, char *out, size_t *olen,
	    const char **why);

enum http_chunk_state {
	HTTP_CHUNK_SIZE = 0,	/* hex digits */
	HTTP_CHUNK_EXT,		/* after ';': an extension name starts */
	HTTP_CHUNK_EXT_NAME,	/* in the name: '=', ';' or CR next */
	HTTP_CHUNK_EXT_VAL0,	/* after '=': a token or a quoted string */
	HTTP_CHUNK_EXT_TOKEN,
	HTTP_CHUNK_EXT_QUOTED,
	HTTP_CHUNK_EXT_QPAIR,	/* after a backslash in the quoted string */
	HTTP_CHUNK_EXT_QEND,	/* after the closing quote: ';' or CR */
	HTTP_CHUNK_SIZE_LF,
	HTTP_CHUNK_DATA,
	HTTP_CHUNK_DATA_CR,
	HTTP_CHUNK_DATA_LF,
	HTTP_CHUNK_TRAILER,	/* start of a trailer line (or the final CRLF) */
	HTTP_CHUNK_TRAILER_LINE,
	HTTP_CHUNK_TRAILER_LF,
	HTTP_CHUNK_FINAL_LF,
	HTTP_CHUNK_DONE,
};

/* Canonical framing written in step mode (one chunk-size line and the
 * CRLF before it). */
#define HTTP_CHUNK_OUT	24

struct http_chunk {
	enum http_chunk_state state;
	/* Step mode (set by the caller): each call consumes either data
	 * bytes only or framing bytes only, and stops where the data of a
	 * chunk starts and where the trailer section starts (state
	 * HTTP_CHUNK_TRAILER: the caller parses it with
	 * http_parse_trailers()). The framing consumed is not forwarded:
	 * out holds its canonical form ("%x\r\n" sizes without leading zeros
	 * or extensions, "\r\n" after data; the last chunk, "0\r\n", is
	 * the caller's to write once the trailer section is good). */
	bool		step;
	char		out[HTTP_CHUNK_OUT];
	size_t		outlen;		/* set by each call */
	uint64_t	size;		/* of the chunk being read */
	uint64_t	left;		/* data bytes left in it */
	unsigned	digits;
	size_t		line;		/* length of the current framing line */
	size_t		trailer_bytes;
	uint64_t	body;		/* data bytes so far */
	bool		name_seen;	/* trailer: a name char before ':' */
	bool		colon;
};

/* Feeds chunked-body bytes. Returns how many it consumed: at most up to
 * the end of the body, which sets c->state to HTTP_CHUNK_DONE (in step
 * mode, see above, less). -1 on a framing error (*why). Data bytes are
 * only counted, never looked at. A chunk size may have leading zeros;
 * a value of 2^60 or more is refused as an overflow (and any framing
 * line over max_line). */
ssize_t	http_chunk_feed(struct http_chunk *c, const char *p, size_t len,
	    const struct http_limits *lim, const char **why);

#endif
