/* systemd service notifications (sd_notify): READY once the listeners are
 * up, RELOADING/READY around a SIGHUP reload, STOPPING on drain, and
 * watchdog pings from the main loop when the unit sets WatchdogSec=.
 * Without NOTIFY_SOCKET (not started by systemd) every call does nothing. */
#ifndef PX_NOTIFY_H
#define PX_NOTIFY_H

struct event_base;

void	px_notify_ready(const char *status);
void	px_notify_reloading(void);
/* A rolling upgrade's new process: it is the service's main process now
 * (the unit needs NotifyAccess=all to take it from another pid). */
void	px_notify_mainpid(long pid, const char *status);
void	px_notify_stopping(const char *status);
/* Pings WATCHDOG=1 at half of WATCHDOG_USEC from base's loop; 0 also when
 * no watchdog is asked for, -1 on error. */
int	px_notify_watchdog_start(struct event_base *base);
void	px_notify_watchdog_stop(void);

#endif
