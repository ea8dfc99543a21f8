/* Unit tests for plugins/ftp/ftp_proto.c: command and reply lines, Telnet
 * sequences, limits, PORT/EPRT/227/229 both ways. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "ftp/ftp_proto.h"

static struct ftp_cmd cmd;	/* 4 kB: not on the cmocka stack */

static enum ftp_rc
parse(const char *s, size_t max, size_t *used)
{
	return ftp_cmd_parse((const unsigned char *)s, strlen(s), max, &cmd,
	    used);
}

static void
test_cmd_basic(void **state)
{
	size_t used;

	(void)state;
	assert_int_equal(parse("USER anonymous\r\nPASS x\r\n", 512, &used),
	    FTP_OK);
	assert_int_equal(used, 16);
	assert_string_equal(cmd.verb, "USER");
	assert_string_equal(cmd.arg, "anonymous");
	assert_true(cmd.has_arg);

	assert_int_equal(parse("pasv\r\n", 512, &used), FTP_OK);
	assert_string_equal(cmd.verb, "PASV");
	assert_false(cmd.has_arg);
	assert_int_equal(cmd.arglen, 0);

	/* bare LF is accepted as a line end */
	assert_int_equal(parse("NOOP\n", 512, &used), FTP_OK);
	assert_int_equal(used, 5);
	/* an argument keeps its inner spaces */
	assert_int_equal(parse("RETR my file.txt\r\n", 512, &used), FTP_OK);
	assert_string_equal(cmd.arg, "my file.txt");
	assert_int_equal(parse("CWD \r\n", 512, &used), FTP_OK);
	assert_true(cmd.has_arg);
	assert_int_equal(cmd.arglen, 0);
	/* digits after the first letter: XSHA256 is a command (refused
	 * with 500 unless the policy takes it), not a malformed line */
	assert_int_equal(parse("xsha256 f\r\n", 512, &used), FTP_OK);
	assert_string_equal(cmd.verb, "XSHA256");
	assert_string_equal(cmd.arg, "f");
}

static void
test_cmd_bad(void **state)
{
	size_t used;

	(void)state;
	assert_int_equal(parse("US\rER x\r\n", 512, &used), FTP_BAD);
	assert_int_equal(ftp_cmd_parse((const unsigned char *)"USER a\0b\r\n",
	    10, 512, &cmd, &used), FTP_BAD);
	assert_int_equal(parse("\r\n", 512, &used), FTP_BAD);
	assert_int_equal(parse(" USER\r\n", 512, &used), FTP_BAD);
	assert_int_equal(parse("3USR\r\n", 512, &used), FTP_BAD);
	assert_int_equal(parse("US-R\r\n", 512, &used), FTP_BAD);
	assert_int_equal(parse("ABCDEFGHI x\r\n", 512, &used), FTP_BAD);
	assert_int_equal(parse("USER\tx\r\n", 512, &used), FTP_BAD);
	assert_int_equal(parse("USER a\x1b[2Jb\r\n", 512, &used), FTP_BAD);
	/* incomplete, and a CR waiting for its LF */
	assert_int_equal(parse("USER ano", 512, &used), FTP_MORE);
	assert_int_equal(parse("USER ano\r", 512, &used), FTP_MORE);
}

static void
test_cmd_limit(void **state)
{
	char line[600];
	size_t used;

	(void)state;
	memset(line, 'a', sizeof(line));
	memcpy(line, "RETR ", 5);
	/* exactly max_line with CRLF: accepted */
	memcpy(line + 510, "\r\n", 3);
	assert_int_equal(parse(line, 512, &used), FTP_OK);
	assert_int_equal(used, 512);
	assert_int_equal(parse(line, 511, &used), FTP_TOO_LONG);
	/* no line end yet but over the limit: too long, not more */
	line[510] = 'a';
	line[511] = 'a';
	line[512] = '\0';
	assert_int_equal(parse(line, 512, &used), FTP_TOO_LONG);
	assert_int_equal(parse(line, 4096, &used), FTP_MORE);
	/* the cap holds whatever max_line says */
	{
		char *big = malloc(FTP_LINE_MAX + 10);

		assert_non_null(big);
		memset(big, 'a', FTP_LINE_MAX + 9);
		memcpy(big, "RETR ", 5);
		big[FTP_LINE_MAX + 9] = '\0';
		assert_int_equal(parse(big, (size_t)-1, &used), FTP_TOO_LONG);
		free(big);
	}
}

