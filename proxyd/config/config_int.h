/* What the two files of the configuration loader share (config.c: the
 * daemon file, the policies directory, the listen groups, the XML
 * reading and the element helpers; config_service.c: one service file),
 * and nothing else includes. */
#ifndef PX_CONFIG_INT_H
#define PX_CONFIG_INT_H

#include <stdbool.h>
#include <sys/socket.h>

#include <libxml/tree.h>

#include "config.h"

/* The first child element of parent called name, or NULL. */
xmlNodePtr px_child(xmlNodePtr parent, const char *name);
/* Reports each child element given twice (one <tls> per side; any
 * number of <content> and <fingerprint>). */
void	px_check_repeats(xmlNodePtr parent, struct px_cfgerr *e);
/* n's address= and port= into ss: 0, or -1 after reporting. */
int	px_attr_endpoint(struct px_cfgerr *e, xmlNodePtr n,
	    struct sockaddr_storage *ss, socklen_t *len);
/* 1..64 of A-Z a-z 0-9 . _ - (a service's or a node's name). */
bool	px_valid_name(const char *s);

/* config_service.c */
/* One service file's root into svc (svc->file set), against c's daemon
 * file (zones, scanners, authenticators, defaults): 0, or -1 after
 * reporting. */
int	px_load_service(struct px_config *c, struct px_service *svc,
	    xmlNodePtr root, struct px_cfgerr *e);

#endif
