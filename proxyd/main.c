/* proxyd: CLI, startup, signals. The main thread owns the configuration
 * (load, reload), the admin endpoint and shutdown; workers do the rest. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <event2/event.h>
#include <libxml/parser.h>

#include "admin.h"
#include "analyser.h"
#include "config.h"
#include "handover.h"
#include "log.h"
#include "notify.h"
#include "privs.h"
#include "pidfile.h"
#include "quota.h"
#include "quota_store.h"
#include "trace.h"
#include "srclimit.h"
#include "splice.h"
#include "worker.h"

#ifndef PX_DEFAULT_CONFIG	/* set by CMake from the install prefix */
#define PX_DEFAULT_CONFIG	"/etc/proxyd/proxyd.xml"
#endif
#ifndef PX_DOCDIR		/* where CMake installs CONFIG.md */
#define PX_DOCDIR		"/usr/share/doc/proxyd"
#endif
/* Per splice session: two sockets plus two pipes of two fds each. */
/* Two sockets; pipes come from each worker's pool only while bytes are in
 * flight (splice.h), so they are counted per worker, not per session. */
#define PX_FDS_PER_SESSION	2

/* A reload parses on a thread of its own: a large policy takes seconds,
 * and the admin endpoint (on the main loop) must keep answering. */
struct px_reload_job {
	pthread_t		 tid;
	int			 pipe[2];	/* the loader says "done" here */
	struct event		*done_ev;
	bool			 running;
	bool			 pending;	/* a SIGHUP came meanwhile */
	const char		*path;
	struct px_config	*ncfg;		/* its result; NULL: errors */
	struct px_cfgerr	 err;
	char			*text;		/* the errors, one per line */
	size_t			 len;
	uint64_t		 started_ms;
	struct event		*trim_ev;	/* until the old config is gone */
};

struct px_main {
	const char		*config_path;
	struct px_reload_job	 rl;
	struct px_config	*cfg;
	struct event_base	*base;
	struct event		*grace_ev;
	uint64_t		 grace_left_ms;
	bool			 stopping;
	bool			 forced;
	bool			 handing;	/* an upgrade's successor listens */
	struct px_reload_stats	 reloads;
	struct event		*quota_ev;	/* quotas/@state-file's timer */
};

/* quotas/@state-file: the quotas' day so far, written this often (and
 * after each reload and at exit), read at start. */
#define PX_QUOTA_SAVE_S		60

static void
px_quota_persist(const struct px_config *c)
{
	if (c->quota_state_file != NULL &&
	    px_quota_save(c->quota_state_file) == -1)
		px_log(LOG_WARNING, 0, "quotas: cannot write %s: %s",
		    c->quota_state_file, strerror(errno));
}

static void
px_quota_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_main *m = arg;

	(void)fd;
	(void)what;
	px_quota_persist(m->cfg);
}

static void
px_quota_restore(struct px_main *m)
{
	const char *file = m->cfg->quota_state_file;
	struct timeval tv = { PX_QUOTA_SAVE_S, 0 };
	size_t n;

	if (file == NULL)
		return;
	if (px_quota_load(file, &n) == -1)
		px_log(LOG_WARNING, 0, "quotas: %s: %s (%zu partners read)",
		    file, errno == EINVAL ? "not a quota state file, or a bad "
		    "line" : strerror(errno), n);
	else
		px_log(LOG_INFO, 0, "quotas: today's counts of %zu partner%s "
		    "read from %s", n, n == 1 ? "" : "s", file);
	if ((m->quota_ev = event_new(m->base, -1, EV_PERSIST,
	    px_quota_timer_cb, m)) != NULL)
		event_add(m->quota_ev, &tv);
}

