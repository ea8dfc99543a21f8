/* Unit tests for plugins/ftp/ftp_path.c: the canonical path of an
 * argument (hand-picked spellings, then random ones checked against the
 * kernel's own resolution in a scratch tree), the 257 answer, and the
 * working directory through CWD/CDUP/PWD replies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftp/ftp_path.h"

static enum ftp_path_err
resolve(const char *cwd, const char *arg, char *out)
{
	return ftp_path_resolve(cwd, arg, strlen(arg), true, out,
	    FTP_PATH_MAX);
}

static void
test_resolve(void **state)
{
	static const struct {
		const char *cwd, *arg, *want;	/* want NULL: err */
		enum ftp_path_err err;
	} cases[] = {
		{ "/", "secret/a.txt", "/secret/a.txt", FTP_PATH_OK },
		{ "/", "./secret/a.txt", "/secret/a.txt", FTP_PATH_OK },
		{ "/", "dl/../secret/a.txt", "/secret/a.txt", FTP_PATH_OK },
		{ "/", "dl//..//secret//a.txt", "/secret/a.txt", FTP_PATH_OK },
		{ "/", "/secret/a.txt", "/secret/a.txt", FTP_PATH_OK },
		{ "/dl", "../secret/a.txt", "/secret/a.txt", FTP_PATH_OK },
		{ "/secret", "a.txt", "/secret/a.txt", FTP_PATH_OK },
		{ "/secret", "", "/secret", FTP_PATH_OK },
		{ "/secret", ".", "/secret", FTP_PATH_OK },
		{ "/a/b", "..", "/a", FTP_PATH_OK },
		{ "/a", "..", "/", FTP_PATH_OK },
		{ "/", "/", "/", FTP_PATH_OK },
		{ "/", "//", "/", FTP_PATH_OK },
		{ "/", "secret/", "/secret", FTP_PATH_OK },
		{ "/", "secret/.", "/secret", FTP_PATH_OK },
		{ "/x", "/secret/./a/../a.txt/", "/secret/a.txt", FTP_PATH_OK },
		{ "/", "...", "/...", FTP_PATH_OK },
		{ "/", "a..b/.x", "/a..b/.x", FTP_PATH_OK },
		{ "/", "my file", "/my file", FTP_PATH_OK },
		{ "/", "a~b", "/a~b", FTP_PATH_OK },
		{ "/", "..", NULL, FTP_PATH_ABOVE_ROOT },
		{ "/", "../secret/a.txt", NULL, FTP_PATH_ABOVE_ROOT },
		{ "/", "/../secret", NULL, FTP_PATH_ABOVE_ROOT },
		{ "/dl", "../../secret", NULL, FTP_PATH_ABOVE_ROOT },
		{ "/", "secre?/a.txt", NULL, FTP_PATH_GLOB },
		{ "/", "s*", NULL, FTP_PATH_GLOB },
		{ "/", "[s]ecret", NULL, FTP_PATH_GLOB },
		{ "/", "{secret,x}", NULL, FTP_PATH_GLOB },
		{ "/", "secret\\a.txt", NULL, FTP_PATH_BACKSLASH },
		{ "/", "~", NULL, FTP_PATH_TILDE },
		{ "/", "~ftp/secret", NULL, FTP_PATH_TILDE },
		{ "/", "dl/~/x", NULL, FTP_PATH_TILDE },
		{ "/", "a\tb", NULL, FTP_PATH_CONTROL },
		{ "/", "a\x7f", NULL, FTP_PATH_CONTROL },
		{ "/", " secret/a.txt", NULL, FTP_PATH_SPACE },
		{ "/", "secret/a.txt ", NULL, FTP_PATH_SPACE },
	};
	char out[FTP_PATH_MAX];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum ftp_path_err e = resolve(cases[i].cwd, cases[i].arg, out);

		if (e != cases[i].err)
			fail_msg("%s + %s: %s, expected %s", cases[i].cwd,
			    cases[i].arg, ftp_path_err_name(e),
			    ftp_path_err_name(cases[i].err));
		if (cases[i].want != NULL)
			assert_string_equal(out, cases[i].want);
	}
	/* A NUL inside the argument is a control byte, not its end. */
	assert_int_equal(ftp_path_resolve("/", "a\0b", 3, true, out,
	    sizeof(out)), FTP_PATH_CONTROL);
	/* Not strict (a server's own answer): globs and "~" are names. */
	assert_int_equal(ftp_path_resolve("/", "a*/~b", 5, false, out,
	    sizeof(out)), FTP_PATH_OK);
	assert_string_equal(out, "/a*/~b");
	/* The output bound, exactly. */
	assert_int_equal(ftp_path_resolve("/", "abc", 3, true, out, 5),
	    FTP_PATH_OK);
	assert_string_equal(out, "/abc");
	assert_int_equal(ftp_path_resolve("/", "abcd", 4, true, out, 5),
	    FTP_PATH_TOO_LONG);
	assert_int_equal(ftp_path_resolve("/abcd", "x", 1, true, out, 5),
	    FTP_PATH_TOO_LONG);
}

