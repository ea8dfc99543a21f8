/* The hold of a scanned body until its verdict (<scan deliver=
 * "after-verdict">, shared by the http, ftp and r66 analysers): the first
 * bytes in memory, up to a bound the caller gives (its limits/@buffer),
 * the rest in an unlinked file of the configured spool directory
 * (<scanners spool=>, opened with O_TMPFILE: nothing to clean up after a
 * crash), at most the scan's max-size in all. Once the verdict is clean
 * the whole is queued on the receiver's output: the memory part moved,
 * the file part as a libevent file segment (sendfile(2) when that output
 * drains to a plain socket, else mapped 1 MiB at a time, each unmapped
 * once written: never copied onto the heap).
 *
 * The file is written by the worker thread (the page cache takes it; a
 * disk that cannot keep up slows that worker). Its directory's free space
 * is checked when the file is opened (room for max-size is needed) and a
 * failed write (ENOSPC) refuses the body: the caller reports why. */
#ifndef PX_SPOOL_H
#define PX_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;
struct px_spool;

/* Where spools go when the daemon file names none. */
#define PX_SPOOL_DIR_DEFAULT	"/var/tmp"

/* A hold of at most max bytes, mem of them in memory, spilling into dir.
 * NULL: out of memory. */
struct px_spool	*px_spool_new(const char *dir, size_t mem, uint64_t max);
/* Moves the first n bytes of src into the hold. 0, or -1 with the reason
 * in *why (static text or the spool's own buffer: until the next call). */
int		 px_spool_add(struct px_spool *sp, struct evbuffer *src,
		    size_t n, const char **why);
/* Bytes held, and those of them in the file. */
uint64_t	 px_spool_length(const struct px_spool *sp);
uint64_t	 px_spool_on_disk(const struct px_spool *sp);
/* Queues everything held on out, in order, and empties the hold (the
 * file stays open as long as out refers to it, or is mapped). to_fd: out
 * is written to a plain socket by evbuffer_write (sendfile); false when
 * it goes through a transform (TLS) that peeks at its bytes. 0, or -1
 * with *why (nothing queued then). */
int		 px_spool_release(struct px_spool *sp, struct evbuffer *out,
		    bool to_fd, const char **why);
/* Drops what is held (its file closed: the space comes back). */
void		 px_spool_free(struct px_spool *sp);
/* A directory spools can be made in: true, or false with *why. At
 * configuration load. */
bool		 px_spool_dir_ok(const char *dir, const char **why);

#endif