static void
px_usage(FILE *out)
{
	fprintf(out,
	    "usage: proxyd [-c FILE]          run in the foreground\n"
	    "       proxyd --check [-c FILE]  validate the config and every policy\n"
	    "       proxyd --check [-c FILE] --trace CLIENT DEST:PORT\n"
	    "                                 which service would take such a connection\n"
	    "       proxyd -s reload|upgrade|stop [-c FILE]\n"
	    "                                 signal the daemon named by <pidfile>\n"
	    "       proxyd --version | --help\n"
	    "\n"
	    "  -c, --config FILE  daemon config (default %s)\n"
	    "      --check        report errors as file:line: reason; exit 1 on any\n"
	    "  -s, --signal CMD   reload (check as <user>, then SIGHUP), stop (SIGTERM, wait)\n"
	    "                     or upgrade (check, then a new process of this binary\n"
	    "                     takes the live sessions over from the running one)\n"
	    "  -V, --version      print the version\n"
	    "  -h, --help         print this help\n"
	    "\n"
	    "Signals: SIGTERM/SIGINT drain and exit, SIGHUP reloads the config\n"
	    "(and reopens the log file), SIGUSR1 only reopens the log file.\n"
	    "\n"
	    "Documentation: proxyd(8) and proxyd.xml(5) (man proxyd, man proxyd.xml),\n"
	    "  " PX_DOCDIR "/CONFIG.md (the full reference)\n",
	    PX_DEFAULT_CONFIG);
}

static void
px_raise_fd_limit(const struct px_config *cfg)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)cfg->max_sessions * PX_FDS_PER_SESSION +
	    (rlim_t)cfg->workers * PX_PIPE_POOL * 2 + 256;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
		(void)getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < want)
		px_log(LOG_WARNING, 0, "open-file limit %llu is below the %llu "
		    "that max-sessions=%llu may need; raise it (ulimit -n)",
		    (unsigned long long)rl.rlim_cur, (unsigned long long)want,
		    (unsigned long long)cfg->max_sessions);
}

static void
px_log_services(const struct px_config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->nservices; i++) {
		const struct px_service *svc = &cfg->services[i];
		char l[PX_ADDRSTRLEN], t[PX_ADDRSTRLEN];

		px_log(LOG_INFO, 0, "service %s: %s on %s mode=%s -> %s", svc->name,
		    svc->analyser->name,
		    px_sockaddr_str((const struct sockaddr *)&svc->listen, l, sizeof(l)),
		    px_mode_name(svc->mode), svc->has_target ?
		    px_sockaddr_str((const struct sockaddr *)&svc->target, t,
		    sizeof(t)) : "original destination");
	}
}

/* glibc keeps freed heap for reuse; after a configuration of many
 * megabytes has been parsed (and the old one freed) give it back. */
static void
px_memory_trim(void)
{
#ifdef __GLIBC__
	(void)malloc_trim(0);
#endif
}

/* The old configuration is freed by whichever thread drops its last
 * reference, often a worker at a session's end: trim from here once only
 * the current one is left, without making a worker wait on it. */
static void
px_trim_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_reload_job *rl = arg;
	struct timeval again = { 1, 0 };

	(void)fd; (void)what;
	if (rl->running || atomic_load_explicit(&px_configs_live,
	    memory_order_acquire) > 1) {
		evtimer_add(rl->trim_ev, &again);
		return;
	}
	px_memory_trim();
}

/* systemd: the RELOADING=1 sent when a reload starts ends here, failed
 * or not (after a failed one the old config serves on: still ready). */
static void
px_reload_notify_done(const struct px_main *m)
{
	char status[64];

	snprintf(status, sizeof(status), "running; reloads: %llu ok, %llu failed",
	    (unsigned long long)m->reloads.ok,
	    (unsigned long long)m->reloads.failed);
	px_notify_ready(status);
}

static void *
px_reload_thread(void *arg)
{
	struct px_reload_job *rl = arg;
	char done = 1;

	rl->err = (struct px_cfgerr){ 0 };
	rl->text = NULL;
	rl->len = 0;
	rl->err.out = open_memstream(&rl->text, &rl->len);
	rl->ncfg = px_config_load(rl->path, &rl->err);
	if (rl->err.out != NULL)
		fclose(rl->err.out);
	while (write(rl->pipe[1], &done, 1) == -1 && errno == EINTR)
		;
	return NULL;
}

static void	px_reload(struct px_main *m);

