/* The hold of a scanned body until its verdict: memory, then an unlinked
 * file (spool.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE		/* O_TMPFILE */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "spool.h"

struct px_spool {
	const char	*dir;		/* the configuration's: outlives it */
	size_t		 mem_max;
	uint64_t	 max;
	struct evbuffer	*mem;		/* the first bytes */
	int		 fd;		/* -1: none yet */
	uint64_t	 disk;		/* bytes in the file */
	char		 why[160];
};

struct px_spool *
px_spool_new(const char *dir, size_t mem, uint64_t max)
{
	struct px_spool *sp;

	if ((sp = calloc(1, sizeof(*sp))) == NULL)
		return NULL;
	if ((sp->mem = evbuffer_new()) == NULL) {
		free(sp);
		return NULL;
	}
	sp->dir = dir != NULL ? dir : PX_SPOOL_DIR_DEFAULT;
	sp->mem_max = mem;
	sp->max = max;
	sp->fd = -1;
	return sp;
}

/* The file, at the first byte past memory: room for what may still come
 * (max-size less what memory holds) is checked first. */
static int
px_spool_open(struct px_spool *sp, const char **why)
{
	struct statvfs vfs;
	uint64_t need = sp->max - evbuffer_get_length(sp->mem), avail;

	if (statvfs(sp->dir, &vfs) == -1) {
		snprintf(sp->why, sizeof(sp->why), "spool %s: %s", sp->dir,
		    strerror(errno));
		*why = sp->why;
		return -1;
	}
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (avail < need) {
		snprintf(sp->why, sizeof(sp->why), "spool %s: %llu bytes "
		    "free, the scan's max-size needs %llu", sp->dir,
		    (unsigned long long)avail, (unsigned long long)need);
		*why = sp->why;
		return -1;
	}
	if ((sp->fd = open(sp->dir, O_TMPFILE | O_RDWR | O_CLOEXEC,
	    0600)) == -1) {
		snprintf(sp->why, sizeof(sp->why), "spool %s: %s", sp->dir,
		    strerror(errno));
		*why = sp->why;
		return -1;
	}
	return 0;
}

int
px_spool_add(struct px_spool *sp, struct evbuffer *src, size_t n,
    const char **why)
{
	size_t inmem = evbuffer_get_length(sp->mem), k;
	int w;

	if (px_spool_length(sp) + n > sp->max) {
		*why = "spool: over the scan's max-size";
		return -1;
	}
	if (sp->fd == -1 && inmem < sp->mem_max) {
		k = sp->mem_max - inmem < n ? sp->mem_max - inmem : n;
		if (evbuffer_remove_buffer(src, sp->mem, k) != (int)k) {
			*why = "spool: out of memory";
			return -1;
		}
		n -= k;
	}
	if (n == 0)
		return 0;
	if (sp->fd == -1 && px_spool_open(sp, why) == -1)
		return -1;
	while (n > 0) {
		w = evbuffer_write_atmost(src, sp->fd, (ssize_t)n);
		if (w <= 0) {
			if (w == -1 && errno == EINTR)
				continue;
			snprintf(sp->why, sizeof(sp->why), "spool %s: %s",
			    sp->dir, w == 0 ? "short write" : strerror(errno));
			*why = sp->why;
			return -1;
		}
		n -= (size_t)w;
		sp->disk += (uint64_t)w;
	}
	return 0;
}

uint64_t
px_spool_length(const struct px_spool *sp)
{
	return evbuffer_get_length(sp->mem) + sp->disk;
}

uint64_t
px_spool_on_disk(const struct px_spool *sp)
{
	return sp->disk;
}

/* A file released to an output that is not a plain socket goes as a row
 * of segments of this size, each mapped when queued and unmapped once
 * written: the bytes resident for it stay about one segment, not the file
 * (one mapping of a 1 GB file counted 1 GB of RSS by its end). */
#define PX_SPOOL_MAP_STEP	(1024 * 1024)

int
px_spool_release(struct px_spool *sp, struct evbuffer *out, bool to_fd,
    const char **why)
{
	struct evbuffer_file_segment *seg;
	struct evbuffer *all;
	ev_off_t off, n;

	if (sp->disk != 0 && to_fd) {
		/* One segment, sent by sendfile; it owns the descriptor from
		 * here: closed when out has written (or dropped) its last
		 * byte. */
		if ((seg = evbuffer_file_segment_new(sp->fd, 0,
		    (ev_off_t)sp->disk, EVBUF_FS_CLOSE_ON_FREE)) == NULL) {
			*why = "spool: cannot queue the file";
			return -1;
		}
		sp->fd = -1;
		/* (a chain made to be sent by sendfile keeps its kind when
		 * moved from one buffer to another) */
		if ((all = evbuffer_new()) == NULL ||
		    evbuffer_set_flags(all, EVBUFFER_FLAG_DRAINS_TO_FD) == -1 ||
		    evbuffer_add_file_segment(all, seg, 0,
		    (ev_off_t)sp->disk) == -1) {
			if (all != NULL)
				evbuffer_free(all);
			evbuffer_file_segment_free(seg);	/* closes it */
			sp->disk = 0;
			*why = "spool: cannot queue the file";
			return -1;
		}
		evbuffer_file_segment_free(seg);	/* all's reference */
		evbuffer_set_flags(out, EVBUFFER_FLAG_DRAINS_TO_FD);
		evbuffer_add_buffer(out, sp->mem);
		evbuffer_add_buffer(out, all);
		evbuffer_free(all);
		sp->disk = 0;
		return 0;
	}
	if (sp->disk != 0) {
		/* Mapped segments (libevent maps each as it is queued, so
		 * the descriptor, closed with the spool, is not needed
		 * after), gathered apart: nothing is queued on a failure. */
		if ((all = evbuffer_new()) == NULL) {
			*why = "spool: out of memory";
			return -1;
		}
		for (off = 0; off < (ev_off_t)sp->disk; off += n) {
			n = (ev_off_t)sp->disk - off < PX_SPOOL_MAP_STEP ?
			    (ev_off_t)sp->disk - off : PX_SPOOL_MAP_STEP;
			if ((seg = evbuffer_file_segment_new(sp->fd, off, n,
			    EVBUF_FS_DISABLE_SENDFILE)) == NULL ||
			    evbuffer_add_file_segment(all, seg, 0, n) == -1) {
				if (seg != NULL)
					evbuffer_file_segment_free(seg);
				evbuffer_free(all);
				*why = "spool: cannot map the file";
				return -1;
			}
			evbuffer_file_segment_free(seg);	/* all's */
		}
		evbuffer_add_buffer(out, sp->mem);
		evbuffer_add_buffer(out, all);
		evbuffer_free(all);
		sp->disk = 0;
		return 0;
	}
	evbuffer_add_buffer(out, sp->mem);
	return 0;
}

void
px_spool_free(struct px_spool *sp)
{
	if (sp == NULL)
		return;
	if (sp->fd != -1)
		close(sp->fd);
	evbuffer_free(sp->mem);
	free(sp);
}

bool
px_spool_dir_ok(const char *dir, const char **why)
{
	struct stat st;

	if (dir[0] != '/') {
		*why = "not an absolute path";
		return false;
	}
	if (stat(dir, &st) == -1) {
		*why = strerror(errno);
		return false;
	}
	if (!S_ISDIR(st.st_mode)) {
		*why = "not a directory";
		return false;
	}
	return true;
}
