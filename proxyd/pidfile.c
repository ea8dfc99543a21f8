/* <pidfile> and proxyd -s (pidfile.h). */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "privs.h"

/* The pid in path: >0, 0 when there is no file, -1 when it is unreadable
 * or holds no pid (why says so). */
static long
px_pidfile_read(const char *path, const char **why)
{
	char buf[32];
	char *end;
	ssize_t n;
	long pid;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		*why = strerror(errno);
		return errno == ENOENT ? 0 : -1;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0) {
		*why = "empty";
		return -1;
	}
	buf[n] = '\0';
	pid = strtol(buf, &end, 10);
	if (pid <= 0 || (*end != '\n' && *end != '\0')) {
		*why = "does not hold a pid";
		return -1;
	}
	return pid;
}

/* Is pid a live proxyd (not a recycled pid of something else)? */
static bool
px_pid_is_proxyd(long pid)
{
	char path[64], comm[64];
	ssize_t n;
	int fd;

	if (kill((pid_t)pid, 0) == -1 && errno != EPERM)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return true;	/* alive; cannot tell more */
	n = read(fd, comm, sizeof(comm) - 1);
	close(fd);
	if (n <= 0)
		return true;
	comm[n] = '\0';
	return strncmp(comm, "proxyd", 6) == 0;
}

/* Is dir the RuntimeDirectory systemd made for this unit (and removes
 * when it stops)? $RUNTIME_DIRECTORY lists them, ':'-separated. */
static bool
px_is_runtime_dir(const char *dir)
{
	const char *rt = getenv("RUNTIME_DIRECTORY"), *p;
	size_t len = strlen(dir);

	for (p = rt; p != NULL && *p != '\0'; p = strchr(p, ':') ?
	    strchr(p, ':') + 1 : NULL)
		if (strncmp(p, dir, len) == 0 && (p[len] == ':' ||
		    p[len] == '\0'))
			return true;
	return false;
}

/* Can uid:gid create and remove files in a directory of st (its owner,
 * primary group or others' bits; supplementary groups not counted)? */
static bool
px_dir_writable_by(const struct stat *st, uid_t uid, gid_t gid)
{
	if (st->st_uid == uid)
		return (st->st_mode & S_IWUSR) != 0;
	if (st->st_gid == gid)
		return (st->st_mode & S_IWGRP) != 0;
	return (st->st_mode & S_IWOTH) != 0;
}

/* The directory of path: true when it was missing and made here (mode
 * 0755). */
static bool
px_pidfile_mkdir(const char *path)
{
	char *copy = strdup(path);
	bool made;

	if (copy == NULL)
		return false;
	made = mkdir(dirname(copy), 0755) == 0;
	free(copy);
	return made;
}

/* After the drop to <user>, only a directory that user may write lets it
 * remove the pidfile at a clean stop. As root, before the drop, give it
 * one where the directory is ours to give: one made here (made), or
 * systemd's RuntimeDirectory of this unit. Called once the file is
 * written: root may lack CAP_DAC_OVERRIDE (the shipped unit keeps only
 * CAP_CHOWN for this), and then it could not create the file in a
 * directory it already gave away.
 * Any other directory is left as it is, with a warning if the file will
 * outlive the daemon (harmless: a stale file is replaced at start). */