/* The loader is done: swap (or keep the old configuration) on the main
 * thread, which owns it. */
static void
px_reload_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_main *m = arg;
	struct px_reload_job *rl = &m->rl;
	struct px_config *ncfg;
	char b;

	(void)what;
	while (read(fd, &b, 1) == -1 && errno == EINTR)
		;
	pthread_join(rl->tid, NULL);
	rl->running = false;
	ncfg = rl->ncfg;
	rl->ncfg = NULL;
	if (ncfg == NULL) {
		char *line, *save = NULL;

		for (line = rl->text ? strtok_r(rl->text, "\n", &save) : NULL;
		    line != NULL; line = strtok_r(NULL, "\n", &save))
			px_log(LOG_ERR, 0, "reload: %s", line);
		px_log(LOG_ERR, 0, "reload failed (%u error%s); the running "
		    "configuration stays", rl->err.count,
		    rl->err.count == 1 ? "" : "s");
		/* strtok_r ended the first line: the first error. */
		px_reload_note_error(&m->reloads, rl->text);
		px_reload_note(&m->reloads, false);
		goto out;
	}
	/* A listen address someone else holds would leave that service with
	 * no listener (or, with SO_REUSEPORT, sharing a port): refuse the
	 * whole reload instead. */
	if (m->stopping || px_workers_probe(m->cfg, ncfg, NULL) != 0) {
		if (!m->stopping)
			px_log(LOG_ERR, 0, "reload failed; the running "
			    "configuration stays");
		px_reload_note_error(&m->reloads, m->stopping ? "stopping" :
		    "a listen address is taken (see the log)");
		px_reload_note(&m->reloads, false);
		px_config_unref(ncfg);
		goto out;
	}
	px_raise_fd_limit(ncfg);
	if (ncfg->workers != m->cfg->workers)
		px_log(LOG_WARNING, 0, "reload: workers change takes a restart");
	if (ncfg->admin_enabled != m->cfg->admin_enabled ||
	    memcmp(&ncfg->admin, &m->cfg->admin, sizeof(ncfg->admin)) != 0)
		px_log(LOG_WARNING, 0, "reload: admin address change takes a restart");
	if (ncfg->user != m->cfg->user && (ncfg->user == NULL ||
	    m->cfg->user == NULL || strcmp(ncfg->user, m->cfg->user) != 0 ||
	    ncfg->gid != m->cfg->gid))
		px_log(LOG_WARNING, 0, "reload: user change takes a restart");
	if (strcmp(ncfg->node_name, px_log_node()) != 0)
		px_log(LOG_WARNING, 0, "reload: node name change takes a "
		    "restart (still %s)", px_log_node());
	if (ncfg->store_len != m->cfg->store_len ||
	    memcmp(&ncfg->store, &m->cfg->store, sizeof(ncfg->store)) != 0 ||
	    ncfg->store_timeout_ms != m->cfg->store_timeout_ms ||
	    ncfg->store_error_refuse != m->cfg->store_error_refuse)
		px_log(LOG_WARNING, 0, "reload: cluster store change takes a "
		    "restart");
	px_log_set_json(ncfg->log_json);
	px_log_reconfigure(ncfg->log_target, ncfg->log_file, ncfg->log_level);
	if (px_log_record_open(ncfg->audit_on, ncfg->audit_target,
	    ncfg->audit_file) == -1)
		px_log(LOG_ERR, 0, "reload: audit records still go where they "
		    "went");
	px_workers_reload(ncfg);
	px_config_unref(m->cfg);
	m->cfg = ncfg;
	px_reload_note(&m->reloads, true);
	px_log(LOG_INFO, 0, "reload done: %zu service%s (loaded in %llu ms)",
	    ncfg->nservices, ncfg->nservices == 1 ? "" : "s",
	    (unsigned long long)(px_clock_ms() - rl->started_ms));
	px_log_services(ncfg);
	px_quota_persist(ncfg);
