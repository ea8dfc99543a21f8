/* r66peer: a small, strict R66 peer for tests and benchmarks (not a
 * product). Server: accepts connections (one process per connection),
 * authenticates partners, stores received files in a directory after
 * checking their digests, serves files from it. Client: one connection,
 * authentication, then one or more SEND/RECV transfers on it. Anything
 * malformed or unexpected ends the connection; the client then exits
 * non-zero and prints the ErrorPacket it got, if any. Optionally over
 * TLS (OpenSSL; Waarp's TLS port is 6667): every read and write goes
 * through peer_write/peer_read_full. Wire format:
 * plugins/r66/r66_wire.h and R66-WIRE.md. This file holds the usage, the
 * client, the server and main; the frames, digests and a transfer's two
 * halves are in r66peer_io.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "r66/r66_encode.h"
#include "r66/r66_wire.h"

#include "r66peer.h"

static const char *peer_prog = "r66peer";

void
peer_err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", peer_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void
peer_usage(FILE *f)
{
	fprintf(f,
"usage: r66peer server --listen ADDR:PORT --dir DIR --id HOST:PASSWORD\n"
"                      --partner HOST:PASSWORD... [options]\n"
"       r66peer client --connect ADDR:PORT --id HOST:PASSWORD\n"
"                      --partner SERVERHOST:PASSWORD --rule RULE [options]\n"
"                      (--send FILE | --recv NAME)...\n"
"options:\n"
"  --mode N          1 send, 2 recv, 3 sendmd5, 4 recvmd5 (client; --recv\n"
"                    turns 1/3 into 2/4 and --send 2/4 into 1/3; default 1)\n"
"  --block N         block size asked (client) or maximum (server), default 65536\n"
"  --digest ALGO     MD5, SHA-1, SHA-256, SHA-384 or SHA-512 (default SHA-256):\n"
"                    advertised; global hash of what we send; per-block\n"
"                    digests use the partner's advertised algorithm\n"
"  --count N         client: repeat the transfer list N times on the same\n"
"                    connection (SEND remote / RECV local names get .1, .2...)\n"
"  --auth-each       advertise R66 3.5.0: authenticate every channel\n"
"  --dir DIR         server: store/serve files; client: where RECV files go\n"
"  --info TEXT       client: transfer information (request end part)\n"
"  --timeout SEC     socket read timeout (default 60)\n"
"  --quiet           no per-transfer line on stdout\n"
"  --pause-file F    client: after the first transfer print \"paused\" and\n"
"                    wait (up to --timeout) until file F exists\n"
"  --corrupt-block N client: send block rank N of the first file that has\n"
"                    one with a wrong digest (md5 modes); the receiver\n"
"                    answers an ErrorPacket 'M'\n"
"  --announce N      client SEND, server RECV answer: announce N bytes as the\n"
"                    file's size, not its real one (a lying sender)\n"
"  --continue        client: go on with the next transfer after a failed one\n"
"                    on the same connection (exit status 2 at the end);\n"
"                    frames of a failed download still in flight are ignored\n"
"  --keep-on-error   server: a transfer that fails (its checks, or the\n"
"                    client's ErrorPacket) ends its channel only; frames of\n"
"                    it still in flight are ignored (Waarp's way) and the\n"
"                    connection goes on\n"
"TLS (off by default; plain R66 is unchanged without these):\n"
"  --tls             client: speak TLS, verify the server's certificate\n"
"  --tls-ca FILE     client: CAs for the server (default: the system's);\n"
"                    server: require a client certificate signed by them\n"
"  --tls-name NAME   client: SNI and name checked in the server's\n"
"                    certificate (default: the host of --connect; an IP\n"
"                    address is checked, not sent as SNI)\n"
"  --tls-cert FILE   server: its certificate chain (PEM; turns TLS on);\n"
"                    client: a client certificate to present\n"
"  --tls-key FILE    the private key of --tls-cert (PEM)\n"
"exit status: 0 ok, 1 usage, 2 protocol or transfer error (the ErrorPacket\n"
"received, if any, is printed on stderr)\n");
}

/* ---- client ----------------------------------------------------------- */