static void
px_pidfile_give_dir(const char *path, bool made, const struct px_config *cfg,
    FILE *err)
{
	char *copy = strdup(path), *dir;
	struct stat st;
	int fd;

	if (copy == NULL || !px_privs_will_drop(cfg))
		goto out;
	dir = dirname(copy);
	if ((made || px_is_runtime_dir(dir)) && (fd = open(dir, O_RDONLY |
	    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) != -1) {
		if (fchown(fd, cfg->uid, cfg->gid) == -1)
			fprintf(err, "proxyd: pidfile directory %s: chown to "
			    "%s: %s\n", dir, cfg->user, strerror(errno));
		close(fd);
	}
	if (stat(dir, &st) == 0 && !px_dir_writable_by(&st, cfg->uid,
	    cfg->gid))
		fprintf(err, "proxyd: warning: pidfile %s: user %s cannot "
		    "write %s, so the file will stay after proxyd stops; use "
		    "a directory of that user's (one proxyd creates, or "
		    "systemd's RuntimeDirectory=)\n", path, cfg->user, dir);
out:
	free(copy);
}

/* O_EXCL: the directory may be the unprivileged user's, and root must
 * not write through a link someone left under the pidfile's name. */
static int
px_pidfile_create(const char *path)
{
	int fd, flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;

	if ((fd = open(path, flags, 0644)) == -1 && errno == EEXIST &&
	    unlink(path) == 0)
		fd = open(path, flags, 0644);
	return fd;
}

int
px_pidfile_write(const char *path, const struct px_config *cfg, FILE *err)
{
	const char *why = NULL;
	long old = px_pidfile_read(path, &why);
	char buf[32];
	bool made;
	int fd, n;

	if (old > 0 && old != (long)getpid() && px_pid_is_proxyd(old)) {
		fprintf(err, "proxyd: %s: proxyd is already running as pid "
		    "%ld\n", path, old);
		return -1;
	}
	made = px_pidfile_mkdir(path);
	/* A stale file (a crash, a kill -9) is replaced. */
	if ((fd = px_pidfile_create(path)) == -1) {
		fprintf(err, "proxyd: pidfile %s: %s\n", path, strerror(errno));
		return -1;
	}
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (write(fd, buf, (size_t)n) != n) {
		fprintf(err, "proxyd: pidfile %s: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	px_pidfile_give_dir(path, made, cfg, err);
	return 0;
}

int
px_pidfile_takeover(const char *path)
{
	char buf[32];
	int fd, n;

	if ((fd = px_pidfile_create(path)) == -1)
		return -1;
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (write(fd, buf, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	return close(fd);
}

void
px_pidfile_remove(const char *path)
{
	const char *why;

	/* After the drop, only if the directory is the user's (see
	 * px_pidfile_give_dir); else a stale file is replaced at the next start. */
	if (path != NULL && px_pidfile_read(path, &why) == (long)getpid())
		(void)unlink(path);
}

/* The daemon reads its files as <user> after startup, so a reload reads
 * them as that user too: a key only root can read passes a check made as
 * root and fails the reload. Check in a child that drops to <user> as
 * the daemon did (we stay root: the signal is sent from here). 0 when
 * the configuration loads as that user, -1 after its errors on stderr. */
static int
px_check_as_user(const struct px_config *cfg, const char *config_path)
{
	struct px_cfgerr e = { .out = stderr };
	struct px_config *ncfg;
	pid_t pid;
	int status;

	fflush(NULL);
	if ((pid = fork()) == -1) {
		fprintf(stderr, "proxyd: cannot fork to check as user %s: "
		    "%s\n", cfg->user, strerror(errno));
		return -1;
	}
	if (pid == 0) {
		if (px_privs_drop(cfg, stderr) == -1)
			_exit(1);
		if ((ncfg = px_config_load(config_path, &e)) == NULL) {
			fprintf(stderr, "proxyd: %s: %u error%s as user %s "
			    "(uid %ld, gid %ld), which the daemon reads its "
			    "files as; not reloading\n", config_path, e.count,
			    e.count == 1 ? "" : "s", cfg->user,
			    (long)getuid(), (long)getgid());
			fflush(NULL);
			_exit(1);
		}
		fflush(NULL);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The new process's stdout and stderr become the old one's (a terminal,
 * a file, the test's pipe) once it listens: until then it writes to ours,
 * so that a failure is told here. Opened here, as root (the daemon is
 * not dumpable: its user could not open them), and passed as
 * $PROXYD_UPGRADE_STDIO; /dev/null where they cannot be opened (a
 * journal stream is a socket). */
static void
px_upgrade_stdio(long pid)
{
	char path[64], env[32];
	int fd[2], i;

	if ((fd[0] = open("/dev/null", O_RDWR)) != -1) {
		(void)dup2(fd[0], 0);
		close(fd[0]);
	}
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/proc/%ld/fd/%d", pid, i + 1);
		if ((fd[i] = open(path, O_WRONLY | O_APPEND)) == -1)
			fd[i] = open("/dev/null", O_WRONLY);
	}
	snprintf(env, sizeof(env), "%d,%d", fd[0], fd[1]);
	(void)setenv("PROXYD_UPGRADE_STDIO", env, 1);
}

/* proxyd -s upgrade: starts the new binary (this one, or
 * $PROXYD_UPGRADE_EXEC) as a daemon that takes pid's sessions over
 * (core/handover.h), and waits until it says it listens (or fails). */
static int
px_upgrade(const char *config_path, long pid)
{
	const char *exe = getenv("PROXYD_UPGRADE_EXEC");
	char self[PATH_MAX], pidarg[32], fdarg[16], line[64];
	struct pollfd pfd;
	int st[2], status;
	ssize_t n;
	size_t got = 0;
	pid_t child;

	if (exe == NULL) {
		if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0) {
			fprintf(stderr, "proxyd: upgrade: /proc/self/exe: %s\n",
			    strerror(errno));
			return 1;
		}
		self[n] = '\0';
		exe = self;
	}
	if (pipe2(st, O_CLOEXEC) == -1) {
		fprintf(stderr, "proxyd: upgrade: %s\n", strerror(errno));
		return 1;
	}
	snprintf(pidarg, sizeof(pidarg), "%ld", pid);
	fflush(NULL);
	if ((child = fork()) == -1) {
		fprintf(stderr, "proxyd: upgrade: fork: %s\n", strerror(errno));
		close(st[0]);
		close(st[1]);
		return 1;
	}
	if (child == 0) {
		(void)setsid();
		px_upgrade_stdio(pid);
		(void)fcntl(st[1], F_SETFD, 0);
		snprintf(fdarg, sizeof(fdarg), "%d", st[1]);
		(void)setenv("PROXYD_UPGRADE_STATUS_FD", fdarg, 1);
		execl(exe, "proxyd", "-c", config_path, "--takeover", pidarg,
		    (char *)NULL);
		_exit(127);
	}
	close(st[1]);
	pfd = (struct pollfd){ .fd = st[0], .events = POLLIN };
	/* Its start (the policies' load) and the hand-shake, bounded. */
	while (got < sizeof(line) - 1 && poll(&pfd, 1, 120 * 1000) == 1) {
		if ((n = read(st[0], line + got, sizeof(line) - 1 - got)) <= 0)
			break;
		got += (size_t)n;
		if (memchr(line, '\n', got) != NULL)
			break;
	}
	line[got] = '\0';
	close(st[0]);
	if (strncmp(line, "ok", 2) == 0) {
		printf("proxyd: upgrade: new process pid %ld takes over from "
		    "pid %ld\n", (long)child, pid);
		return 0;
	}
	if (waitpid(child, &status, WNOHANG) == 0) {
		kill(child, SIGTERM);
		(void)waitpid(child, &status, 0);
	}
	fprintf(stderr, "proxyd: upgrade failed (the new process %s); pid "
	    "%ld serves on\n", WIFEXITED(status) ? "exited" : "was stopped",
	    pid);
	return 1;
}

int
px_pidfile_command(const char *config_path, const char *what)
{
	struct px_cfgerr e = { .out = stderr };
	struct px_config *cfg;
	const char *why = NULL;
	bool stop = strcmp(what, "stop") == 0;
	bool upgrade = strcmp(what, "upgrade") == 0;
	long pid;
	int i;

	if (!stop && !upgrade && strcmp(what, "reload") != 0) {
		fprintf(stderr, "proxyd: -s %s: expected reload, upgrade or "
		    "stop\n", what);
		return 2;
	}
	/* reload: the daemon would refuse a broken configuration and keep
	 * the old one; say so here instead of signalling for nothing. */
	if ((cfg = px_config_load(config_path, &e)) == NULL) {
		fprintf(stderr, "proxyd: %s: %u error%s%s\n", config_path,
		    e.count, e.count == 1 ? "" : "s", stop ? "" : upgrade ?
		    ", not upgrading" : ", not reloading");
		return 1;
	}
	if (!stop && px_privs_will_drop(cfg) &&
	    px_check_as_user(cfg, config_path) == -1) {
		px_config_unref(cfg);
		return 1;
	}
	if (cfg->pidfile == NULL) {
		fprintf(stderr, "proxyd: -s %s needs a <pidfile path=...> in "
		    "%s (or signal the daemon yourself: SIGHUP reloads, "
		    "SIGTERM stops)\n", what, config_path);
		px_config_unref(cfg);
		return 1;
	}
	pid = px_pidfile_read(cfg->pidfile, &why);
	if (pid <= 0 || !px_pid_is_proxyd(pid)) {
		if (pid == 0)
			fprintf(stderr, "proxyd: no %s: proxyd is not running\n",
			    cfg->pidfile);
		else if (pid < 0)
			fprintf(stderr, "proxyd: %s: %s\n", cfg->pidfile, why);
		else
			fprintf(stderr, "proxyd: %s names pid %ld, which is "
			    "not a running proxyd (a stale file)\n",
			    cfg->pidfile, pid);
		px_config_unref(cfg);
		return 1;
	}
	px_config_unref(cfg);
	if (upgrade)
		return px_upgrade(config_path, pid);
	if (kill((pid_t)pid, stop ? SIGTERM : SIGHUP) == -1) {
		fprintf(stderr, "proxyd: cannot signal pid %ld: %s\n", pid,
		    strerror(errno));
		return 1;
	}
	printf("proxyd: sent %s to pid %ld\n", stop ? "SIGTERM" : "SIGHUP",
	    pid);
	if (!stop)
		return 0;
	/* Stop returns once it is gone, as a script expects (bounded: the
	 * daemon's own grace closes what is left). */
	for (i = 0; i < 20 * 120; i++) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };

		if (kill((pid_t)pid, 0) == -1 && errno == ESRCH)
			return 0;
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "proxyd: pid %ld still runs after 120 s\n", pid);
	return 1;
}
