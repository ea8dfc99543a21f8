/* LDAP checks (libldap), on an auth thread (auth.h). A password: a
 * connection to url=, a bind as bind-dn (or anonymous), a search under
 * base-dn for user-filter with %u the typed name (escaped, RFC 4515) that
 * must find exactly one entry, whose group-attribute values are the
 * user's groups, then a simple bind as that entry's DN with the password.
 * Every operation is asynchronous and waited for with what is left of the
 * check's timeout= (the connect too: LDAP_OPT_NETWORK_TIMEOUT), so a
 * directory that accepts and never answers costs one auth thread that
 * long, and no more. The answer (groups, the password's hash) is cached
 * for cache=. */
#include "auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define LDAP_DEPRECATED 0
#include <ldap.h>

int
px_ldap_filter(const char *tmpl, const char *user, size_t ulen, char *out,
    size_t size)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, i;

#define PX_PUT(ch) do { if (o + 1 >= size) return -1; out[o++] = (ch); } while (0)
	for (; *tmpl != '\0'; tmpl++) {
		if (tmpl[0] != '%' || (tmpl[1] != 'u' && tmpl[1] != '%')) {
			PX_PUT(*tmpl);
			continue;
		}
		tmpl++;
		if (*tmpl == '%') {
			PX_PUT('%');
			continue;
		}
		for (i = 0; i < ulen; i++) {
			unsigned char ch = (unsigned char)user[i];

			if (ch == '*' || ch == '(' || ch == ')' || ch == '\\' ||
			    ch == '\0') {
				PX_PUT('\\');
				PX_PUT(hex[ch >> 4]);
				PX_PUT(hex[ch & 15]);
			} else
				PX_PUT((char)ch);
		}
	}
#undef PX_PUT
	out[o] = '\0';
	return 0;
}

int
px_auth_ldap_url_ok(const char *url, const char **why)
{
	LDAPURLDesc *d = NULL;
	int v3 = LDAP_VERSION3;

	/* libldap sets up its globals at its first call, which must not be
	 * two auth threads' at once: here, on the main thread, at load. */
	ldap_set_option(NULL, LDAP_OPT_PROTOCOL_VERSION, &v3);

	if (strncmp(url, "ldap://", 7) != 0 && strncmp(url, "ldaps://", 8) != 0 &&
	    strncmp(url, "ldapi://", 8) != 0) {
		*why = "expected ldap://, ldaps:// or ldapi://";
		return -1;
	}
	if (ldap_url_parse(url, &d) != LDAP_URL_SUCCESS) {
		*why = "not an LDAP URL";
		return -1;
	}
	ldap_free_urldesc(d);
	return 0;
}

/* What is left of r's time, at least 1 ms; false when none is. */
static bool
px_ldap_left(const struct px_auth_req *r, struct timeval *tv)
{
	uint64_t now = px_auth_now_us();

	if (now >= r->deadline_us)
		return false;
	tv->tv_sec = (time_t)((r->deadline_us - now) / 1000000u);
	tv->tv_usec = (suseconds_t)((r->deadline_us - now) % 1000000u);
	if (tv->tv_sec == 0 && tv->tv_usec < 1000)
		tv->tv_usec = 1000;
	return true;
}

static void
px_ldap_fail(struct px_auth_req *r, enum px_auth_result res,
    const char *what, int rc)
{
	r->result = rc == LDAP_TIMEOUT ? PX_AUTH_TIMEOUT : res;
	snprintf(r->reason, sizeof(r->reason), "%s: %s", what,
	    rc == LDAP_TIMEOUT ? "no answer within timeout" :
	    ldap_err2string(rc));
}

/* Waits for msgid's result within r's time: the LDAP code, the reply in
 * *res (the caller frees it), or LDAP_TIMEOUT. */
