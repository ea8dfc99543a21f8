/* FTP control-channel parsing: pure functions over (ptr, len), no
 * allocation, no global state. Used by the ftp analyser, its unit tests
 * and its fuzz target.
 *
 * Line functions return one of enum ftp_rc; address functions return 0 or
 * -1. Nothing here reads past len or needs a NUL terminator. */
#ifndef FTP_PROTO_H
#define FTP_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define FTP_LINE_MAX	4096	/* hard cap for limits/@max-line */
#define FTP_VERB_MAX	8	/* RFC verbs are 3-4 letters */

enum ftp_rc {
	FTP_OK = 0,	/* one line taken; *used bytes consumed */
	FTP_MORE,	/* no line end yet and still under the limit */
	FTP_TOO_LONG,	/* line longer than max_line */
	FTP_BAD,	/* NUL, bare CR, bad Telnet sequence or syntax */
};

struct ftp_cmd {
	char	verb[FTP_VERB_MAX + 1];		/* upper case, NUL-terminated */
	char	arg[FTP_LINE_MAX + 1];		/* NUL-terminated, no CRLF */
	size_t	arglen;
	bool	has_arg;			/* "VERB SP arg" (arg may be "") */
};

/* One command line from buf. Telnet IAC sequences (IP, DM, NOP, AYT...,
 * and WILL/WONT/DO/DONT option negotiation) are stripped, and so is an IAC
 * followed by a data byte (a synch whose DM went as urgent data); IAC IAC
 * (a literal 0xff) and IAC SB are FTP_BAD.
 * The line ends at LF, optionally preceded by CR; max_line counts the raw
 * bytes including the line end. The verb is 1..FTP_VERB_MAX ASCII letters
 * and digits, a letter first (XSHA256), followed by the line end or by one
 * SP and the argument. */
enum ftp_rc ftp_cmd_parse(const unsigned char *buf, size_t len,
	    size_t max_line, struct ftp_cmd *cmd, size_t *used);

/* One reply line: *linelen is its length without CR LF (the caller copies
 * or forwards buf[0..*used)). NUL and bare CR are FTP_BAD. */
enum ftp_rc ftp_line_get(const unsigned char *buf, size_t len,
	    size_t max_line, size_t *linelen, size_t *used);

/* Multi-line reply tracking (RFC 959 4.2): "123-text" opens, "123 text"
 * with the same code closes; lines in between are free text. */
struct ftp_reply_state {
	int	code;		/* of the reply under way, 0 if none */
	bool	multi;
};

/* Feeds one reply line (without CR LF). Returns 1 when it ends a reply
 * (*code: its code), 0 when more lines follow, -1 if it is no valid
 * reply line (a first line without a 3-digit code 100..599 followed by
 * SP, '-' or the line end). */
int	ftp_reply_feed(struct ftp_reply_state *st, const char *line,
	    size_t len, int *code);

/* PORT h1,h2,h3,h4,p1,p2 -> AF_INET sockaddr. Each number 0..255, no
 * signs or spaces; port 0 refused. */
int	ftp_parse_port(const char *s, size_t len, struct sockaddr_storage *ss);
/* EPRT |1|1.2.3.4|port| or |2|::1|port| (any delimiter 33..126). */
int	ftp_parse_eprt(const char *s, size_t len, struct sockaddr_storage *ss);
/* The text of a 227 reply: the first run "h1,h2,h3,h4,p1,p2" in it. */
int	ftp_parse_227(const char *s, size_t len, struct sockaddr_storage *ss);
/* The text of a 229 reply: "(|||port|)" (any delimiter). */
int	ftp_parse_229(const char *s, size_t len, uint16_t *port);

/* Formatters: write a NUL-terminated string, return its length or -1 if
 * it does not fit or the family is wrong. */
int	ftp_fmt_port(const struct sockaddr *sa, char *buf, size_t size);
int	ftp_fmt_eprt(const struct sockaddr *sa, char *buf, size_t size);
/* Full reply lines with CR LF. */
int	ftp_fmt_227(const struct sockaddr *sa, char *buf, size_t size);
int	ftp_fmt_229(uint16_t port, char *buf, size_t size);

#endif