out:
	px_reload_notify_done(m);
	free(rl->text);
	rl->text = NULL;
	px_memory_trim();
	if (rl->trim_ev == NULL)
		rl->trim_ev = evtimer_new(m->base, px_trim_cb, rl);
	if (rl->trim_ev != NULL) {
		struct timeval soon = { 0, 200 * 1000 };

		evtimer_add(rl->trim_ev, &soon);
	}
	if (rl->pending && !m->stopping) {
		rl->pending = false;
		px_reload(m);
	}
}

static void
px_reload(struct px_main *m)
{
	struct px_reload_job *rl = &m->rl;

	if (rl->running) {
		/* Once this one is done, load again: the files may have
		 * changed after the running load read them. */
		rl->pending = true;
		px_log(LOG_INFO, 0, "SIGHUP: a reload is running; another "
		    "follows it");
		return;
	}
	px_log(LOG_INFO, 0, "SIGHUP: reloading %s", m->config_path);
	px_notify_reloading();
	rl->path = m->config_path;
	rl->started_ms = px_clock_ms();
	if (rl->done_ev == NULL) {
		if (pipe2(rl->pipe, O_CLOEXEC | O_NONBLOCK) == -1 ||
		    (rl->done_ev = event_new(m->base, rl->pipe[0],
		    EV_READ | EV_PERSIST, px_reload_done_cb, m)) == NULL ||
		    event_add(rl->done_ev, NULL) == -1) {
			px_log(LOG_ERR, 0, "reload failed: %s; the running "
			    "configuration stays", strerror(errno));
			px_reload_note(&m->reloads, false);
			px_reload_notify_done(m);
			return;
		}
	}
	if ((errno = pthread_create(&rl->tid, NULL, px_reload_thread,
	    rl)) != 0) {
		px_log(LOG_ERR, 0, "reload failed: cannot start its thread: "
		    "%s; the running configuration stays", strerror(errno));
		px_reload_note(&m->reloads, false);
		px_reload_notify_done(m);
		return;
	}
	rl->running = true;
}

static void	px_grace_cb(evutil_socket_t fd, short what, void *arg);

/* A successor said it listens (handover.h): stop accepting, pass the
 * quiet sessions on, drain the rest for the shutdown grace. */
static void
px_handover_ready_cb(void *arg)
{
	struct px_main *m = arg;
	struct timeval now = { 0, 0 };

	px_admin_pass();
	if (m->stopping) {
		/* Draining already (SIGTERM): its grace stands. */
		m->handing = true;
		px_handover_drain();
		return;
	}
	m->stopping = true;
	m->handing = true;
	m->grace_left_ms = m->cfg->shutdown_grace_ms;
	px_log(LOG_INFO, 0, "upgrade: no longer accepting; passing %llu live "
	    "session%s as they are quiet, for up to %llums",
	    (unsigned long long)atomic_load(&px_live_sessions),
	    atomic_load(&px_live_sessions) == 1 ? "" : "s",
	    (unsigned long long)m->grace_left_ms);
	px_handover_drain();
	/* A failed upgrade before this one left its timer. */
	if (m->grace_ev != NULL)
		event_free(m->grace_ev);
	m->grace_ev = evtimer_new(m->base, px_grace_cb, m);
	evtimer_add(m->grace_ev, &now);
}

/* The successor went away after it listened, before this process was
 * done: this one serves again (what it passed is lost with it). */
static void
px_handover_gone_cb(void *arg)
{
	struct px_main *m = arg;

	if (!m->handing || m->forced)
		return;		/* stopping for good anyway */
	m->handing = false;
	m->stopping = false;
	if (m->grace_ev != NULL)
		evtimer_del(m->grace_ev);
	px_admin_unpass();
	px_handover_resume();
	px_log(LOG_WARNING, 0, "upgrade failed: the new process went away; "
	    "accepting again with %llu live session%s",
	    (unsigned long long)atomic_load(&px_live_sessions),
	    atomic_load(&px_live_sessions) == 1 ? "" : "s");
	px_notify_ready("running (an upgrade failed)");
}

/* The new process listens and takes sessions: take the pidfile, write
 * where the old process wrote (proxyd -s upgrade's stdio until now), say
 * so to proxyd -s upgrade (its status pipe) and to systemd. */