static int
px_ldap_wait(LDAP *ld, struct px_auth_req *r, int msgid, LDAPMessage **res)
{
	struct timeval tv;
	int rc;

	*res = NULL;
	if (!px_ldap_left(r, &tv))
		return LDAP_TIMEOUT;
	rc = ldap_result(ld, msgid, LDAP_MSG_ALL, &tv, res);
	if (rc == 0)
		return LDAP_TIMEOUT;
	if (rc == -1) {
		ldap_get_option(ld, LDAP_OPT_RESULT_CODE, &rc);
		return rc != LDAP_SUCCESS ? rc : LDAP_SERVER_DOWN;
	}
	return LDAP_SUCCESS;
}

/* A simple bind: LDAP_SUCCESS, the server's code, or LDAP_TIMEOUT. */
static int
px_ldap_bind(LDAP *ld, struct px_auth_req *r, const char *dn,
    const char *pw, size_t pwlen)
{
	struct berval cred = { .bv_val = (char *)(pw != NULL ? pw : ""),
	    .bv_len = pw != NULL ? pwlen : 0 };
	LDAPMessage *res;
	int msgid, rc, err = LDAP_OTHER;

	rc = ldap_sasl_bind(ld, dn != NULL ? dn : "", LDAP_SASL_SIMPLE, &cred,
	    NULL, NULL, &msgid);
	if (rc != LDAP_SUCCESS)
		return rc;
	if ((rc = px_ldap_wait(ld, r, msgid, &res)) != LDAP_SUCCESS)
		return rc;
	if (ldap_parse_result(ld, res, &err, NULL, NULL, NULL, NULL, 1) !=
	    LDAP_SUCCESS)
		return LDAP_OTHER;
	return err;
}

static LDAP *
px_ldap_open(struct px_authn *an, struct px_auth_req *r)
{
	LDAP *ld = NULL;
	int v3 = LDAP_VERSION3, rc;
	struct timeval tv;

	if ((rc = ldap_initialize(&ld, an->url)) != LDAP_SUCCESS) {
		px_ldap_fail(r, PX_AUTH_DIRECTORY_DOWN, "connect", rc);
		return NULL;
	}
	ldap_set_option(ld, LDAP_OPT_PROTOCOL_VERSION, &v3);
	ldap_set_option(ld, LDAP_OPT_REFERRALS, LDAP_OPT_OFF);
	if (px_ldap_left(r, &tv))
		ldap_set_option(ld, LDAP_OPT_NETWORK_TIMEOUT, &tv);
	return ld;
}

/* The attribute the user name is compared with: NAME of the first
 * "(NAME=%u)" in the filter, into buf; "" when the filter has none. */
static void
px_ldap_name_attr(const char *filter, char *buf, size_t size)
{
	const char *p, *q;

	buf[0] = '\0';
	for (p = strstr(filter, "=%u)"); p != NULL; p = NULL) {
		for (q = p; q > filter && q[-1] != '('; q--)
			;
		if (q == filter || (size_t)(p - q) >= size || p == q)
			return;
		memcpy(buf, q, (size_t)(p - q));
		buf[p - q] = '\0';
	}
}

/* The service's bind, then the one entry the filter finds: its DN in
 * *dn (ldap_memfree) and its groups into r->id. The user's name becomes
 * the entry's own value of the attribute the filter compares it with
 * (it must have exactly one), so that "ALICE" or "alice " is alice to
 * user= as it is to the directory. -1: r says why. */