static void
test_cmd_telnet(void **state)
{
	size_t used;

	(void)state;
	/* ABOR as clients send it: IAC IP, IAC DM, then the command */
	assert_int_equal(parse("\xff\xf4\xff\xf2" "ABOR\r\n", 512, &used), FTP_OK);
	assert_string_equal(cmd.verb, "ABOR");
	assert_int_equal(used, 10);
	/* option negotiation is dropped */
	assert_int_equal(parse("\xff\xfd\x01NOOP\r\n", 512, &used), FTP_OK);
	assert_string_equal(cmd.verb, "NOOP");
	/* IAC IAC and IAC SB are refused */
	assert_int_equal(parse("RETR a\xff\xff" "b\r\n", 512, &used), FTP_BAD);
	assert_int_equal(parse("\xff\xfa\x18\x01\xff\xf0NOOP\r\n", 512, &used),
	    FTP_BAD);
	/* lftp's synch: IAC IP IAC, the DM went as urgent data */
	assert_int_equal(parse("\xff\xf4\xff" "ABOR\r\n", 512, &used), FTP_OK);
	assert_string_equal(cmd.verb, "ABOR");
	assert_int_equal(used, 9);
	/* BSD ftp's and ftplib's: IAC IP IAC as urgent data, then DM; TCP
	 * took the urgent IAC out: IAC IP, DM, ABOR */
	assert_int_equal(parse("\xff\xf4\xf2" "ABOR\r\n", 512, &used), FTP_OK);
	assert_string_equal(cmd.verb, "ABOR");
	assert_int_equal(used, 9);
	/* a DM with no Telnet command before it is no part of a synch */
	assert_int_equal(parse("\xf2" "ABOR\r\n", 512, &used), FTP_BAD);
	/* nor one inside a line: a byte of the argument, as before */
	assert_int_equal(parse("RETR \xff\xf4\xf2" "a\r\n", 512, &used), FTP_OK);
	assert_string_equal(cmd.arg, "\xf2" "a");
	/* a sequence cut by the end of the buffer waits for more */
	assert_int_equal(parse("\xff", 512, &used), FTP_MORE);
	assert_int_equal(parse("\xff\xfd", 512, &used), FTP_MORE);
}

/* Every split of a valid stream gives MORE then the same line. */
static void
test_cmd_splits(void **state)
{
	const char *s = "\xff\xf4\xff\xf2" "STOR dir/f.bin\r\n";
	size_t n = strlen(s), k, used;

	(void)state;
	for (k = 0; k < n; k++) {
		assert_int_equal(ftp_cmd_parse((const unsigned char *)s, k, 512,
		    &cmd, &used), FTP_MORE);
	}
	assert_int_equal(ftp_cmd_parse((const unsigned char *)s, n, 512, &cmd,
	    &used), FTP_OK);
	assert_int_equal(used, n);
	assert_string_equal(cmd.arg, "dir/f.bin");
}