/* Random spellings of paths in a scratch tree, resolved by the kernel
 * (realpath, no symbolic links in it) and by ftp_path_resolve from a
 * random directory: the same file, or "above-root" exactly when the
 * kernel leaves the tree. Spellings naming nothing are skipped (the
 * kernel resolves "x/.." only when x exists). */
static void
test_resolve_random(void **state)
{
	static const char *const comp[] = {
		".", "..", "", "dl", "secret", "a.txt", "sub",
	};
	static const char *const dirs[] = { "/", "/dl", "/secret", "/dl/sub" };
	char tmpl[] = "/tmp/ftp_path_test.XXXXXX", root[PATH_MAX];
	char full[PATH_MAX * 2], real[PATH_MAX], arg[256], out[FTP_PATH_MAX];
	const char *cwd;
	size_t rl, n, k, checked = 0, above = 0;
	unsigned seed = 24;
	int i;

	(void)state;
	assert_non_null(mkdtemp(tmpl));
	assert_non_null(realpath(tmpl, root));
	rl = strlen(root);
	snprintf(full, sizeof(full), "%s/dl", root);
	assert_int_equal(mkdir(full, 0700), 0);
	snprintf(full, sizeof(full), "%s/dl/sub", root);
	assert_int_equal(mkdir(full, 0700), 0);
	snprintf(full, sizeof(full), "%s/secret", root);
	assert_int_equal(mkdir(full, 0700), 0);
	for (i = 0; i < 2; i++) {
		FILE *f;

		snprintf(full, sizeof(full), "%s/%s/a.txt", root,
		    i == 0 ? "secret" : "dl");
		assert_non_null(f = fopen(full, "w"));
		fclose(f);
	}
	for (i = 0; i < 20000; i++) {
		cwd = dirs[rand_r(&seed) % 4];
		n = 1 + (size_t)(rand_r(&seed) % 6);
		arg[0] = '\0';
		if (rand_r(&seed) % 4 == 0)
			strcat(arg, "/");
		for (k = 0; k < n; k++) {
			if (k > 0)
				strcat(arg, rand_r(&seed) % 3 == 0 ? "//" :
				    "/");
			strcat(arg, comp[rand_r(&seed) % 7]);
		}
		if (rand_r(&seed) % 5 == 0)
			strcat(arg, "/");
		snprintf(full, sizeof(full), "%s%s/%s", root,
		    arg[0] == '/' ? "" : (strcmp(cwd, "/") == 0 ? "" : cwd),
		    arg);
		if (realpath(full, real) == NULL)
			continue;
		enum ftp_path_err e = resolve(cwd, arg, out);
		bool inside = strncmp(real, root, rl) == 0 &&
		    (real[rl] == '\0' || real[rl] == '/');

		if (!inside) {
			if (e != FTP_PATH_ABOVE_ROOT)
				fail_msg("%s + %s: kernel %s, proxy %s", cwd,
				    arg, real, ftp_path_err_name(e));
			above++;
			continue;
		}
		if (e != FTP_PATH_OK)
			fail_msg("%s + %s: %s", cwd, arg, ftp_path_err_name(e));
		if (strcmp(out, real[rl] == '\0' ? "/" : real + rl) != 0)
			fail_msg("%s + %s: kernel %s, proxy %s", cwd, arg,
			    real + rl, out);
		checked++;
	}
	/* Enough of both kinds to mean something. */
	assert_true(checked > 2000);
	assert_true(above > 200);
	snprintf(full, sizeof(full), "rm -rf '%s'", root);
	assert_int_equal(system(full), 0);
}

static void
test_257(void **state)
{
	static const struct {
		const char *line, *want;
	} cases[] = {
		{ "257 \"/\" is the current directory", "/" },
		{ "257 \"/dl\" is current directory.", "/dl" },
		{ "257 \"/home/u/\"", "/home/u" },
		{ "257 \"/a \"\"q\"\" b\" ok", "/a \"q\" b" },
		{ "257 \"/x//y/.\"", "/x/y" },
		{ "257 \"dl\" relative", NULL },
		{ "257 no quotes", NULL },
		{ "257 \"/unterminated", NULL },
		{ "257 \"\"", NULL },
		{ "257 \"C:\\\\dl\"", NULL },
		{ "257 \"/..\"", NULL },
	};
	char out[FTP_PATH_MAX];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum ftp_path_err e = ftp_path_from_257(cases[i].line,
		    strlen(cases[i].line), out, sizeof(out));

		if (cases[i].want == NULL) {
			if (e == FTP_PATH_OK)
				fail_msg("%s: took %s", cases[i].line, out);
			continue;
		}
		if (e != FTP_PATH_OK)
			fail_msg("%s: %s", cases[i].line, ftp_path_err_name(e));
		assert_string_equal(out, cases[i].want);
	}
}