static int
px_ldap_find(LDAP *ld, struct px_authn *an, struct px_auth_req *r,
    const char *user, char **dn)
{
	char filter[1024];
	char name_attr[64];
	char *attrs[3] = { NULL, NULL, NULL };
	LDAPMessage *res = NULL, *msg, *entry = NULL;
	struct timeval tv;
	struct berval **vals;
	int rc, msgid, n = 0, err = LDAP_SUCCESS;
	size_t i, len = 0;
	char *g;

	*dn = NULL;
	px_ldap_name_attr(an->user_filter, name_attr, sizeof(name_attr));
	n = 0;
	if (an->group_attr != NULL)
		attrs[n++] = an->group_attr;
	if (name_attr[0] != '\0')
		attrs[n++] = name_attr;
	if (n == 0)
		attrs[n++] = (char *)LDAP_NO_ATTRS;
	n = 0;
	rc = px_ldap_bind(ld, r, an->bind_dn, an->bind_pw,
	    an->bind_pw != NULL ? strlen(an->bind_pw) : 0);
	if (rc != LDAP_SUCCESS) {
		px_ldap_fail(r, PX_AUTH_DIRECTORY_DOWN, "service bind", rc);
		return -1;
	}
	if (px_ldap_filter(an->user_filter, user, strlen(user), filter,
	    sizeof(filter)) == -1) {
		r->result = PX_AUTH_NO_USER;
		snprintf(r->reason, sizeof(r->reason), "user name too long");
		return -1;
	}
	if (!px_ldap_left(r, &tv)) {
		px_ldap_fail(r, PX_AUTH_TIMEOUT, "search", LDAP_TIMEOUT);
		return -1;
	}
	rc = ldap_search_ext(ld, an->base_dn, LDAP_SCOPE_SUBTREE, filter,
	    attrs, 0, NULL, NULL, &tv, 2, &msgid);
	if (rc == LDAP_SUCCESS)
		rc = px_ldap_wait(ld, r, msgid, &res);
	if (rc != LDAP_SUCCESS) {
		px_ldap_fail(r, PX_AUTH_DIRECTORY_DOWN, "search", rc);
		return -1;
	}
	for (msg = ldap_first_message(ld, res); msg != NULL;
	    msg = ldap_next_message(ld, msg)) {
		if (ldap_msgtype(msg) == LDAP_RES_SEARCH_ENTRY) {
			if (n++ == 0)
				entry = msg;
		} else if (ldap_msgtype(msg) == LDAP_RES_SEARCH_RESULT)
			ldap_parse_result(ld, msg, &err, NULL, NULL, NULL,
			    NULL, 0);
	}
	if (n != 1) {
		r->result = err != LDAP_SUCCESS && err !=
		    LDAP_SIZELIMIT_EXCEEDED && n == 0 ?
		    PX_AUTH_DIRECTORY_DOWN : PX_AUTH_NO_USER;
		snprintf(r->reason, sizeof(r->reason), "%s",
		    n == 0 && err != LDAP_SUCCESS ? ldap_err2string(err) :
		    n == 0 ? "no entry matches user-filter" :
		    "user-filter matches more than one entry");
		ldap_msgfree(res);
		return -1;
	}
	/* The user is who the directory says: the entry's one value of the
	 * attribute the filter matched, whatever the typed spelling ("alice ",
	 * "ALICE" match alice under the usual matching rules). An entry
	 * without exactly one such value (or a filter naming none) proves no
	 * name. */
	vals = name_attr[0] != '\0' ? ldap_get_values_len(ld, entry,
	    name_attr) : NULL;
	if (vals == NULL || vals[0] == NULL || vals[1] != NULL ||
	    vals[0]->bv_len == 0 || vals[0]->bv_len >= sizeof(r->id.user) ||
	    memchr(vals[0]->bv_val, '\0', vals[0]->bv_len) != NULL) {
		r->result = PX_AUTH_NO_USER;
		snprintf(r->reason, sizeof(r->reason), "entry without a single "
		    "value of %s", name_attr[0] != '\0' ? name_attr :
		    "the user-filter's attribute");
		if (vals != NULL)
			ldap_value_free_len(vals);
		ldap_msgfree(res);
		return -1;
	}
	memcpy(r->id.user, vals[0]->bv_val, vals[0]->bv_len);
	r->id.user[vals[0]->bv_len] = '\0';
	ldap_value_free_len(vals);
	*dn = ldap_get_dn(ld, entry);
	if (an->group_attr != NULL && (vals = ldap_get_values_len(ld, entry,
	    an->group_attr)) != NULL) {
		for (i = 0; vals[i] != NULL; i++)
			len += vals[i]->bv_len + 1;
		if ((g = malloc(len + 1)) != NULL) {
			size_t o = 0;

			for (i = 0; vals[i] != NULL; i++) {
				memcpy(g + o, vals[i]->bv_val, vals[i]->bv_len);
				o += vals[i]->bv_len;
				g[o++] = '\0';
			}
			g[o++] = '\0';
			free(r->id.groups);
			r->id.groups = g;
			r->id.groups_len = o;
		}
		ldap_value_free_len(vals);
	}
	ldap_msgfree(res);
	if (*dn == NULL) {
		r->result = PX_AUTH_ERROR;
		snprintf(r->reason, sizeof(r->reason), "entry without a DN");
		return -1;
	}
	return 0;
}

