/* libFuzzer target for the FTP control-channel parsers (ftp_proto.c): the
 * input is cut into command lines and into reply lines as the analyser
 * does, and every argument goes through the address parsers. Parsed
 * addresses must survive a format/parse round trip. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>

#include "ftp/ftp_proto.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ftp_cmd cmd;

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
	}
	return 0;
}
