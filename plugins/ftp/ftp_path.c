/* ftp: canonical paths and the working directory (ftp_path.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ftp/ftp_path.h"

const char *
ftp_path_err_name(enum ftp_path_err e)
{
	static const char *const names[] = {
		"ok", "above-root", "control-byte", "glob", "backslash",
		"tilde", "too-long", "options-and-path", "not-absolute",
		"cwd-unknown", "cwd-pending", "no-directory", "edge-space",
		"site-command", "recursive", "several-names",
	};

	if ((size_t)e >= sizeof(names) / sizeof(names[0]))
		return "?";
	return names[e];
}

/* Bytes no server may read differently from the proxy. Globs: vsftpd and
 * ProFTPD expand them in LIST/NLST/STAT, some servers elsewhere too, so
 * "secre?/a" would name a file the rules never saw. A backslash separates
 * on Windows servers; "~user" is a home directory on ProFTPD. Spaces
 * around the argument: some servers strip the line, some do not. */
static enum ftp_path_err
ftp_path_bytes(const char *arg, size_t len, bool strict)
{
	size_t i;

	if (strict && len > 0 && (arg[0] == ' ' || arg[len - 1] == ' '))
		return FTP_PATH_SPACE;
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)arg[i];

		if (ch < 0x20 || ch == 0x7f)
			return FTP_PATH_CONTROL;
		if (!strict)
			continue;
		if (ch == '*' || ch == '?' || ch == '[' || ch == '{')
			return FTP_PATH_GLOB;
		if (ch == '\\')
			return FTP_PATH_BACKSLASH;
		if (ch == '~' && (i == 0 || arg[i - 1] == '/'))
			return FTP_PATH_TILDE;
	}
	return FTP_PATH_OK;
}

