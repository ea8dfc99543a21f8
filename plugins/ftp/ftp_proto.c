/* FTP control-channel parsing (ftp_proto.h). */
#include "ftp_proto.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#define FTP_IAC		255
#define FTP_SB		250
#define FTP_DM		242	/* Data Mark: the end of a synch */
#define FTP_WILL	251	/* WILL WONT DO DONT: 251..254 + option */

static bool
ftp_is_alpha(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* A verb's byte at position v: a letter, then letters or digits (XSHA1,
 * XSHA256: real commands, and words FEAT may offer, ftp_feat_keep). */
static bool
ftp_is_verb_byte(unsigned char c, size_t v)
{
	return ftp_is_alpha(c) || (v > 0 && c >= '0' && c <= '9');
}

enum ftp_rc
ftp_cmd_parse(const unsigned char *buf, size_t len, size_t max_line,
    struct ftp_cmd *cmd, size_t *used)
{
	/* The stripped line goes to arg first, then is split. */
	char *out = cmd->arg;
	size_t i, o = 0, v, limit = max_line;
	bool telnet = false;	/* a Telnet sequence came before */

	if (limit > FTP_LINE_MAX)
		limit = FTP_LINE_MAX;
	for (i = 0; ; i++) {
		unsigned char c;

		if (i >= limit)
			return FTP_TOO_LONG;
		if (i >= len)
			return FTP_MORE;
		c = buf[i];
		if (c == '\n')
			break;
		if (c == '\0')
			return FTP_BAD;
		if (c == '\r') {
			if (i + 1 >= len)
				return i + 1 >= limit ? FTP_TOO_LONG : FTP_MORE;
			if (buf[i + 1] != '\n')
				return FTP_BAD;
			continue;
		}
		if (c == FTP_IAC) {
			if (i + 1 >= len)
				return i + 1 >= limit ? FTP_TOO_LONG : FTP_MORE;
			c = buf[i + 1];
			if (c == FTP_IAC || c == FTP_SB)
				return FTP_BAD;
			if (c >= FTP_WILL) {
				if (i + 2 >= len)
					return i + 2 >= limit ? FTP_TOO_LONG :
					    FTP_MORE;
				i += 2;
			} else if (c >= 240)
				i += 1;
			/* else IAC + data byte: the DM of a Telnet "synch"
			 * sent as urgent data (lftp's ABOR) was taken out of
			 * the stream by TCP; drop the lone IAC. */
			telnet = true;
			continue;
		}
		if (c == FTP_DM && o == 0 && telnet)
			/* The synch's IAC went as urgent data instead (BSD
			 * ftp's and Python ftplib's ABOR: IAC IP IAC with
			 * MSG_OOB, then DM): its DM is left alone. */
			continue;
		out[o++] = (char)c;
	}
	*used = i + 1;
	out[o] = '\0';
	/* Split "VERB[ arg]" in place. */
	for (v = 0; v < o && ftp_is_verb_byte((unsigned char)out[v], v); v++)
		if (v >= FTP_VERB_MAX)
			return FTP_BAD;
	if (v == 0 || (v < o && out[v] != ' '))
		return FTP_BAD;
	for (i = 0; i < v; i++)
		cmd->verb[i] = ftp_is_alpha((unsigned char)out[i]) ?
		    (char)(out[i] & ~0x20) : out[i];
	cmd->verb[v] = '\0';
	if (v < o) {
		cmd->has_arg = true;
		cmd->arglen = o - v - 1;
		memmove(out, out + v + 1, cmd->arglen);
	} else {
		cmd->has_arg = false;
		cmd->arglen = 0;
	}
	out[cmd->arglen] = '\0';
	/* A line made of bytes no client sends (control characters) is an
	 * attack on whatever logs or parses it next. */
	for (i = 0; i < cmd->arglen; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			return FTP_BAD;
	return FTP_OK;
}

enum ftp_rc
ftp_line_get(const unsigned char *buf, size_t len, size_t max_line,
    size_t *linelen, size_t *used)
{
	size_t i, limit = max_line;

	if (limit > FTP_LINE_MAX)
		limit = FTP_LINE_MAX;
	for (i = 0; ; i++) {
		if (i >= limit)
			return FTP_TOO_LONG;
		if (i >= len)
			return FTP_MORE;
		if (buf[i] == '\n')
			break;
		if (buf[i] == '\0')
			return FTP_BAD;
		if (buf[i] == '\r') {
			if (i + 1 >= len)
				return i + 1 >= limit ? FTP_TOO_LONG : FTP_MORE;
			if (buf[i + 1] != '\n')
				return FTP_BAD;
		}
	}
	*used = i + 1;
	*linelen = i > 0 && buf[i - 1] == '\r' ? i - 1 : i;
	return FTP_OK;
}

static int
ftp_line_code(const char *line, size_t len, char *sep)
{
	int code;

	if (len < 3 || line[0] < '1' || line[0] > '5' ||
	    line[1] < '0' || line[1] > '9' || line[2] < '0' || line[2] > '9')
		return -1;
	code = (line[0] - '0') * 100 + (line[1] - '0') * 10 + (line[2] - '0');
	*sep = len == 3 ? ' ' : line[3];
	return code;
}

int
ftp_reply_feed(struct ftp_reply_state *st, const char *line, size_t len,
    int *code)
{
	char sep = 0;
	int c = ftp_line_code(line, len, &sep);

	if (st->multi) {
		/* Only "<same code> " ends it; anything else is text. */
		if (c == st->code && sep == ' ') {
			*code = c;
			st->multi = false;
			st->code = 0;
			return 1;
		}
		return 0;
	}
	if (c == -1 || (sep != ' ' && sep != '-'))
		return -1;
	if (sep == '-') {
		st->code = c;
		st->multi = true;
		return 0;
	}
	*code = c;
	st->code = 0;
	return 1;
}

/* n comma-separated decimal numbers 0..255 from s[*pos..len). */
static int
ftp_parse_bytes(const char *s, size_t len, size_t *pos, unsigned n,
    unsigned *out)
{
	size_t i = *pos;
	unsigned k;

	for (k = 0; k < n; k++) {
		unsigned v = 0, digits = 0;

		if (k > 0) {
			if (i >= len || s[i] != ',')
				return -1;
			i++;
		}
		while (i < len && s[i] >= '0' && s[i] <= '9') {
			v = v * 10 + (unsigned)(s[i] - '0');
			if (++digits > 3 || v > 255)
				return -1;
			i++;
		}
		if (digits == 0)
			return -1;
		out[k] = v;
	}
	*pos = i;
	return 0;
}

static void
ftp_sin(struct sockaddr_storage *ss, const unsigned *b)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	    (uint32_t)b[2] << 8 | (uint32_t)b[3]);
	sin->sin_port = htons((uint16_t)(b[4] << 8 | b[5]));
}