/* A CWD moves on its 2xx only; a refused one leaves the directory; two
 * at once, or one whose target is unknown, lose it until a PWD answer;
 * a login starts over. */
static void
test_state(void **state)
{
	struct ftp_path_state ps;

	(void)state;
	ftp_path_reset(&ps);
	assert_string_equal(ps.cwd, "/");
	assert_string_equal(ps.home, "/");
	ftp_path_cwd_sent(&ps, "/secret");
	assert_true(ps.pending);
	ftp_path_reply(&ps, "CWD", 550, "550 Failed", 10);
	assert_false(ps.pending);
	assert_string_equal(ps.cwd, "/");
	ftp_path_cwd_sent(&ps, "/dl");
	ftp_path_reply(&ps, "CWD", 250, "250 ok", 6);
	assert_string_equal(ps.cwd, "/dl");
	ftp_path_cwd_sent(&ps, "/");
	ftp_path_reply(&ps, "CDUP", 200, "200 ok", 6);
	assert_string_equal(ps.cwd, "/");
	/* A reply to another command is nothing to the directory. */
	ftp_path_cwd_sent(&ps, "/dl");
	ftp_path_reply(&ps, "MKD", 257, "257 \"/x\" created", 17);
	assert_true(ps.pending);
	ftp_path_reply(&ps, "XCWD", 250, "250 ok", 6);
	assert_string_equal(ps.cwd, "/dl");
	/* Two in flight: lost, and a PWD answer finds it again. */
	ftp_path_cwd_sent(&ps, "/a");
	ftp_path_cwd_sent(&ps, "/b");
	assert_true(ps.lost);
	ftp_path_reply(&ps, "CWD", 250, "250 ok", 6);
	assert_true(ps.lost);
	ftp_path_reply(&ps, "PWD", 257, "257 \"/b\"", 8);
	assert_false(ps.lost);
	assert_string_equal(ps.cwd, "/b");
	/* A chrooted server said "/" after a CWD: home stays "/". */
	assert_true(ps.home_known);
	assert_string_equal(ps.home, "/");
	ftp_path_cwd_sent(&ps, NULL);
	assert_true(ps.lost);
	/* A login: the server's starting directory again. */
	ftp_path_reply(&ps, "PASS", 230, "230 ok", 6);
	assert_false(ps.lost);
	assert_false(ps.home_known);
	assert_string_equal(ps.cwd, "/");
	/* Not chrooted: the first PWD answer is the login directory. */
	ftp_path_reply(&ps, "XPWD", 257, "257 \"/home/u\"", 13);
	assert_string_equal(ps.home, "/home/u");
	assert_string_equal(ps.cwd, "/home/u");
	/* ... and after a CWD from the guessed "/", what is left of it. */
	ftp_path_reset(&ps);
	ftp_path_cwd_sent(&ps, "/dl");
	ftp_path_reply(&ps, "CWD", 250, "250 ok", 6);
	ftp_path_reply(&ps, "PWD", 257, "257 \"/home/u/dl\"", 16);
	assert_string_equal(ps.home, "/home/u");
	assert_string_equal(ps.cwd, "/home/u/dl");
	/* A CWD in flight resolved from the guess: lost. */
	ftp_path_reset(&ps);
	ftp_path_cwd_sent(&ps, "/dl");
	ftp_path_reply(&ps, "PWD", 257, "257 \"/home/u\"", 13);
	assert_true(ps.lost);
	assert_false(ps.pending);
	/* ... but not when the guess was right. */
	ftp_path_reset(&ps);
	ftp_path_cwd_sent(&ps, "/dl");
	ftp_path_reply(&ps, "PWD", 257, "257 \"/\"", 7);
	assert_false(ps.lost);
	assert_true(ps.pending);
	ftp_path_reply(&ps, "CWD", 250, "250 ok", 6);
	assert_string_equal(ps.cwd, "/dl");
	/* An answer that is no absolute path changes nothing. */
	ftp_path_reply(&ps, "PWD", 257, "257 \"dl\"", 8);
	assert_string_equal(ps.cwd, "/dl");
}

static void
test_relative(void **state)
{
	(void)state;
	assert_string_equal(ftp_path_relative("/", "/a/b", false), "a/b");
	assert_string_equal(ftp_path_relative("/", "/", false), "");
	assert_string_equal(ftp_path_relative("/h/u", "/h/u/a", false), "a");
	assert_string_equal(ftp_path_relative("/h/u", "/h/u", false), "");
	assert_string_equal(ftp_path_relative("/h/u", "/h/uu/a", false),
	    "h/uu/a");
	assert_string_equal(ftp_path_relative("/h/u", "/H/U/a", false),
	    "H/U/a");
	assert_string_equal(ftp_path_relative("/h/u", "/H/U/a", true), "a");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_resolve_random),
		cmocka_unit_test(test_257),
		cmocka_unit_test(test_state),
		cmocka_unit_test(test_relative),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