static void
test_reply_lines(void **state)
{
	const char *r = "230-Welcome\r\n 230 not the end\r\n230-still\r\n"
	    "230 Login ok\r\n";
	struct ftp_reply_state st = { 0 };
	size_t off = 0, len, used, n = strlen(r);
	int code = 0, ends = 0, rc, lines = 0;

	(void)state;
	while (off < n) {
		assert_int_equal(ftp_line_get((const unsigned char *)r + off,
		    n - off, 512, &len, &used), FTP_OK);
		rc = ftp_reply_feed(&st, r + off, len, &code);
		assert_int_not_equal(rc, -1);
		ends += rc;
		lines++;
		off += used;
	}
	assert_int_equal(lines, 4);
	assert_int_equal(ends, 1);
	assert_int_equal(code, 230);

	memset(&st, 0, sizeof(st));
	assert_int_equal(ftp_reply_feed(&st, "200 ok", 6, &code), 1);
	assert_int_equal(code, 200);
	assert_int_equal(ftp_reply_feed(&st, "220", 3, &code), 1);
	assert_int_equal(ftp_reply_feed(&st, "hello", 5, &code), -1);
	assert_int_equal(ftp_reply_feed(&st, "600 x", 5, &code), -1);
	assert_int_equal(ftp_reply_feed(&st, "20 x", 4, &code), -1);
	assert_int_equal(ftp_reply_feed(&st, "200x", 4, &code), -1);
	assert_int_equal(ftp_line_get((const unsigned char *)"220 a\rb\r\n", 9,
	    512, &len, &used), FTP_BAD);
	assert_int_equal(ftp_line_get((const unsigned char *)"220 a\0\r\n", 8,
	    512, &len, &used), FTP_BAD);
	assert_int_equal(ftp_line_get((const unsigned char *)"220 abc", 7,
	    5, &len, &used), FTP_TOO_LONG);
}

static void
test_port(void **state)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	char buf[128];

	(void)state;
	assert_int_equal(ftp_parse_port("127,0,0,1,4,1", 13, &ss), 0);
	assert_int_equal(sin->sin_family, AF_INET);
	assert_int_equal(ntohl(sin->sin_addr.s_addr), 0x7f000001);
	assert_int_equal(ntohs(sin->sin_port), 1025);
	assert_int_equal(ftp_fmt_port((struct sockaddr *)&ss, buf, sizeof(buf)),
	    13);
	assert_string_equal(buf, "127,0,0,1,4,1");
	assert_int_equal(ftp_parse_port("127,0,0,1,4", 11, &ss), -1);
	assert_int_equal(ftp_parse_port("127,0,0,1,4,1,", 14, &ss), -1);
	assert_int_equal(ftp_parse_port("256,0,0,1,4,1", 13, &ss), -1);
	assert_int_equal(ftp_parse_port("127,0,0,1,0,0", 13, &ss), -1);
	assert_int_equal(ftp_parse_port("127,0,0,1,4,+1", 14, &ss), -1);
	assert_int_equal(ftp_parse_port("0127,0,0,1,4,1", 14, &ss), -1);
	assert_int_equal(ftp_parse_port("", 0, &ss), -1);
	assert_int_equal(ftp_fmt_port((struct sockaddr *)&ss, buf, 5), -1);

	assert_int_equal(ftp_parse_227("Entering Passive Mode (10,1,2,3,200,10).",
	    40, &ss), 0);
	assert_int_equal(ntohl(sin->sin_addr.s_addr), 0x0a010203);
	assert_int_equal(ntohs(sin->sin_port), 200 * 256 + 10);
	/* some servers omit the parentheses, some put numbers before */
	assert_int_equal(ftp_parse_227("=1,2,3,4,0,21", 13, &ss), 0);
	assert_int_equal(ftp_parse_227("v2 ok 1,2,3,4,0,21", 18, &ss), 0);
	assert_int_equal(ntohs(sin->sin_port), 21);
	assert_int_equal(ftp_parse_227("no address", 10, &ss), -1);
	assert_int_equal(ftp_fmt_227((struct sockaddr *)&ss, buf, sizeof(buf)),
	    (int)strlen("227 Entering Passive Mode (1,2,3,4,0,21).\r\n"));
	assert_string_equal(buf, "227 Entering Passive Mode (1,2,3,4,0,21).\r\n");
}