int
ftp_parse_port(const char *s, size_t len, struct sockaddr_storage *ss)
{
	unsigned b[6];
	size_t pos = 0;

	if (ftp_parse_bytes(s, len, &pos, 6, b) == -1 || pos != len ||
	    (b[4] == 0 && b[5] == 0))
		return -1;
	ftp_sin(ss, b);
	return 0;
}

int
ftp_parse_227(const char *s, size_t len, struct sockaddr_storage *ss)
{
	unsigned b[6];
	size_t i, pos;

	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			continue;
		pos = i;
		if (ftp_parse_bytes(s, len, &pos, 6, b) == 0 &&
		    (b[4] != 0 || b[5] != 0)) {
			ftp_sin(ss, b);
			return 0;
		}
		/* Skip this run of digits. */
		while (i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '9')
			i++;
	}
	return -1;
}

static int
ftp_parse_port_dec(const char *s, size_t len, uint16_t *port)
{
	uint32_t v = 0;
	size_t i;

	if (len == 0 || len > 5)
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint32_t)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

int
ftp_parse_eprt(const char *s, size_t len, struct sockaddr_storage *ss)
{
	char d, host[INET6_ADDRSTRLEN];
	const char *f[3];
	size_t fl[3], i, k, start;
	uint16_t port;

	if (len < 2 || (unsigned char)s[0] < 33 || (unsigned char)s[0] > 126)
		return -1;
	d = s[0];
	if (s[len - 1] != d)
		return -1;
	start = 1;
	for (k = 0, i = 1; i < len - 1; i++)
		if (s[i] == d) {
			if (k >= 2)
				return -1;
			f[k] = s + start;
			fl[k++] = i - start;
			start = i + 1;
		}
	if (k != 2)
		return -1;
	f[2] = s + start;
	fl[2] = len - 1 - start;
	if (fl[1] == 0 || fl[1] >= sizeof(host) ||
	    ftp_parse_port_dec(f[2], fl[2], &port) == -1)
		return -1;
	memcpy(host, f[1], fl[1]);
	host[fl[1]] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (fl[0] == 1 && f[0][0] == '1') {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
			return -1;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		return 0;
	}
	if (fl[0] == 1 && f[0][0] == '2') {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			return -1;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		return 0;
	}
	return -1;
}

int
ftp_parse_229(const char *s, size_t len, uint16_t *port)
{
	size_t i, j;
	char d;

	/* "(" d d d port d ")" */
	for (i = 0; i < len; i++) {
		if (s[i] != '(' || i + 5 >= len)
			continue;
		d = s[i + 1];
		if ((unsigned char)d < 33 || (unsigned char)d > 126 ||
		    s[i + 2] != d || s[i + 3] != d)
			continue;
		for (j = i + 4; j < len && s[j] != d; j++)
			;
		if (j + 1 >= len || s[j + 1] != ')')
			continue;
		if (ftp_parse_port_dec(s + i + 4, j - (i + 4), port) == 0)
			return 0;
	}
	return -1;
}

static int
ftp_fmt_done(int n, size_t size)
{
	return n < 0 || (size_t)n >= size ? -1 : n;
}

int
ftp_fmt_port(const struct sockaddr *sa, char *buf, size_t size)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
	uint32_t a;
	uint16_t p;

	if (sa->sa_family != AF_INET)
		return -1;
	a = ntohl(sin->sin_addr.s_addr);
	p = ntohs(sin->sin_port);
	return ftp_fmt_done(snprintf(buf, size, "%u,%u,%u,%u,%u,%u",
	    a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255, p >> 8,
	    p & 255), size);
}

int
ftp_fmt_eprt(const struct sockaddr *sa, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		return ftp_fmt_done(snprintf(buf, size, "|1|%s|%u|", host,
		    ntohs(sin->sin_port)), size);
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		return ftp_fmt_done(snprintf(buf, size, "|2|%s|%u|", host,
		    ntohs(sin6->sin6_port)), size);
	}
	return -1;
}

int
ftp_fmt_227(const struct sockaddr *sa, char *buf, size_t size)
{
	char hp[32];

	if (ftp_fmt_port(sa, hp, sizeof(hp)) == -1)
		return -1;
	return ftp_fmt_done(snprintf(buf, size,
	    "227 Entering Passive Mode (%s).\r\n", hp), size);
}

int
ftp_fmt_229(uint16_t port, char *buf, size_t size)
{
	if (port == 0)
		return -1;
	return ftp_fmt_done(snprintf(buf, size,
	    "229 Entering Extended Passive Mode (|||%u|)\r\n", port), size);
}