static void
px_takeover_done(const struct px_main *m)
{
	const char *sfd = getenv("PROXYD_UPGRADE_STATUS_FD"), *sio;
	char ok[48];
	int fd, n, out, err;

	if (m->cfg->pidfile != NULL && px_pidfile_takeover(m->cfg->pidfile) == -1)
		px_log(LOG_WARNING, 0, "upgrade: pidfile %s: %s", m->cfg->pidfile,
		    strerror(errno));
	px_notify_mainpid((long)getpid(), "running (took over)");
	if ((sio = getenv("PROXYD_UPGRADE_STDIO")) != NULL &&
	    sscanf(sio, "%d,%d", &out, &err) == 2 && out > 2 && err > 2) {
		(void)dup2(out, 1);
		(void)dup2(err, 2);
		close(out);
		close(err);
		(void)unsetenv("PROXYD_UPGRADE_STDIO");
	}
	if (sfd == NULL || (fd = atoi(sfd)) <= 2)
		return;
	n = snprintf(ok, sizeof(ok), "ok %ld\n", (long)getpid());
	if (write(fd, ok, (size_t)n) != n)
		(void)0;	/* it gave up waiting: it says so itself */
	close(fd);
	(void)unsetenv("PROXYD_UPGRADE_STATUS_FD");
}

static void
px_grace_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_main *m = arg;
	struct timeval tick = { 0, 50 * 1000 };

	(void)fd; (void)what;
	if (px_workers_all_exited()) {
		event_base_loopbreak(m->base);
		return;
	}
	/* An upgrade: every session passed or ended, the workers go. */
	if (m->handing && !m->forced &&
	    atomic_load(&px_live_sessions) == 0 && px_handover_finished()) {
		m->forced = true;
		px_workers_command(PX_CMD_STOP);
	}
	if (!m->forced && m->grace_left_ms <= 50) {
		m->forced = true;
		px_log(LOG_WARNING, 0, "shutdown grace over: closing %llu live "
		    "session%s", (unsigned long long)atomic_load(&px_live_sessions),
		    atomic_load(&px_live_sessions) == 1 ? "" : "s");
		px_workers_command(PX_CMD_STOP);
	} else if (!m->forced)
		m->grace_left_ms -= 50;
	evtimer_add(m->grace_ev, &tick);
}

/* logrotate moved the file away: open it again under its name. A
 * failure keeps writing to the old one (px_log_open_target says why on
 * stderr); the next signal tries again. */
static void
px_log_reopen(const struct px_main *m, const char *why)
{
	const struct px_config *c = m->cfg;

	/* The audit file too, quietly: its failure is logged by itself. */
	if (c->audit_on && c->audit_target == PX_LOG_FILE &&
	    px_log_record_open(true, c->audit_target, c->audit_file) == 0)
		px_log(LOG_INFO, 0, "%s: audit file %s reopened", why,
		    c->audit_file);
	if (c->log_target != PX_LOG_FILE) {
		if (strcmp(why, "SIGUSR1") == 0)
			px_log(LOG_INFO, 0, "SIGUSR1: the log target is not a "
			    "file: nothing to reopen");
		return;
	}
	if (px_log_reconfigure(c->log_target, c->log_file, c->log_level) == -1)
		px_log(LOG_ERR, 0, "%s: cannot reopen log file %s; still "
		    "writing to the old one", why, c->log_file);
	else
		px_log(LOG_INFO, 0, "%s: log file %s reopened", why,
		    c->log_file);
}

