/* Core side of the data channels declared in analyser.h. */
#ifndef PX_CHANNEL_H
#define PX_CHANNEL_H

struct px_session;

/* Frees every channel the session still has, without callbacks: called by
 * px_session_close() after the analyser's on_close. */
void	px_channels_close(struct px_session *s);

#endif