static int
peer_connect(const char *addr)
{
	char host[256], *colon;
	struct addrinfo hints, *ai, *a;
	int fd = -1, one = 1;

	snprintf(host, sizeof(host), "%s", addr);
	if ((colon = strrchr(host, ':')) == NULL)
		return -1;
	*colon = '\0';
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
		return -1;
	for (a = ai; a != NULL; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM, 0);
		if (fd == -1)
			continue;
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd != -1)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void
peer_timeout(int fd, int sec)
{
	struct timeval tv = { sec, 0 };

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static const char *
peer_base(const char *p)
{
	const char *s = strrchr(p, '/');

	return s != NULL ? s + 1 : p;
}

/* One transfer on its own channel. */
static int
peer_client_xfer(struct peer_conn *pc, const struct peer_xfer *x, int round)
{
	const struct peer_conf *c = pc->c;
	uint32_t cid = 0x1a2b0000u + pc->next_id++, sid = R66_NOCHANNEL;
	struct r66_request rq, an;
	struct r66_frame f;
	struct peer_result res;
	uint8_t b[4096];
	char vers[512], outpath[PATH_MAX], tmppath[PATH_MAX + 8], code;
	int fd = -1, rc = -1;
	size_t n;
	struct stat sb;
	bool md5mode;

	memset(&rq, 0, sizeof(rq));
	snprintf(rq.rule, sizeof(rq.rule), "%s", c->rule);
	rq.mode = c->mode;
	if (x->send && !r66_mode_is_send(rq.mode))
		rq.mode--;
	if (!x->send && r66_mode_is_send(rq.mode))
		rq.mode++;
	if (round > 0 && x->send)
		snprintf(rq.filename, sizeof(rq.filename), "%s.%d",
		    peer_base(x->path), round);
	else
		snprintf(rq.filename, sizeof(rq.filename), "%s",
		    x->send ? peer_base(x->path) : x->path);
	rq.block = c->block;
	rq.id = (int64_t)time(NULL) * 1000 + pc->next_id;
	rq.code = 'i';
	rq.length = -1;
	if (c->info != NULL) {
		rq.info.p = (const uint8_t *)c->info;
		rq.info.len = strlen(c->info);
	}
	if (x->send) {
		if ((fd = open(x->path, O_RDONLY)) == -1 || fstat(fd, &sb) == -1) {
			peer_err("%s: %s", x->path, strerror(errno));
			goto out;
		}
		rq.length = c->announce >= 0 ? c->announce : sb.st_size;
	}

	if (!pc->authed || !pc->reuse) {
		n = r66_encode_authent(b, sizeof(b), R66_NOCHANNEL, cid,
		    c->host_id, c->key, cid, 0, peer_version(c, vers,
		    sizeof(vers)));
		if (peer_write(pc, b, n) == -1 ||
		    peer_expect(pc, &f, R66_AUTHENT, cid, "authentication") == -1)
			goto out;
		if (peer_check_authent(pc, &f, 1) != 0) {
			peer_err("server failed mutual authentication");
			goto out;
		}
		sid = f.src;
		pc->authed = true;
	}
	n = r66_encode_request(b, sizeof(b), sid, cid, &rq);
	if (n == 0 || peer_write(pc, b, n) == -1 ||
	    peer_expect(pc, &f, R66_REQUEST, cid, "request answer") == -1)
		goto out;
	if (r66_request_parse(&f, &an) == -1 || an.way != 1 ||
	    an.mode != rq.mode) {
		peer_err("malformed request answer");
		goto out;
	}
	if (sid != R66_NOCHANNEL && f.src != sid) {
		peer_err("request answer from channel %08x, not %08x", f.src, sid);
		goto out;
	}
	sid = f.src;
	if (an.code != 'i') {
		peer_err("request refused by the server: code=%c", an.code);
		goto out;
	}
	if (an.block < 1 || an.block > (int64_t)c->block) {
		peer_err("server answered block %" PRId64, an.block);
		goto out;
	}
	md5mode = r66_mode_has_digest(rq.mode);
	if (x->send) {
		if (peer_send_data(pc, fd, sid, cid, (uint32_t)an.block, md5mode,
		    &res) == -1 || peer_endrequest_send(pc, sid, cid) == -1)
			goto out;
	} else {
		if (!peer_name_ok(peer_base(an.filename))) {
			peer_err("server sent a bad file name");
			goto out;
		}
		if (round > 0)
			snprintf(outpath, sizeof(outpath), "%s/%s.%d",
			    c->dir != NULL ? c->dir : ".",
			    peer_base(an.filename), round);
		else
			snprintf(outpath, sizeof(outpath), "%s/%s",
			    c->dir != NULL ? c->dir : ".", peer_base(an.filename));
		snprintf(tmppath, sizeof(tmppath), "%s.part", outpath);
		if ((fd = open(tmppath, O_WRONLY | O_CREAT | O_TRUNC, 0644)) == -1) {
			peer_err("%s: %s", tmppath, strerror(errno));
			goto out;
		}
		if (peer_recv_data(pc, fd, sid, cid, (uint32_t)an.block, md5mode,
		    an.length, &res, &code) == -1) {
			/* --continue: as Waarp's receiver does, the sender
			 * hears why, and the channel is over. */
			if (code != '\0' && c->keep_going) {
				peer_send_error(pc, sid, cid, "Transfer failed",
				    code);
				pc->dead = true;
				pc->dead_id = cid;
			}
			unlink(tmppath);
			goto out;
		}
		if (peer_endrequest_recv(pc, sid, cid) == -1 ||
		    rename(tmppath, outpath) == -1) {
			unlink(tmppath);
			goto out;
		}
	}
	if (!c->quiet)
		printf("ok %s file=%s size=%" PRIu64 " blocks=%" PRIu64
		    " mode=%s digest=%s:%s\n", x->send ? "send" : "recv",
		    rq.filename, res.size, res.blocks, r66_mode_name(rq.mode),
		    x->send ? c->digest : pc->peer_digest, res.hash);
	rc = 0;
out:
	if (fd != -1)
		close(fd);
	return rc;
}

/* --pause-file: once, before the second transfer. */
static int
peer_pause(const struct peer_conf *c)
{
	static bool paused;
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	int i;

	if (paused)
		return 0;
	paused = true;
	printf("paused\n");
	fflush(stdout);
	for (i = 0; i < c->timeout * 50; i++) {
		if (access(c->pause_file, F_OK) == 0)
			return 0;
		nanosleep(&ts, NULL);
	}
	peer_err("%s did not appear within %d s", c->pause_file, c->timeout);
	return -1;
}

static int
peer_client(const struct peer_conf *c)
{
	struct peer_conn pc;
	int round, k, rc = 0;

	memset(&pc, 0, sizeof(pc));
	pc.c = c;
	pc.bufcap = c->block + R66_DATA_OVERHEAD + 128;
	if ((pc.buf = malloc(pc.bufcap)) == NULL)
		return 2;
	if ((pc.fd = peer_connect(c->addr)) == -1) {
		peer_err("connect %s: %s", c->addr, strerror(errno));
		free(pc.buf);
		return 2;
	}
	peer_timeout(pc.fd, c->timeout);
	if (c->tls && peer_tls_connect(&pc) == -1)
		rc = 2;
	for (round = 0; round < c->count && (rc == 0 || c->keep_going);
	    round++)
		for (k = 0; k < c->nxfers && (rc == 0 || c->keep_going); k++) {
			if (c->pause_file != NULL && (round > 0 || k > 0) &&
			    peer_pause(c) == -1)
				rc = 2;
			else if (peer_client_xfer(&pc, &c->xfers[k],
			    c->count > 1 ? round + 1 : 0) == -1)
				rc = 2;
		}
	if (pc.late > 0)
		peer_err("%" PRIu64 " late frames of the failed channel %08x "
		    "ignored", pc.late, pc.dead_id);
	peer_tls_close(&pc);
	close(pc.fd);
	free(pc.buf);
	return rc;
}

/* ---- server ----------------------------------------------------------- */

/* Handles one channel whose first frame is f (Authent or, with reuse,
 * Request). 0: channel done, connection goes on; -1: close it. */
static int
peer_server_channel(struct peer_conn *pc, struct r66_frame *f)
{
	const struct peer_conf *c = pc->c;
	uint32_t cid = f->src, sid = 0x00c00000u + pc->next_id++;
	struct r66_request rq;
	struct peer_result res;
	uint8_t b[4096];
	char vers[512], path[PATH_MAX], code;
	int fd = -1, rc = -1, bad;
	struct stat sb;
	bool md5mode;
	size_t n;

	if (f->code == R66_AUTHENT) {
		if ((bad = peer_check_authent(pc, f, 0)) != 0) {
			peer_send_error(pc, cid, sid,
			    "Key is not valid for this HostId", 'A');
			return -1;
		}
		n = r66_encode_authent(b, sizeof(b), cid, sid, c->host_id,
		    c->key, cid, 1, peer_version(c, vers, sizeof(vers)));
		if (peer_write(pc, b, n) == -1)
			return -1;
		pc->authed = true;
		if (peer_recv(pc, f) != 1)
			return -1;
		if (f->code == R66_ERROR) {
			peer_print_error(f, "client");
			return 0;
		}
		if (f->code != R66_REQUEST || f->dst != sid || f->src != cid) {
			peer_err("expected a request on channel %08x", sid);
			return -1;
		}
	} else if (!pc->authed || !pc->reuse || f->code != R66_REQUEST) {
		peer_send_error(pc, cid, sid, "Not authenticated", 'A');
		return -1;
	}
	if (r66_request_parse(f, &rq) == -1 || rq.way != 0 || rq.code != 'i' ||
	    !r66_mode_valid(rq.mode) || rq.mode > 4) {
		peer_err("malformed request");
		peer_send_error(pc, cid, sid, "Malformed request", 'n');
		return -1;
	}
	if (!peer_name_ok(peer_base(rq.filename)) ||
	    strstr(rq.filename, "..") != NULL || rq.filename[0] == '/') {
		peer_send_error(pc, cid, sid, "File name not allowed", 'a');
		return 0;
	}
	if (rq.block < 100)
		rq.block = 65536;
	if (rq.block > (int64_t)c->block)
		rq.block = c->block;
	snprintf(path, sizeof(path), "%s/%s", c->dir, peer_base(rq.filename));
	md5mode = r66_mode_has_digest(rq.mode);
	if (!r66_mode_is_send(rq.mode)) {
		if ((fd = open(path, O_RDONLY)) == -1 || fstat(fd, &sb) == -1 ||
		    !S_ISREG(sb.st_mode)) {
			peer_send_error(pc, cid, sid, "File not found", 'f');
			rc = 0;
			goto out;
		}
		rq.length = c->announce >= 0 ? c->announce : sb.st_size;
	} else {
		snprintf(pc->tmp, sizeof(pc->tmp), "%s/.part.%d.%u", c->dir,
		    (int)getpid(), pc->next_id);
		if ((fd = open(pc->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644)) == -1) {
			peer_err("%s: %s", pc->tmp, strerror(errno));
			pc->tmp[0] = '\0';
			peer_send_error(pc, cid, sid, "Cannot store", 'I');
			goto out;
		}
	}
	rq.way = 1;
	n = r66_encode_request(b, sizeof(b), cid, sid, &rq);
	if (n == 0 || peer_write(pc, b, n) == -1)
		goto out;
	if (r66_mode_is_send(rq.mode)) {
		if (peer_recv_data(pc, fd, cid, sid, (uint32_t)rq.block, md5mode,
		    rq.length, &res, &code) == -1) {
			if (code != '\0')
				peer_send_error(pc, cid, sid, "Transfer failed",
				    code);
			/* Our checks failed, or the client's ErrorPacket
			 * (code '\0') ended the transfer. */
			if (c->keep_on_error) {
				pc->dead = true;
				pc->dead_id = sid;
				rc = 0;
			}
			goto out;
		}
		close(fd);
		fd = -1;
		if (rename(pc->tmp, path) == -1)
			goto out;
		pc->tmp[0] = '\0';
		if (peer_endrequest_recv(pc, cid, sid) == -1)
			goto out;
	} else if (peer_send_data(pc, fd, cid, sid, (uint32_t)rq.block,
	    md5mode, &res) == -1 || peer_endrequest_send(pc, cid, sid) == -1) {
		/* The receiver's ErrorPacket ended the channel. */
		if (c->keep_on_error && pc->peer_error)
			rc = 0;
		pc->peer_error = false;
		goto out;
	}
	if (!c->quiet)
		printf("ok %s file=%s size=%" PRIu64 " blocks=%" PRIu64
		    " mode=%s partner=%s digest=%s\n",
		    r66_mode_is_send(rq.mode) ? "received" : "sent",
		    peer_base(rq.filename), res.size, res.blocks,
		    r66_mode_name(rq.mode), pc->peer_id, res.hash);
	fflush(stdout);
	rc = 0;
out:
	if (fd != -1)
		close(fd);
	if (pc->tmp[0] != '\0') {
		unlink(pc->tmp);
		pc->tmp[0] = '\0';
	}
	return rc;
}

static void
peer_server_conn(const struct peer_conf *c, int fd)
{
	struct peer_conn pc;
	struct r66_frame f;

	memset(&pc, 0, sizeof(pc));
	pc.c = c;
	pc.fd = fd;
	pc.bufcap = c->block + R66_DATA_OVERHEAD + 128;
	if ((pc.buf = malloc(pc.bufcap)) == NULL)
		return;
	peer_timeout(fd, c->timeout);
	if (c->tls && peer_tls_accept(&pc) == -1)
		goto out;
	while (peer_recv(&pc, &f) == 1) {
		if (f.code == R66_ERROR || f.code == R66_CONNERROR) {
			/* a refusal for a channel we no longer track */
			peer_print_error(&f, "client");
			if (f.dst == R66_NOCHANNEL)
				break;
			continue;
		}
		if (f.dst != R66_NOCHANNEL) {
			peer_err("frame for unknown channel %08x", f.dst);
			break;
		}
		if (peer_server_channel(&pc, &f) == -1)
			break;
	}
	if (pc.late > 0)
		peer_err("%" PRIu64 " late frames of the failed channel %08x "
		    "ignored", pc.late, pc.dead_id);
out:
	peer_tls_close(&pc);
	close(fd);
	free(pc.buf);
}

static void
peer_reap(int sig)
{
	int saved = errno;

	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

static int
peer_server(const struct peer_conf *c)
{
	struct addrinfo hints, *ai;
	char host[256], *colon;
	int lfd, one = 1;

	snprintf(host, sizeof(host), "%s", c->addr);
	if ((colon = strrchr(host, ':')) == NULL)
		return 1;
	*colon = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) {
		peer_err("bad listen address %s", c->addr);
		return 1;
	}
	lfd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (lfd == -1 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(lfd, ai->ai_addr, ai->ai_addrlen) == -1 ||
	    listen(lfd, 128) == -1) {
		peer_err("listen %s: %s", c->addr, strerror(errno));
		freeaddrinfo(ai);
		return 2;
	}
	freeaddrinfo(ai);
	/* Reaped, not ignored: the bench reads the sessions' CPU from the
	 * server's cutime/cstime, which only reaped children add to. */
	struct sigaction sa = { .sa_handler = peer_reap, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		pid_t pid;

		if (fd == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			peer_err("accept: %s", strerror(errno));
			return 2;
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if ((pid = fork()) == 0) {
			close(lfd);
			peer_server_conn(c, fd);
			_exit(0);
		}
		if (pid == -1)
			peer_err("fork: %s", strerror(errno));
		close(fd);
	}
}

/* ---- main ------------------------------------------------------------- */

static int
peer_idpw(const char *arg, char *id, size_t idsz, uint8_t key[16])
{
	const char *colon = strchr(arg, ':');

	if (colon == NULL || colon == arg || (size_t)(colon - arg) >= idsz)
		return -1;
	memcpy(id, arg, (size_t)(colon - arg));
	id[colon - arg] = '\0';
	return r66_key_hash(colon + 1, key);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "connect", required_argument, NULL, 'c' },
		{ "id", required_argument, NULL, 'i' },
		{ "partner", required_argument, NULL, 'p' },
		{ "dir", required_argument, NULL, 'd' },
		{ "rule", required_argument, NULL, 'r' },
		{ "mode", required_argument, NULL, 'm' },
		{ "block", required_argument, NULL, 'b' },
		{ "digest", required_argument, NULL, 'g' },
		{ "send", required_argument, NULL, 'S' },
		{ "recv", required_argument, NULL, 'R' },
		{ "count", required_argument, NULL, 'n' },
		{ "auth-each", no_argument, NULL, 'a' },
		{ "info", required_argument, NULL, 'I' },
		{ "timeout", required_argument, NULL, 't' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "pause-file", required_argument, NULL, 'P' },
		{ "corrupt-block", required_argument, NULL, 'x' },
		{ "announce", required_argument, NULL, 'L' },
		{ "continue", no_argument, NULL, 'k' },
		{ "keep-on-error", no_argument, NULL, 'e' },
		{ "tls", no_argument, NULL, 'T' },
		{ "tls-ca", required_argument, NULL, 'A' },
		{ "tls-name", required_argument, NULL, 'N' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct peer_conf c;
	static char self_id[128];
	int o;
	long v;
	char *end;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		peer_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 1 : 0;
	}
	if (strcmp(argv[1], "server") == 0)
		c.server = true;
	else if (strcmp(argv[1], "client") != 0) {
		peer_usage(stderr);
		return 1;
	}
	c.mode = 1;
	c.block = 65536;
	c.digest = "SHA-256";
	c.count = 1;
	c.timeout = 60;
	c.corrupt_block = -1;
	c.announce = -1;
	optind = 2;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'l': case 'c':
			c.addr = optarg;
			break;
		case 'i':
			if (peer_idpw(optarg, self_id, sizeof(self_id), c.key) == -1)
				goto usage;
			c.host_id = self_id;
			break;
		case 'p':
			if (c.npartners == PEER_MAX_PARTNERS ||
			    peer_idpw(optarg, c.partners[c.npartners].id,
			    sizeof(c.partners[0].id),
			    c.partners[c.npartners].key) == -1)
				goto usage;
			c.npartners++;
			break;
		case 'd': c.dir = optarg; break;
		case 'r': c.rule = optarg; break;
		case 'I': c.info = optarg; break;
		case 'a': c.auth_each = true; break;
		case 'q': c.quiet = true; break;
		case 'P': c.pause_file = optarg; break;
		case 'k': c.keep_going = true; break;
		case 'e': c.keep_on_error = true; break;
		case 'T': c.tls = true; break;
		case 'A': c.tls_ca = optarg; break;
		case 'N': c.tls_name = optarg; break;
		case 'C': c.tls_cert = optarg; break;
		case 'K': c.tls_key = optarg; break;
		case 'g':
			if (peer_md(optarg) == NULL)
				goto usage;
			c.digest = optarg;
			break;
		case 'S': case 'R':
			if (c.nxfers == PEER_MAX_XFERS)
				goto usage;
			c.xfers[c.nxfers].send = o == 'S';
			c.xfers[c.nxfers++].path = optarg;
			break;
		case 'm': case 'b': case 'n': case 't': case 'x': case 'L':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || optarg[0] == '\0')
				goto usage;
			if (o == 'm' && v >= 1 && v <= 4)
				c.mode = (int)v;
			else if (o == 'b' && v >= 1 && v <= PEER_BLOCK_MAX)
				c.block = (uint32_t)v;
			else if (o == 'n' && v >= 1 && v <= 100000)
				c.count = (int)v;
			else if (o == 't' && v >= 1 && v <= 3600)
				c.timeout = (int)v;
			else if (o == 'x' && v >= 0)
				c.corrupt_block = v;
			else if (o == 'L' && v >= 0)
				c.announce = v;
			else
				goto usage;
			break;
		case 'h':
			peer_usage(stdout);
			return 0;
		default:
			goto usage;
		}
	}
	if (optind != argc || c.addr == NULL || c.host_id == NULL ||
	    c.npartners == 0)
		goto usage;
	/* TLS: a server needs its certificate (which turns TLS on); a
	 * certificate needs its key; the name is the client's */
	if (c.server && c.tls_cert != NULL)
		c.tls = true;
	if ((c.tls_cert == NULL) != (c.tls_key == NULL) ||
	    (c.server && c.tls && c.tls_cert == NULL) ||
	    (c.server && c.tls_name != NULL) ||
	    (!c.tls && (c.tls_ca != NULL || c.tls_name != NULL ||
	    c.tls_cert != NULL)))
		goto usage;
	if (c.tls) {
		if ((c.tls_ctx = peer_tls_ctx(&c)) == NULL)
			return 2;
		signal(SIGPIPE, SIG_IGN);	/* OpenSSL writes with write(2) */
	}
	if (c.server) {
		if (c.dir == NULL)
			goto usage;
		return peer_server(&c);
	}
	if (c.rule == NULL || c.nxfers == 0)
		goto usage;
	o = peer_client(&c);
	SSL_CTX_free(c.tls_ctx);
	return o;
usage:
	peer_usage(stderr);
	return 1;
}