static void
test_eprt_epsv(void **state)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	char buf[128];
	uint16_t port;

	(void)state;
	assert_int_equal(ftp_parse_eprt("|1|132.235.1.2|6275|", 20, &ss), 0);
	assert_int_equal(sin->sin_family, AF_INET);
	assert_int_equal(ntohs(sin->sin_port), 6275);
	assert_int_equal(ftp_fmt_eprt((struct sockaddr *)&ss, buf, sizeof(buf)),
	    20);
	assert_string_equal(buf, "|1|132.235.1.2|6275|");
	assert_int_equal(ftp_parse_eprt("!2!::1!5282!", 12, &ss), 0);
	assert_int_equal(sin6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(sin6->sin6_port), 5282);
	assert_true(IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr));
	assert_int_equal(ftp_fmt_eprt((struct sockaddr *)&ss, buf, sizeof(buf)),
	    12);
	assert_string_equal(buf, "|2|::1|5282|");
	assert_int_equal(ftp_parse_eprt("|3|1.2.3.4|1|", 13, &ss), -1);
	assert_int_equal(ftp_parse_eprt("|1|::1|1|", 9, &ss), -1);
	assert_int_equal(ftp_parse_eprt("|2|1.2.3.4|1|", 13, &ss), -1);
	assert_int_equal(ftp_parse_eprt("|1|1.2.3.4|0|", 13, &ss), -1);
	assert_int_equal(ftp_parse_eprt("|1|1.2.3.4|65536|", 17, &ss), -1);
	assert_int_equal(ftp_parse_eprt("|1|1.2.3.4|1", 12, &ss), -1);
	assert_int_equal(ftp_parse_eprt("|1|1.2.3.4|1|2|", 15, &ss), -1);
	assert_int_equal(ftp_parse_eprt(" 1 1.2.3.4 1 ", 13, &ss), -1);
	assert_int_equal(ftp_parse_eprt("|", 1, &ss), -1);

	assert_int_equal(ftp_parse_229("Entering Extended Passive Mode (|||6446|)",
	    41, &port), 0);
	assert_int_equal(port, 6446);
	assert_int_equal(ftp_parse_229("(!!!1!)", 7, &port), 0);
	assert_int_equal(port, 1);
	assert_int_equal(ftp_parse_229("(|||0|)", 7, &port), -1);
	assert_int_equal(ftp_parse_229("(|||70000|)", 11, &port), -1);
	assert_int_equal(ftp_parse_229("(|||12", 6, &port), -1);
	assert_int_equal(ftp_parse_229("(||", 3, &port), -1);
	assert_int_equal(ftp_fmt_229(6446, buf, sizeof(buf)), 47);
	assert_string_equal(buf,
	    "229 Entering Extended Passive Mode (|||6446|)\r\n");
	assert_int_equal(ftp_fmt_229(0, buf, sizeof(buf)), -1);
}

/* Random bytes never crash a parser or make it claim more than it got. */
static void
test_random(void **state)
{
	unsigned char buf[256];
	struct ftp_reply_state st = { 0 };
	struct sockaddr_storage ss;
	size_t i, k, used, len;
	uint16_t port;
	int code;

	(void)state;
	srand(5);
	for (i = 0; i < 20000; i++) {
		size_t n = (size_t)rand() % sizeof(buf);

		for (k = 0; k < n; k++)
			buf[k] = (unsigned char)("A \r\n\xff\xf4,|1(0"[rand() % 12]);
		if (ftp_cmd_parse(buf, n, 128, &cmd, &used) == FTP_OK)
			assert_true(used <= n && cmd.arglen < used);
		if (ftp_line_get(buf, n, 128, &len, &used) == FTP_OK) {
			assert_true(len < used && used <= n);
			(void)ftp_reply_feed(&st, (char *)buf, len, &code);
		}
		(void)ftp_parse_port((char *)buf, n, &ss);
		(void)ftp_parse_eprt((char *)buf, n, &ss);
		(void)ftp_parse_227((char *)buf, n, &ss);
		(void)ftp_parse_229((char *)buf, n, &port);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cmd_basic),
		cmocka_unit_test(test_cmd_bad),
		cmocka_unit_test(test_cmd_limit),
		cmocka_unit_test(test_cmd_telnet),
		cmocka_unit_test(test_cmd_splits),
		cmocka_unit_test(test_reply_lines),
		cmocka_unit_test(test_port),
		cmocka_unit_test(test_eprt_epsv),
		cmocka_unit_test(test_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
