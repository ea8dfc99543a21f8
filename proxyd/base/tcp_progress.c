/* How far the kernel got with a TCP socket (tcp_progress.h). A separate
 * file: the fields needed are only in <linux/tcp.h>, which clashes with
 * <netinet/tcp.h> used elsewhere. */
#include "tcp_progress.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>

uint64_t
px_tcp_progress(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (fd == -1 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1 ||
	    len < sizeof(ti))
		return 0;
	return ti.tcpi_bytes_acked + ti.tcpi_bytes_received;
}

void
px_tcp_connect_note(int fd, char *buf, size_t size)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1)
		snprintf(buf, size, "connecting");
	else
		snprintf(buf, size, "connecting, tcp state %u, %u SYNs again",
		    (unsigned)ti.tcpi_state, (unsigned)ti.tcpi_total_retrans);
}