static void
px_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct px_main *m = arg;
	struct timeval now = { 0, 0 };

	(void)what;
	if (sig == SIGUSR1) {
		px_log_reopen(m, "SIGUSR1");
		return;
	}
	if (sig == SIGHUP) {
		/* Before the reload, whatever becomes of it: a refused
		 * configuration must not leave the rotated file in use. */
		px_log_reopen(m, "SIGHUP");
		if (!m->stopping)
			px_reload(m);
		return;
	}
	if (m->stopping) {
		/* A second SIGTERM/SIGINT: don't wait out the grace. */
		m->grace_left_ms = 0;
		return;
	}
	m->stopping = true;
	m->grace_left_ms = m->cfg->shutdown_grace_ms;
	px_log(LOG_INFO, 0, "%s: no longer accepting; draining %llu live "
	    "session%s for up to %llums", sig == SIGTERM ? "SIGTERM" : "SIGINT",
	    (unsigned long long)atomic_load(&px_live_sessions),
	    atomic_load(&px_live_sessions) == 1 ? "" : "s",
	    (unsigned long long)m->grace_left_ms);
	px_notify_stopping("draining");
	px_workers_command(PX_CMD_DRAIN);
	/* An upgrade that failed left its timer. */
	if (m->grace_ev != NULL)
		event_free(m->grace_ev);
	m->grace_ev = evtimer_new(m->base, px_grace_cb, m);
	evtimer_add(m->grace_ev, &now);
}

/* Drops to cfg's <user> and loads its file again as that user, so that
 * what runs is what a reload would read: a key only root can read fails
 * here, not at the first SIGHUP. Returns the new config (cfg is released)
 * or NULL with the errors reported. */
static struct px_config *
px_config_load_as_user(struct px_config *cfg, struct px_cfgerr *err)
{
	struct px_config *ncfg = NULL;
	char *path = NULL, *user = NULL;

	if (px_privs_drop(cfg, stderr) == -1) {
		err->count++;
		goto out;
	}
	if ((path = strdup(cfg->path)) == NULL ||
	    (user = strdup(cfg->user)) == NULL)
		goto out;
	px_config_unref(cfg);
	cfg = NULL;
	if ((ncfg = px_config_load(path, err)) == NULL)
		fprintf(stderr, "proxyd: %s: the errors above are as user %s "
		    "(uid %ld, gid %ld): proxyd reads its files as that user "
		    "after startup and on reload\n", path, user,
		    (long)getuid(), (long)getgid());
out:
	if (cfg != NULL)
		px_config_unref(cfg);
	free(path);
	free(user);
	return ncfg;
}

