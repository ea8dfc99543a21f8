/* The analysers built into proxyd. Listed here by hand, not by constructors:
 * a static archive drops objects nothing references. */
#include "analyser.h"

extern const struct px_analyser plug_analyser;
extern const struct px_analyser http_analyser;
extern const struct px_analyser r66_analyser;
extern const struct px_analyser ftp_analyser;

const struct px_analyser *const px_analysers[] = {
	&plug_analyser,
	&http_analyser,
	&r66_analyser,
	&ftp_analyser,
	NULL,
};
