/* HTTP/1.x message framing: a strict head parser and a chunked-body
 * parser, pure functions over (ptr, len) so they can be fuzzed and unit
 * tested without sockets. Strict means: whatever two parsers could read two
 * ways (the stuff of request smuggling) is an error, never a guess. */
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
 * pointers into buf. */
int	http_parse_head(const char *buf, size_t head_len, bool request,
	    const struct http_limits *lim, struct http_head *h,
	    const char **why);

/* Case-insensitive token compare. */
bool	http_token_eq(const char *a, size_t alen, const char *b);
/* Whether the comma list in (v, len) holds the token t. */
bool	http_list_has(const char *v, size_t len, const char *t);
bool	http_is_tchar(unsigned char c);

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

struct http_chunk {
	enum http_chunk_state state;
	uint64_t	size;		/* of the chunk being read */
	uint64_t	left;		/* data bytes left in it */
	unsigned	digits;
	size_t		line;		/* length of the current framing line */
	size_t		trailer_bytes;
	uint64_t	body;		/* data bytes so far */
	bool		name_seen;	/* trailer: a name char before ':' */
	bool		colon;
};

/* Feeds chunked-body bytes. Returns how many it consumed (all of them
 * belong to the body and are forwarded as they are): at most up to the
 * end of the body, which sets c->state to HTTP_CHUNK_DONE. -1 on a framing
 * error (*why). Data bytes are only counted, never looked at. */
ssize_t	http_chunk_feed(struct http_chunk *c, const char *p, size_t len,
	    const struct http_limits *lim, const char **why);

#endif
