/* ftp: the canonical path a server will use for a command's argument, and
 * the session's working directory it depends on. Path rules are judged on
 * that path, never on the argument as sent: "./secret/a", "dl/../secret/a",
 * "/secret/a" and "a" after "CWD /secret" are one file.
 *
 * Paths are resolved lexically, in the server's name space as its PWD
 * shows it: "." and empty components go, ".." takes one away. What cannot
 * be resolved that way with confidence is refused (enum ftp_path_err).
 * A symbolic link on the server is not seen: the rules are the server's
 * names, not its files. Pure functions, no allocation: unit-tested. */
#ifndef FTP_PATH_H
#define FTP_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* Canonical paths, terminator included: longer ones are refused. */
#define FTP_PATH_MAX	1024

enum ftp_path_err {
	FTP_PATH_OK = 0,
	FTP_PATH_ABOVE_ROOT,	/* ".." past "/" */
	FTP_PATH_CONTROL,	/* a byte below 0x20, or 0x7f */
	FTP_PATH_GLOB,		/* * ? [ {: some servers expand them */
	FTP_PATH_BACKSLASH,	/* a separator on some servers */
	FTP_PATH_TILDE,		/* ~ or ~user starting a component */
	FTP_PATH_TOO_LONG,
	FTP_PATH_OPTIONS,	/* LIST/NLST "-la dir": options and a path */
	FTP_PATH_NOT_ABSOLUTE,	/* a PWD answer that is no "/..." */
	FTP_PATH_CWD_UNKNOWN,	/* relative, and the directory is not known */
	FTP_PATH_CWD_PENDING,	/* a CWD while another awaits its reply */
	FTP_PATH_NO_ARG,	/* CWD without a directory */
	FTP_PATH_SPACE,		/* a leading or trailing space: some
				 * servers strip them */
	FTP_PATH_SITE,		/* a SITE command the proxy cannot judge */
	FTP_PATH_RECURSIVE,	/* LIST/NLST/STAT -R: names under the path */
	FTP_PATH_NAMES,		/* LIST "a b": Pure-FTPd lists a and b */
};

/* "above-root", "control-byte", ... for the log. */
const char *ftp_path_err_name(enum ftp_path_err e);

/* arg[0..len) resolved against cwd (canonical: "/" or "/a/b") into out
 * (size bytes): "/" or "/a/b", no "." or ".." or "//" or trailing "/".
 * strict: also refuse glob characters, backslashes, "~" starting a
 * component and a space starting or ending arg (arguments
 * from a client; a server's own PWD answer is taken as it is). */
enum ftp_path_err ftp_path_resolve(const char *cwd, const char *arg,
	    size_t len, bool strict, char *out, size_t size);

/* The quoted directory of a 257 reply line (RFC 959: "" inside it is one
 * "), canonical, into out. */
enum ftp_path_err ftp_path_from_257(const char *line, size_t len, char *out,
	    size_t size);

/* What the proxy knows of a session's working directory. */
struct ftp_path_state {
	char	cwd[FTP_PATH_MAX];	/* canonical */
	char	next[FTP_PATH_MAX];	/* the target of the CWD in flight */
	char	home[FTP_PATH_MAX];	/* the login directory, "/" until known */
	bool	pending;		/* a CWD/CDUP awaits its reply */
	bool	lost;			/* cwd unknown until a PWD answer */
	bool	home_known;		/* from a PWD answer */
	bool	moved;			/* a directory change since login */
};

/* A new login: the server's own starting directory, "/" until it says. */
void	ftp_path_reset(struct ftp_path_state *ps);
/* The final reply to a forwarded command: 230 starts a login, 257 to
 * PWD/XPWD names the directory, 2xx to CWD/XCWD/CDUP/XCUP moves to the
 * pending target (anything else leaves the directory as it was). */
void	ftp_path_reply(struct ftp_path_state *ps, const char *verb, int code,
	    const char *line, size_t len);
/* A directory change forwarded to the server: target, or NULL when it
 * cannot be known (the directory is lost until a PWD answer). */
void	ftp_path_cwd_sent(struct ftp_path_state *ps, const char *target);
/* path (canonical) relative to home, for patterns without a leading "/";
 * outside home, relative to "/". icase: compare ASCII case
 * insensitively. */
const char *ftp_path_relative(const char *home, const char *path, bool icase);

#endif
