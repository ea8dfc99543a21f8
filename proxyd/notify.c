/* systemd notifications (notify.h). */
#include "notify.h"

#include <stdint.h>
#include <time.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

static struct event *px_watchdog_ev;

void
px_notify_ready(const char *status)
{
	(void)sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void
px_notify_mainpid(long pid, const char *status)
{
	(void)sd_notifyf(0, "MAINPID=%ld\nREADY=1\nSTATUS=%s", pid, status);
}

void
px_notify_reloading(void)
{
	struct timespec ts;

	/* MONOTONIC_USEC lets systemd >= 253 match the READY=1 that ends
	 * this reload; older ones ignore it. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	(void)sd_notifyf(0, "RELOADING=1\nSTATUS=reloading\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ULL +
	    (unsigned long long)ts.tv_nsec / 1000ULL);
}

void
px_notify_stopping(const char *status)
{
	(void)sd_notifyf(0, "STOPPING=1\nSTATUS=%s", status);
}

static void
px_watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	/* The main loop runs signals, reloads and the admin endpoint: a ping
	 * proves they are served. */
	(void)sd_notify(0, "WATCHDOG=1");
}

int
px_notify_watchdog_start(struct event_base *base)
{
	struct timeval tv;
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return 0;
	usec /= 2;
	tv.tv_sec = (time_t)(usec / 1000000);
	tv.tv_usec = (suseconds_t)(usec % 1000000);
	px_watchdog_ev = event_new(base, -1, EV_PERSIST, px_watchdog_cb, NULL);
	if (px_watchdog_ev == NULL || event_add(px_watchdog_ev, &tv) == -1)
		return -1;
	(void)sd_notify(0, "WATCHDOG=1");
	return 0;
}

void
px_notify_watchdog_stop(void)
{
	if (px_watchdog_ev != NULL)
		event_free(px_watchdog_ev);
	px_watchdog_ev = NULL;
}
