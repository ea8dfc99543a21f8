/* The cluster's members as an existing engine knows them: cluster/@members-
 * file names a file that something outside proxyd keeps written (the
 * lab's poller of the routers' FRR: which nodes' BGP sessions are up and
 * which of them still announce the service address; deploy/README.md,
 * "Cluster-wide state"), one line per node, "NAME STATE" (a '#' line is a
 * comment, words after the state are ignored). proxyd agrees with nobody
 * itself: it shows what the file says, in /metrics (proxyd_cluster_member,
 * the file's mtime as proxyd_cluster_members_updated_timestamp_seconds:
 * a stale view shows), in /status and /api/services ("cluster") and on
 * the status page. Read at each scrape on the admin thread, like the HA
 * state file: O_NONBLOCK, regular files only, the first 64 KiB and 256
 * members; a malformed line is skipped. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "admin_int.h"

#define PX_MEMBERS_MAX		256
#define PX_MEMBERS_FILE_MAX	65536
#define PX_MEMBER_NAME_MAX	64
#define PX_MEMBER_STATE_MAX	16

struct px_member {
	char	name[PX_MEMBER_NAME_MAX + 1];
	char	state[PX_MEMBER_STATE_MAX + 1];
};

static char *px_members_path;

int
px_members_configure(const char *path)
{
	free(px_members_path);
	px_members_path = NULL;
	if (path != NULL && (px_members_path = strdup(path)) == NULL)
		return -1;
	return 0;
}

/* A word of len bytes at p into out (size max+1): false when empty, too
 * long, or with a byte a node name (A-Z a-z 0-9 . _ -) or a state
 * (a-z -) may not have. */
static bool
px_member_word(const char *p, size_t len, size_t max, bool name, char *out)
{
	size_t i;
	char c;

	if (len == 0 || len > max)
		return false;
	for (i = 0; i < len; i++) {
		c = p[i];
		if (!((c >= 'a' && c <= 'z') || c == '-' || (name &&
		    ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '_'))))
			return false;
	}
	memcpy(out, p, len);
	out[len] = '\0';
	return true;
}

/* The file's members into m (at most PX_MEMBERS_MAX); -1: no file to
 * read (none named, missing, not a regular file). */
static int
px_members_read(struct px_member *m, size_t *n, time_t *mtime)
{
	struct stat st;
	char *buf, *line, *end, *p;
	size_t nw, len;
	ssize_t r;
	int fd;

	*n = 0;
	*mtime = 0;
	if (px_members_path == NULL || (fd = open(px_members_path,
	    O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    (buf = malloc(PX_MEMBERS_FILE_MAX + 1)) == NULL) {
		close(fd);
		return -1;
	}
	r = read(fd, buf, PX_MEMBERS_FILE_MAX);
	close(fd);
	if (r < 0) {
		free(buf);
		return -1;
	}
	buf[r] = '\0';
	*mtime = st.st_mtime;
	for (line = buf; *line != '\0' && *n < PX_MEMBERS_MAX; line = end) {
		if ((end = strchr(line, '\n')) == NULL)
			end = line + strlen(line);
		else
			*end++ = '\0';
		p = line + strspn(line, " \t");
		if (*p == '#')
			continue;
		nw = strcspn(p, " \t\r");
		if (!px_member_word(p, nw, PX_MEMBER_NAME_MAX, true,
		    m[*n].name))
			continue;
		p += nw;
		p += strspn(p, " \t");
		len = strcspn(p, " \t\r");
		if (px_member_word(p, len, PX_MEMBER_STATE_MAX, false,
		    m[*n].state))
			(*n)++;
	}
	free(buf);
	return 0;
}

void
px_members_metrics(struct evbuffer *b)
{
	struct px_member *m;
	size_t i, n = 0;
	time_t mtime = 0;

	if (px_members_path == NULL)
		return;
	if ((m = calloc(PX_MEMBERS_MAX, sizeof(*m))) == NULL)
		return;
	(void)px_members_read(m, &n, &mtime);
	evbuffer_add_printf(b, "# HELP proxyd_cluster_member The cluster's "
	    "nodes and their states as cluster/@members-file says (the "
	    "routing engine's view): 1 per node.\n"
	    "# TYPE proxyd_cluster_member gauge\n");
	/* Names and states have no character a label value escapes. */
	for (i = 0; i < n; i++)
		evbuffer_add_printf(b, "proxyd_cluster_member{node=\"%s\","
		    "state=\"%s\"} 1\n", m[i].name, m[i].state);
	evbuffer_add_printf(b, "# HELP proxyd_cluster_members_updated_"
	    "timestamp_seconds When cluster/@members-file was last written "
	    "(0: it cannot be read).\n"
	    "# TYPE proxyd_cluster_members_updated_timestamp_seconds gauge\n"
	    "proxyd_cluster_members_updated_timestamp_seconds %lld\n",
	    (long long)mtime);
	free(m);
}

void
px_members_json(struct evbuffer *b)
{
	struct px_member *m;
	size_t i, n = 0;
	time_t mtime = 0;

	if (px_members_path == NULL)
		return;
	if ((m = calloc(PX_MEMBERS_MAX, sizeof(*m))) == NULL)
		return;
	(void)px_members_read(m, &n, &mtime);
	evbuffer_add_printf(b, ",\"cluster\":{\"updated\":%lld,\"members\":[",
	    (long long)mtime);
	for (i = 0; i < n; i++)
		evbuffer_add_printf(b, "%s{\"node\":\"%s\",\"state\":\"%s\"}",
		    i ? "," : "", m[i].name, m[i].state);
	evbuffer_add_printf(b, "]}");
	free(m);
}