enum ftp_path_err
ftp_path_resolve(const char *cwd, const char *arg, size_t len, bool strict,
    char *out, size_t size)
{
	enum ftp_path_err e;
	size_t i = 0, o = 0, start, clen;

	if (size < 2)
		return FTP_PATH_TOO_LONG;
	if ((e = ftp_path_bytes(arg, len, strict)) != FTP_PATH_OK)
		return e;
	if (len == 0 || arg[0] != '/') {
		o = strlen(cwd);
		if (o >= size)
			return FTP_PATH_TOO_LONG;
		memcpy(out, cwd, o);
		if (o == 1)		/* "/": built as "" + "/name" */
			o = 0;
	}
	/* out[0..o) is "" or "/a/b": each component adds "/name". */
	while (i < len) {
		while (i < len && arg[i] == '/')
			i++;
		start = i;
		while (i < len && arg[i] != '/')
			i++;
		clen = i - start;
		if (clen == 0 || (clen == 1 && arg[start] == '.'))
			continue;
		if (clen == 2 && arg[start] == '.' && arg[start + 1] == '.') {
			if (o == 0)
				return FTP_PATH_ABOVE_ROOT;
			while (out[o - 1] != '/')
				o--;
			o--;
			continue;
		}
		if (o + 1 + clen + 1 > size)
			return FTP_PATH_TOO_LONG;
		out[o++] = '/';
		memcpy(out + o, arg + start, clen);
		o += clen;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return FTP_PATH_OK;
}

enum ftp_path_err
ftp_path_from_257(const char *line, size_t len, char *out, size_t size)
{
	char dir[FTP_PATH_MAX];
	const char *q = memchr(line, '"', len), *end = line + len;
	size_t n = 0;

	if (q == NULL)
		return FTP_PATH_NOT_ABSOLUTE;
	for (q++; q < end; q++) {
		if (*q == '"') {
			if (q + 1 < end && q[1] == '"')
				q++;		/* "" is one " */
			else
				break;
		}
		if (n + 1 >= sizeof(dir))
			return FTP_PATH_TOO_LONG;
		dir[n++] = *q;
	}
	if (q >= end || n == 0 || dir[0] != '/')
		return FTP_PATH_NOT_ABSOLUTE;
	return ftp_path_resolve("/", dir, n, false, out, size);
}

void
ftp_path_reset(struct ftp_path_state *ps)
{
	memset(ps, 0, sizeof(*ps));
	memcpy(ps->cwd, "/", 2);
	memcpy(ps->home, "/", 2);
}

static bool
ftp_verb_is(const char *verb, const char *a, const char *b)
{
	return strcmp(verb, a) == 0 || (b != NULL && strcmp(verb, b) == 0);
}

/* The server's own name of its directory. Until now the login directory
 * was taken for "/"; the first answer says what it is: the answer itself
 * before any CWD, or the answer without the tracked part after one (cwd
 * "/dl" and "/home/u/dl": "/home/u"). */
static void
ftp_path_learn(struct ftp_path_state *ps, const char *dir)
{
	size_t dl = strlen(dir), cl = strlen(ps->cwd);

	if (!ps->home_known) {
		ps->home_known = true;
		if (!ps->moved || strcmp(ps->cwd, "/") == 0)
			snprintf(ps->home, sizeof(ps->home), "%s", dir);
		else if (dl > cl && strcmp(dir + dl - cl, ps->cwd) == 0)
			snprintf(ps->home, sizeof(ps->home), "%.*s",
			    (int)(dl - cl), dir);
		else if (dl == cl && strcmp(dir, ps->cwd) == 0)
			snprintf(ps->home, sizeof(ps->home), "/");
	}
	/* A CWD in flight was resolved from another directory than the
	 * server's: where its answer leaves the server is not known. */
	if (ps->pending && strcmp(ps->cwd, dir) != 0) {
		ps->pending = false;
		ps->lost = true;
		snprintf(ps->cwd, sizeof(ps->cwd), "%s", dir);
		return;
	}
	snprintf(ps->cwd, sizeof(ps->cwd), "%s", dir);
	ps->lost = false;
}

void
ftp_path_reply(struct ftp_path_state *ps, const char *verb, int code,
    const char *line, size_t len)
{
	char dir[FTP_PATH_MAX];

	if (code == 230 && (ftp_verb_is(verb, "USER", "PASS") ||
	    ftp_verb_is(verb, "ACCT", NULL))) {
		ftp_path_reset(ps);
		return;
	}
	if (ftp_verb_is(verb, "PWD", "XPWD")) {
		if (code == 257 && ftp_path_from_257(line, len, dir,
		    sizeof(dir)) == FTP_PATH_OK)
			ftp_path_learn(ps, dir);
		return;
	}
	if (!ftp_verb_is(verb, "CWD", "XCWD") &&
	    !ftp_verb_is(verb, "CDUP", "XCUP"))
		return;
	if (!ps->pending)
		return;		/* lost already: a PWD answer is needed */
	ps->pending = false;
	/* 250 for CWD, 200 or 250 for CDUP (RFC 959 lists both); a refusal
	 * leaves the server where it was. */
	if (code / 100 != 2)
		return;
	memcpy(ps->cwd, ps->next, sizeof(ps->cwd));
	ps->moved = true;
	ps->lost = false;
}

void
ftp_path_cwd_sent(struct ftp_path_state *ps, const char *target)
{
	/* Two changes in flight: which one the server made is not known. */
	if (target == NULL || ps->pending) {
		ps->pending = false;
		ps->lost = true;
		return;
	}
	snprintf(ps->next, sizeof(ps->next), "%s", target);
	ps->pending = true;
}

const char *
ftp_path_relative(const char *home, const char *path, bool icase)
{
	size_t hl = strlen(home);

	if (strcmp(home, "/") == 0 || (icase ? strncasecmp(path, home, hl) :
	    strncmp(path, home, hl)) != 0)
		return path + 1;
	if (path[hl] == '\0')
		return path + hl;
	if (path[hl] == '/')
		return path + hl + 1;
	return path + 1;
}