void
px_auth_ldap_check(struct px_auth_req *r)
{
	struct px_authn *an = r->an;
	LDAP *ld;
	char *dn = NULL, *g;
	size_t glen;
	int rc;

	snprintf(r->id.user, sizeof(r->id.user), "%s", r->user);
	r->id.method = r->method;
	/* An empty password binds unauthenticated (RFC 4513 5.1.2), as
	 * anyone: never a proof. */
	if (r->user[0] == '\0' || r->secret_len == 0) {
		r->result = PX_AUTH_BAD_PASSWORD;
		snprintf(r->reason, sizeof(r->reason), "empty %s",
		    r->user[0] == '\0' ? "user name" : "password");
		return;
	}
	rc = px_auth_cache_get(an->cache, r->user, r->secret, r->secret_len,
	    px_auth_now_us() / 1000u, &g, &glen, r->id.user,
	    sizeof(r->id.user));
	if (rc == 1) {
		free(r->id.groups);
		r->id.groups = g;
		r->id.groups_len = glen;
		r->result = PX_AUTH_OK;
		snprintf(r->reason, sizeof(r->reason), "cached");
		return;
	}
	if ((ld = px_ldap_open(an, r)) == NULL)
		return;
	if (px_ldap_find(ld, an, r, r->user, &dn) == -1)
		goto out;
	rc = px_ldap_bind(ld, r, dn, (const char *)r->secret, r->secret_len);
	if (rc == LDAP_INVALID_CREDENTIALS) {
		r->result = PX_AUTH_BAD_PASSWORD;
		snprintf(r->reason, sizeof(r->reason), "bind as the user "
		    "refused: %s", ldap_err2string(rc));
	} else if (rc != LDAP_SUCCESS)
		px_ldap_fail(r, PX_AUTH_DIRECTORY_DOWN, "bind as the user", rc);
	else {
		r->result = PX_AUTH_OK;
		px_auth_cache_put(an->cache, r->user, r->id.user, r->secret,
		    r->secret_len, r->id.groups, r->id.groups_len, px_auth_now_us() / 1000u,
		    an->cache_ms);
	}
out:
	if (dn != NULL)
		ldap_memfree(dn);
	ldap_unbind_ext_s(ld, NULL, NULL);
}

void
px_auth_ldap_groups(struct px_authn *an, struct px_auth_req *r)
{
	LDAP *ld;
	char *dn = NULL, *g, key[sizeof(r->id.user)];
	size_t glen;
	struct px_authn *was = r->an;

	if (px_auth_cache_get(an->cache, r->id.user, NULL, 0,
	    px_auth_now_us() / 1000u, &g, &glen, NULL, 0) == 1) {
		free(r->id.groups);
		r->id.groups = g;
		r->id.groups_len = glen;
		return;
	}
	/* The directory's timeout bounds this part. */
	if (an->timeout_ms < was->timeout_ms)
		r->deadline_us = px_auth_now_us() + an->timeout_ms * 1000u;
	if ((ld = px_ldap_open(an, r)) == NULL)
		return;
	snprintf(key, sizeof(key), "%s", r->id.user);
	if (px_ldap_find(ld, an, r, key, &dn) == 0)
		px_auth_cache_put(an->cache, key, r->id.user, NULL, 0,
		    r->id.groups, r->id.groups_len, px_auth_now_us() / 1000u,
		    an->cache_ms);
	else if (r->result == PX_AUTH_NO_USER) {
		/* A Kerberos user unknown to the directory: in no group. */
		r->result = PX_AUTH_OK;
		r->reason[0] = '\0';
	}
	if (dn != NULL)
		ldap_memfree(dn);
	ldap_unbind_ext_s(ld, NULL, NULL);
}
