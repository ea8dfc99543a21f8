/* libFuzzer target for the FTP control-channel parsers (ftp_proto.c): the
 * input is cut into command lines and into reply lines as the analyser
 * does, and every argument goes through the address parsers. Parsed
 * addresses must survive a format/parse round trip. Every argument and
 * reply also goes through the path canonicaliser (ftp_path.c), whose
 * output must be canonical and a fixed point. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>

#include "ftp/ftp_path.h"
#include "ftp/ftp_proto.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ftp_cmd cmd;
static struct ftp_path_state ps;

/* out: "/" or "/a/b" with no empty, "." or ".." component; resolving it
 * again gives itself. */
static void
ftp_fuzz_canonical(const char *out)
{
	char again[FTP_PATH_MAX];
	size_t n = strlen(out);

	if (out[0] != '/' || (n > 1 && out[n - 1] == '/') ||
	    strstr(out, "//") != NULL || strstr(out, "/./") != NULL ||
	    strstr(out, "/../") != NULL || (n >= 2 &&
	    strcmp(out + n - 2, "/.") == 0) || (n >= 3 &&
	    strcmp(out + n - 3, "/..") == 0))
		abort();
	if (ftp_path_resolve("/", out, n, false, again, sizeof(again)) !=
	    FTP_PATH_OK || strcmp(again, out) != 0)
		abort();
}

static void
ftp_fuzz_path(const char *s, size_t len, int code)
{
	char out[FTP_PATH_MAX];
	const char *verbs[] = { "CWD", "PWD", "CDUP", "PASS" };

	if (ftp_path_resolve(ps.lost ? "/" : ps.cwd, s, len, true, out,
	    sizeof(out)) == FTP_PATH_OK) {
		ftp_fuzz_canonical(out);
		ftp_path_cwd_sent(&ps, len % 3 == 0 ? out : NULL);
	}
	if (ftp_path_from_257(s, len, out, sizeof(out)) == FTP_PATH_OK)
		ftp_fuzz_canonical(out);
	ftp_path_reply(&ps, verbs[len % 4], code, s, len);
	ftp_fuzz_canonical(ps.cwd);
	ftp_fuzz_canonical(ps.home);
}

static void
ftp_fuzz_addr(const char *s, size_t len)
{
	struct sockaddr_storage ss, again;
	char buf[128];
	uint16_t port;
	int n;

	if (ftp_parse_port(s, len, &ss) == 0) {
		n = ftp_fmt_port((struct sockaddr *)&ss, buf, sizeof(buf));
		if (n < 0 || ftp_parse_port(buf, (size_t)n, &again) != 0 ||
		    memcmp(&ss, &again, sizeof(struct sockaddr_in)) != 0)
			abort();
	}
	if (ftp_parse_eprt(s, len, &ss) == 0) {
		n = ftp_fmt_eprt((struct sockaddr *)&ss, buf, sizeof(buf));
		if (n < 0 || ftp_parse_eprt(buf, (size_t)n, &again) != 0 ||
		    ss.ss_family != again.ss_family)
			abort();
	}
	if (ftp_parse_227(s, len, &ss) == 0 &&
	    ftp_fmt_227((struct sockaddr *)&ss, buf, sizeof(buf)) < 0)
		abort();
	if (ftp_parse_229(s, len, &port) == 0 &&
	    ftp_fmt_229(port, buf, sizeof(buf)) < 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ftp_reply_state st = { 0 };
	size_t off, used, len, max;
	int code;

	if (size == 0)
		return 0;
	ftp_path_reset(&ps);
	/* The first byte picks max-line, as a policy would. */
	max = 16 + (size_t)data[0] * 17;
	data++;
	size--;
	for (off = 0; off < size; off += used) {
		if (ftp_cmd_parse(data + off, size - off, max, &cmd, &used) !=
		    FTP_OK)
			break;
		if (used == 0 || used > size - off || cmd.arglen >= used ||
		    strlen(cmd.verb) == 0 || strlen(cmd.arg) != cmd.arglen)
			abort();
		ftp_fuzz_addr(cmd.arg, cmd.arglen);
		ftp_fuzz_path(cmd.arg, cmd.arglen, 250);
	}
	for (off = 0; off < size; off += used) {
		if (ftp_line_get(data + off, size - off, FTP_LINE_MAX, &len,
		    &used) != FTP_OK)
			break;
		if (used == 0 || len >= used || used > size - off)
			abort();
		if (ftp_reply_feed(&st, (const char *)data + off, len, &code) ==
		    1 && (code < 100 || code > 599))
			abort();
		if (len > 3)
			ftp_fuzz_addr((const char *)data + off + 3, len - 3);
		ftp_fuzz_path((const char *)data + off, len, len % 2 ? 257 :
		    550);
	}
	return 0;
}