static int
px_check(const char *path, const char *trace, const char *trace_dst)
{
	struct px_cfgerr err = { .out = stderr };
	struct px_config *cfg = px_config_load(path, &err);
	size_t i;
	int rc;

	/* The daemon reads its files again as <user> (at start and on every
	 * reload): so does the check, or it would pass what a reload fails. */
	if (cfg != NULL && px_privs_will_drop(cfg))
		cfg = px_config_load_as_user(cfg, &err);
	if (cfg == NULL) {
		fprintf(stderr, "%s: %u error%s\n", path, err.count,
		    err.count == 1 ? "" : "s");
		return 1;
	}
	printf("%s: OK, %u worker%s, %zu service%s\n", path, cfg->workers,
	    cfg->workers == 1 ? "" : "s", cfg->nservices,
	    cfg->nservices == 1 ? "" : "s");
	for (i = 0; i < cfg->nservices; i++) {
		const struct px_service *svc = &cfg->services[i];
		char l[PX_ADDRSTRLEN];

		printf("  %s: %s %s on %s (%s)\n", svc->name, svc->analyser->name,
		    px_mode_name(svc->mode), px_sockaddr_str(
		    (const struct sockaddr *)&svc->listen, l, sizeof(l)), svc->file);
	}
	rc = trace != NULL ? px_trace(cfg, trace, trace_dst, stdout) : 0;
	px_config_unref(cfg);
	return rc;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'k' },
		{ "trace", required_argument, NULL, 't' },
		{ "signal", required_argument, NULL, 's' },
		/* Internal: started by proxyd -s upgrade (handover.h). */
		{ "takeover", required_argument, NULL, 'T' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct px_main m = { .config_path = PX_DEFAULT_CONFIG };
	struct px_cfgerr err = { .out = stderr };
	struct event *sig_term, *sig_int, *sig_hup, *sig_usr1;
	bool check = false;
	const char *trace = NULL, *trace_dst = NULL, *command = NULL;
	long takeover = 0;
	int ch, rc = 1, ho_fd = -1, admin_fd = -1;
	bool was_root = geteuid() == 0;	/* before the drop to <user> */

	while ((ch = getopt_long(argc, argv, "c:s:Vh", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': m.config_path = optarg; break;
		case 'k': check = true; break;
		case 't': trace = optarg; break;
		case 's': command = optarg; break;
		case 'T': takeover = strtol(optarg, NULL, 10); break;
		case 'V': printf("proxyd %s\n", PROXYD_VERSION); return 0;
		case 'h': px_usage(stdout); return 0;
		default: px_usage(stderr); return 2;
		}
	}
	if (trace != NULL) {
		if (!check || optind == argc) {
			fprintf(stderr, "proxyd: --trace CLIENT DEST:PORT goes "
			    "with --check\n");
			return 2;
		}
		trace_dst = argv[optind++];
	}
	if (optind != argc) {
		fprintf(stderr, "proxyd: unexpected argument '%s'\n", argv[optind]);
		px_usage(stderr);
		return 2;
	}
	LIBXML_TEST_VERSION
	xmlInitParser();
	if (px_analyser_registry_check() == -1)
		return 1;
	if (check) {
		rc = px_check(m.config_path, trace, trace_dst);
		xmlCleanupParser();
		return rc;
	}
	if (command != NULL) {
		rc = px_pidfile_command(m.config_path, command);
		xmlCleanupParser();
		return rc;
	}

	if ((m.cfg = px_config_load(m.config_path, &err)) == NULL) {
		fprintf(stderr, "proxyd: %s: %u error%s, not starting\n",
		    m.config_path, err.count, err.count == 1 ? "" : "s");
		return 1;
	}
	/* Before any thread: workers read the name without a lock. */
	px_log_set_node(m.cfg->node_name);
	/* ... and the cluster's quota store (a change takes a restart). */
	if (px_qstore_configure(m.cfg->store_len != 0 ?
	    (const struct sockaddr *)&m.cfg->store : NULL, m.cfg->store_len,
	    m.cfg->store_timeout_ms, m.cfg->store_error_refuse) == -1) {
		fprintf(stderr, "proxyd: %s: cluster store: bad address\n",
		    m.config_path);
		px_config_unref(m.cfg);
		xmlCleanupParser();
		return 1;
	}
	/* A successor: reach the old process while still root (its socket
	 * takes root or its user); the pidfile is taken once listening. */
	if (takeover > 0) {
		if ((ho_fd = px_handover_connect(takeover, m.cfg->user != NULL ?
		    m.cfg->uid : geteuid(), &admin_fd)) == -1) {
			px_config_unref(m.cfg);
			xmlCleanupParser();
			return 1;
		}
		px_admin_use_fd(admin_fd);
	}
	/* As root, before the drop: /run is root's. */
	if (takeover == 0 && m.cfg->pidfile != NULL &&
	    px_pidfile_write(m.cfg->pidfile, m.cfg, stderr) == -1) {
		px_config_unref(m.cfg);
		xmlCleanupParser();
		return 1;
	}
	/* A peer that closes mid-splice must cost an EPIPE, not the process. */
	signal(SIGPIPE, SIG_IGN);
	/* Before any thread starts: capabilities are per thread. Every later
	 * socket (listeners included) is opened with the kept ones. */
	if (px_privs_will_drop(m.cfg)) {
		if ((m.cfg = px_config_load_as_user(m.cfg, &err)) == NULL) {
			fprintf(stderr, "proxyd: %s: not starting\n",
			    m.config_path);
			xmlCleanupParser();
			return 1;
		}
	} else if (px_privs_drop(m.cfg, stderr) == -1)
		goto out_cfg;
	/* Opened as the user it runs as: SIGHUP reopens it (rotation). */
	px_log_set_json(m.cfg->log_json);
	if (px_log_open(m.cfg->log_target, m.cfg->log_file, m.cfg->log_level) == -1)
		goto out_cfg;
	if (px_log_record_open(m.cfg->audit_on, m.cfg->audit_target,
	    m.cfg->audit_file) == -1)
		goto out_cfg;
	px_privs_log(m.cfg);
	/* Up to the hard limit: the same as root or not (no CAP_SYS_RESOURCE
	 * use), and its warning goes to the configured log. */
	px_raise_fd_limit(m.cfg);
	if ((m.base = event_base_new()) == NULL)
		goto out_cfg;
	if (px_admin_start(m.base, m.cfg, &m.reloads) == -1)
		goto out_base;
	if (px_log_start() == -1) {
		fprintf(stderr, "proxyd: cannot start the log thread\n");
		goto out_admin;
	}
	px_quota_restore(&m);
	/* The per-source table: one for the daemon's life, reloads keep it. */
	if (px_sl_init() == -1) {
		fprintf(stderr, "proxyd: out of memory (source limits)\n");
		goto out_log;
	}
	/* A successor binds next to the old process's listeners. */
	if (px_workers_start(m.cfg, takeover == 0) == -1)
		goto out_log;
	if (takeover > 0) {
		if (px_handover_take(m.base, ho_fd, &m.cfg) == -1)
			goto out_log;
		px_log(LOG_INFO, 0, "upgrade: taking the sessions of pid %ld "
		    "over", takeover);
	}
	/* Whoever we are, a later upgrade may take over from us. */
	(void)px_handover_serve(m.base, px_admin_listen_fd(), was_root,
	    px_handover_ready_cb, px_handover_gone_cb, &m);
	sig_term = evsignal_new(m.base, SIGTERM, px_signal_cb, &m);
	sig_int = evsignal_new(m.base, SIGINT, px_signal_cb, &m);
	sig_hup = evsignal_new(m.base, SIGHUP, px_signal_cb, &m);
	sig_usr1 = evsignal_new(m.base, SIGUSR1, px_signal_cb, &m);
	evsignal_add(sig_term, NULL);
	evsignal_add(sig_int, NULL);
	evsignal_add(sig_hup, NULL);
	evsignal_add(sig_usr1, NULL);
	px_log(LOG_INFO, 0, "proxyd %s started: pid %ld, %u worker%s, %zu "
	    "service%s, config %s", PROXYD_VERSION, (long)getpid(),
	    m.cfg->workers, m.cfg->workers == 1 ? "" : "s", m.cfg->nservices,
	    m.cfg->nservices == 1 ? "" : "s", m.config_path);
	px_log_services(m.cfg);
	px_memory_trim();	/* what parsing the policies left */
	if (px_notify_watchdog_start(m.base) == -1)
		px_log(LOG_WARNING, 0, "cannot start the systemd watchdog timer");
	/* Every listener is bound (px_workers_start): clients can connect. */
	if (takeover > 0)
		px_takeover_done(&m);
	else
		px_notify_ready("running");

	event_base_dispatch(m.base);

	px_notify_watchdog_stop();
	if (m.rl.running) {
		pthread_join(m.rl.tid, NULL);
		px_config_unref(m.rl.ncfg);
		free(m.rl.text);
	}
	if (m.rl.trim_ev != NULL)
		event_free(m.rl.trim_ev);
	if (m.rl.done_ev != NULL) {
		event_free(m.rl.done_ev);
		close(m.rl.pipe[0]);
		close(m.rl.pipe[1]);
	}
	px_handover_serve_end();
	px_handover_take_end();
	px_workers_join();
	px_quota_persist(m.cfg);
	px_log(LOG_INFO, 0, "proxyd exiting");
	event_free(sig_term);
	event_free(sig_int);
	event_free(sig_hup);
	event_free(sig_usr1);
	if (m.grace_ev != NULL)
		event_free(m.grace_ev);
	rc = 0;
out_log:
	if (m.quota_ev != NULL)
		event_free(m.quota_ev);
	px_log_stop();
out_admin:
	px_admin_stop();
out_base:
	event_base_free(m.base);
out_cfg:
	if (m.cfg != NULL)
		px_pidfile_remove(m.cfg->pidfile);
	px_config_unref(m.cfg);
	xmlCleanupParser();
	return rc;
}
