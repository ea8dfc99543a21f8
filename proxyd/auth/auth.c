/* Authenticators (auth.h): <authenticators> and a service's <auth> as
 * loaded, identities, the auth threads and their queue, the boxes that
 * carry answers back to workers, and proxyd_auth_total.
 *
 * The queue is a mutex-guarded FIFO of at most PX_AUTH_QUEUE_MAX checks,
 * taken by PX_AUTH_THREADS threads; a worker holds the mutex only to
 * append (a few instructions, once per authentication, never per
 * request). A check waits no longer than its authenticator's timeout=,
 * counted from when it was asked: one that waited that long in the queue
 * is answered "timeout" without being tried. No authenticator takes more
 * than PX_AUTH_PER_AUTHN threads at once: a directory that stalls leaves
 * the others threads to answer with. Answers go back lock-free. */
#include "auth.h"

#include <errno.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>

#include <event2/buffer.h>
#include <libxml/tree.h>

#include "cfgread.h"
#include "log.h"
#include "parse.h"
#include "prom.h"
#include "sniff.h"

#define PX_AUTH_THREADS		4
#define PX_AUTH_PER_AUTHN	2	/* threads one authenticator may hold */
#define PX_AUTH_QUEUE_MAX	256
#define PX_AUTH_SLOTS		64	/* authenticator names counted */
#define PX_AUTH_CACHE_MAX	4096	/* users per LDAP authenticator */

uint64_t
px_auth_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- counters: process-wide, by name, so a reload keeps them ---------- */

static char px_auth_slot_name[PX_AUTH_SLOTS][65];
static atomic_uint px_auth_nslots;
static atomic_uint_fast64_t
    px_auth_counts[PX_AUTH_SLOTS][PX_AUTH_METHODS][PX_AUTH_RESULTS];

/* The slot of name: its old one, or a new one (the main thread loads). */
static unsigned
px_auth_slot(const char *name)
{
	unsigned i, n = atomic_load(&px_auth_nslots);

	for (i = 0; i < n; i++)
		if (strcmp(px_auth_slot_name[i], name) == 0)
			return i;
	if (n == PX_AUTH_SLOTS)
		return PX_AUTH_SLOTS - 1;	/* shared by the rest */
	snprintf(px_auth_slot_name[n], sizeof(px_auth_slot_name[n]), "%s",
	    name);
	atomic_store(&px_auth_nslots, n + 1);
	return n;
}

void
px_auth_count(const struct px_authn *an, enum px_auth_method m,
    enum px_auth_result r)
{
	if (an->slot < PX_AUTH_SLOTS && m < PX_AUTH_METHODS &&
	    r < PX_AUTH_RESULTS)
		atomic_fetch_add_explicit(&px_auth_counts[an->slot][m][r], 1,
		    memory_order_relaxed);
}

void
px_auth_metrics(struct evbuffer *b)
{
	unsigned i, m, r, n = atomic_load(&px_auth_nslots);

	evbuffer_add_printf(b, "# HELP proxyd_auth_total Authentications, by "
	    "authenticator, method and result.\n"
	    "# TYPE proxyd_auth_total counter\n");
	for (i = 0; i < n; i++)
		for (m = 0; m < PX_AUTH_METHODS; m++)
			for (r = 0; r < PX_AUTH_RESULTS; r++) {
				uint64_t v = atomic_load_explicit(
				    &px_auth_counts[i][m][r],
				    memory_order_relaxed);

				if (v == 0)
					continue;
				evbuffer_add_printf(b,
				    "proxyd_auth_total{authenticator=\"");
				px_prom_label(b, px_auth_slot_name[i]);
				evbuffer_add_printf(b, "\",method=\"%s\","
				    "result=\"%s\"} %llu\n",
				    px_auth_method_name(m),
				    px_auth_result_name(r),
				    (unsigned long long)v);
			}
}

const char *
px_auth_method_name(enum px_auth_method m)
{
	return m == PX_AUTH_NEGOTIATE ? "negotiate" :
	    m == PX_AUTH_PASSWORD ? "password" :
	    m == PX_AUTH_CERTIFICATE ? "certificate" : "basic";
}

void
px_auth_id_log(const struct px_auth_id *id, char *buf, size_t len)
{
	char user[160];

	if (len > 0)
		buf[0] = '\0';
	if (id == NULL)
		return;
	px_log_escape(user, sizeof(user), id->user, strlen(id->user), false);
	snprintf(buf, len, " user=%s auth=%s", user,
	    px_auth_method_name(id->method));
}

static bool
px_auth_content_in_group(const void *arg, const char *g)
{
	return px_auth_id_in_group(arg, g);
}

const struct px_content_who *
px_auth_content_who(const struct px_auth_id *id, struct px_content_who *w)
{
	if (id == NULL)
		return NULL;
	w->user = id->user;
	w->in_group = px_auth_content_in_group;
	w->arg = id;
	return w;
}

const char *
px_auth_result_name(enum px_auth_result r)
{
	static const char *const names[PX_AUTH_RESULTS] = {
		"ok", "bad-password", "no-user", "bad-token",
		"directory-down", "timeout", "busy", "error",
	};

	return r < PX_AUTH_RESULTS ? names[r] : "error";
}

/* ---- loading ------------------------------------------------------------ */

char *
px_auth_path(const char *file, const char *rel)
{
	char *copy, *dir, *out;

	if (rel[0] == '/' || file == NULL)
		return strdup(rel);
	if ((copy = strdup(file)) == NULL)
		return NULL;
	dir = dirname(copy);
	if (asprintf(&out, "%s/%s", dir, rel) == -1)
		out = NULL;
	free(copy);
	return out;
}

static char *
px_auth_strattr(const xmlNode *n, const char *name)
{
	char *v = px_attr(n, name), *s;

	if (v == NULL)
		return NULL;
	s = strdup(v);
	xmlFree(v);
	return s;
}

static void
px_authn_unref(struct px_authn *a)
{
	if (a == NULL || atomic_fetch_sub(&a->refs, 1) != 1)
		return;
	free(a->name);
	free(a->keytab);
	free(a->service);
	free(a->url);
	free(a->base_dn);
	free(a->bind_dn);
	if (a->bind_pw != NULL) {
		explicit_bzero(a->bind_pw, strlen(a->bind_pw));
		free(a->bind_pw);
	}
	free(a->user_filter);
	free(a->group_attr);
	px_auth_cache_free(a->cache);
	free(a);
}

static struct px_authn *
px_authn_ref(struct px_authn *a)
{
	if (a != NULL)
		atomic_fetch_add(&a->refs, 1);
	return a;
}

char *
px_auth_read_secret(const char *path, const char **why)
{
	FILE *f = fopen(path, "r");
	char buf[1024];
	size_t n;

	if (f == NULL) {
		*why = strerror(errno);
		return NULL;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	if (buf[0] == '\0') {
		*why = "empty";
		return NULL;
	}
	return strdup(buf);
}

static void
px_auth_load_krb(struct px_authn *a, const xmlNode *n, const char *file,
    struct px_cfgerr *e)
{
	char *v, why[256];

	a->service = px_auth_strattr(n, "service");
	if (a->service == NULL)
		a->service = strdup("HTTP");
	if ((v = px_attr(n, "keytab")) == NULL) {
		px_cfg_error(e, n, "<kerberos name=\"%s\">: keytab= is required",
		    a->name);
		return;
	}
	a->keytab = px_auth_path(file, v);
	if (a->keytab != NULL && px_auth_krb_keytab_ok(a->keytab, a->service,
	    why, sizeof(why)) == -1)
		px_cfg_error(e, n, "keytab=\"%s\": %s", v, why);
	xmlFree(v);
}

static void
px_auth_load_ldap(struct px_authn *a, const xmlNode *n, const char *file,
    struct px_cfgerr *e)
{
	const char *why;
	char *v, *p;

	a->url = px_auth_strattr(n, "url");
	a->base_dn = px_auth_strattr(n, "base-dn");
	a->bind_dn = px_auth_strattr(n, "bind-dn");
	a->user_filter = px_auth_strattr(n, "user-filter");
	a->group_attr = px_auth_strattr(n, "group-attribute");
	if (a->url == NULL)
		px_cfg_error(e, n, "<ldap name=\"%s\">: url= is required",
		    a->name);
	else if (px_auth_ldap_url_ok(a->url, &why) == -1)
		px_cfg_error(e, n, "url=\"%s\": %s", a->url, why);
	if (a->base_dn == NULL)
		px_cfg_error(e, n, "<ldap name=\"%s\">: base-dn= is required",
		    a->name);
	if (a->user_filter == NULL)
		a->user_filter = strdup("(uid=%u)");
	else if (strstr(a->user_filter, "%u") == NULL ||
	    a->user_filter[0] != '(')
		px_cfg_error(e, n, "user-filter=\"%s\": a filter in "
		    "parentheses with %%u where the user name goes",
		    a->user_filter);
	if (a->group_attr != NULL && a->group_attr[0] == '\0') {
		free(a->group_attr);
		a->group_attr = NULL;
	}
	if ((v = px_attr(n, "bind-password-file")) != NULL) {
		p = px_auth_path(file, v);
		if (p != NULL &&
		    (a->bind_pw = px_auth_read_secret(p, &why)) == NULL)
			px_cfg_error(e, n, "bind-password-file=\"%s\": %s", v,
			    why);
		free(p);
		xmlFree(v);
	} else if (a->bind_dn != NULL)
		px_cfg_error(e, n, "bind-dn= needs bind-password-file=");
	a->cache_ms = 5 * 60 * 1000;
	a->timeout_ms = 3000;
	px_attr_duration(e, n, "cache", true, 0, 24 * 3600 * 1000,
	    &a->cache_ms);
	px_attr_duration(e, n, "timeout", false, 1, 60 * 1000,
	    &a->timeout_ms);
	a->cache = px_auth_cache_new(PX_AUTH_CACHE_MAX);
}

int
px_authns_load(struct px_authns *as, const xmlNode *top,
    const char *daemon_file, struct px_cfgerr *e)
{
	unsigned before = e->count;
	const xmlNode *n;
	struct px_authn *a, **grown;
	size_t i;

	as->a = NULL;
	as->n = 0;
	if (top == NULL)
		return 0;
	for (n = top->children; n != NULL; n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		if ((a = calloc(1, sizeof(*a))) == NULL ||
		    (grown = realloc(as->a, (as->n + 1) *
		    sizeof(*as->a))) == NULL) {
			free(a);
			px_cfg_error(e, n, "out of memory");
			return -1;
		}
		as->a = grown;
		as->a[as->n++] = a;
		atomic_init(&a->refs, 1);
		a->timeout_ms = 3000;
		if ((a->name = px_auth_strattr(n, "name")) == NULL ||
		    a->name[0] == '\0' || strlen(a->name) > 64) {
			px_cfg_error(e, n, "an authenticator needs a name= "
			    "(1 to 64 characters)");
			continue;
		}
		for (i = 0; i + 1 < as->n; i++)
			if (as->a[i]->name != NULL &&
			    strcmp(as->a[i]->name, a->name) == 0)
				px_cfg_error(e, n, "authenticator \"%s\" is "
				    "defined twice", a->name);
		a->slot = px_auth_slot(a->name);
		if (xmlStrcmp(n->name, (const xmlChar *)"kerberos") == 0) {
			a->kind = PX_AUTHN_KERBEROS;
			px_auth_load_krb(a, n, daemon_file, e);
		} else {
			a->kind = PX_AUTHN_LDAP;
			px_auth_load_ldap(a, n, daemon_file, e);
		}
	}
	return e->count == before ? 0 : -1;
}

void
px_authns_free(struct px_authns *as)
{
	size_t i;

	for (i = 0; i < as->n; i++)
		px_authn_unref(as->a[i]);
	free(as->a);
	as->a = NULL;
	as->n = 0;
}

const struct px_authn *
px_authns_find(const struct px_authns *as, const char *name)
{
	size_t i;

	for (i = 0; i < as->n; i++)
		if (as->a[i]->name != NULL &&
		    strcmp(as->a[i]->name, name) == 0)
			return as->a[i];
	return NULL;
}

int
px_auth_use_load(struct px_auth_use **out, const xmlNode *n,
    const struct px_authns *as, struct px_cfgerr *e)
{
	unsigned before = e->count;
	struct px_auth_use *u;
	char *v, *tok, *save;

	*out = NULL;
	if (n == NULL)
		return 0;
	if ((u = calloc(1, sizeof(*u))) == NULL) {
		px_cfg_error(e, n, "out of memory");
		return -1;
	}
	u->line = px_xml_line(n);
	u->required = true;
	if ((v = px_attr(n, "authenticator")) == NULL)
		px_cfg_error(e, n, "<auth>: authenticator= is required");
	else {
		for (tok = strtok_r(v, " \t", &save); tok != NULL;
		    tok = strtok_r(NULL, " \t", &save)) {
			struct px_authn *a = (struct px_authn *)
			    px_authns_find(as, tok);

			if (a == NULL)
				px_cfg_error(e, n, "authenticator=\"%s\": no "
				    "such authenticator in <authenticators>",
				    tok);
			else if (a->kind == PX_AUTHN_KERBEROS) {
				if (u->krb != NULL)
					px_cfg_error(e, n, "authenticator=: "
					    "two kerberos authenticators");
				else
					u->krb = px_authn_ref(a);
			} else if (u->ldap != NULL)
				px_cfg_error(e, n, "authenticator=: two ldap "
				    "authenticators");
			else
				u->ldap = px_authn_ref(a);
		}
		xmlFree(v);
	}
	if ((v = px_attr(n, "methods")) == NULL) {
		u->methods[PX_AUTH_NEGOTIATE] = u->krb != NULL;
		u->methods[PX_AUTH_BASIC] = u->ldap != NULL;
	} else {
		for (tok = strtok_r(v, " \t", &save); tok != NULL;
		    tok = strtok_r(NULL, " \t", &save)) {
			if (strcmp(tok, "negotiate") == 0) {
				u->methods[PX_AUTH_NEGOTIATE] = true;
				if (u->krb == NULL)
					px_cfg_error(e, n, "methods=: "
					    "negotiate needs a kerberos "
					    "authenticator");
			} else if (strcmp(tok, "basic") == 0) {
				u->methods[PX_AUTH_BASIC] = true;
				if (u->ldap == NULL)
					px_cfg_error(e, n, "methods=: basic "
					    "needs an ldap authenticator");
			} else
				px_cfg_error(e, n, "methods=: \"%s\": expected "
				    "negotiate or basic", tok);
		}
		xmlFree(v);
	}
	if (!u->methods[PX_AUTH_NEGOTIATE] && !u->methods[PX_AUTH_BASIC])
		px_cfg_error(e, n, "<auth>: no method (methods=\"negotiate "
		    "basic\")");
	px_attr_bool(e, n, "required", &u->required);
	px_attr_bool(e, n, "basic-without-tls", &u->basic_plain);
	if ((v = px_attr(n, "realm")) != NULL) {
		if (strpbrk(v, "\"\\\r\n") != NULL || strlen(v) > 128)
			px_cfg_error(e, n, "realm=: up to 128 characters, "
			    "no quote, backslash or line break");
		u->realm = strdup(v);
		xmlFree(v);
	} else
		u->realm = strdup("proxyd");
	if (e->count != before) {
		px_auth_use_free(u);
		return -1;
	}
	*out = u;
	return 0;
}

void
px_auth_use_free(struct px_auth_use *u)
{
	if (u == NULL)
		return;
	px_authn_unref(u->krb);
	px_authn_unref(u->ldap);
	free(u->realm);
	free(u);
}

/* ---- identities ----------------------------------------------------------- */

void
px_auth_id_clear(struct px_auth_id *id)
{
	free(id->groups);
	memset(id, 0, sizeof(*id));
}

bool
px_auth_id_in_group(const struct px_auth_id *id, const char *g)
{
	const char *v, *eq, *end;
	size_t glen = strlen(g);

	if (id->groups == NULL || glen == 0)
		return false;
	for (v = id->groups; v < id->groups + id->groups_len && *v != '\0';
	    v += strlen(v) + 1) {
		if (strcasecmp(v, g) == 0)
			return true;
		/* "cn=ops,dc=..." is also "ops" */
		if ((eq = strchr(v, '=')) == NULL)
			continue;
		end = eq + 1 + strcspn(eq + 1, ",");
		if ((size_t)(end - eq - 1) == glen &&
		    strncasecmp(eq + 1, g, glen) == 0)
			return true;
	}
	return false;
}

int
px_auth_principal_user(const char *principal, size_t len, const char *realm,
    char *out, size_t size)
{
	size_t n = len, rl = realm != NULL ? strlen(realm) : 0;

	while (n > 0 && principal[n - 1] != '@')
		n--;
	/* n: just past the last '@', 0 without one. Only our own realm is
	 * local: alice@OTHER.REALM keeps her realm. */
	if (n > 1 && rl > 0 && len - n == rl && memcmp(principal + n, realm,
	    rl) == 0)
		len = n - 1;
	if (len >= size)
		return -1;
	memcpy(out, principal, len);
	out[len] = '\0';
	return 0;
}

/* ---- requests, the queue, the threads ---------------------------------- */

struct px_auth_req *
px_auth_req_new(enum px_auth_method method, struct px_authn *an,
    struct px_authn *groups_an, const char *user, const void *secret,
    size_t secret_len)
{
	struct px_auth_req *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	if ((r->secret = malloc(secret_len + 1)) == NULL) {
		free(r);
		return NULL;
	}
	memcpy(r->secret, secret, secret_len);
	r->secret[secret_len] = '\0';
	r->secret_len = secret_len;
	r->method = method;
	r->an = px_authn_ref(an);
	r->groups_an = px_authn_ref(groups_an);
	snprintf(r->user, sizeof(r->user), "%s", user != NULL ? user : "");
	r->id.method = method;
	return r;
}

void
px_auth_req_free(struct px_auth_req *r)
{
	if (r == NULL)
		return;
	if (r->secret != NULL) {
		explicit_bzero(r->secret, r->secret_len);
		free(r->secret);
	}
	free(r->reply);
	px_auth_id_clear(&r->id);
	px_authn_unref(r->an);
	px_authn_unref(r->groups_an);
	free(r);
}

static pthread_mutex_t px_auth_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t px_auth_cv = PTHREAD_COND_INITIALIZER;
static struct px_auth_req *px_auth_qhead, *px_auth_qtail;
static unsigned px_auth_qlen;
/* Started at the first check; they live as long as the process. */
static bool px_auth_started;
static pthread_t px_auth_threads[PX_AUTH_THREADS];
static unsigned px_auth_nthreads;

/* What each thread checks now (the mutex): px_auth_box_close finds them. */
static struct px_auth_req *px_auth_running[PX_AUTH_THREADS];

/* The answer goes to its box; the first on an empty stack wakes it. */
static void
px_auth_deliver(struct px_auth_req *r)
{
	struct px_auth_box *box = r->box;
	struct px_auth_req *head = atomic_load(&box->head);

	do
		r->next = head;
	while (!atomic_compare_exchange_weak(&box->head, &head, r));
	if (head == NULL && box->wake != NULL)
		box->wake(box->wake_arg);
}

static void
px_auth_log(const struct px_auth_req *r)
{
	char user[160], reason[200];

	if (!px_log_enabled(r->result == PX_AUTH_OK ? LOG_INFO : LOG_NOTICE))
		return;
	px_log_escape(user, sizeof(user), r->result == PX_AUTH_OK &&
	    r->id.user[0] != '\0' ? r->id.user : r->user,
	    strlen(r->result == PX_AUTH_OK && r->id.user[0] != '\0' ?
	    r->id.user : r->user), false);
	px_log_escape(reason, sizeof(reason), r->reason, strlen(r->reason),
	    true);
	px_log(r->result == PX_AUTH_OK ? LOG_INFO : LOG_NOTICE, r->session,
	    "auth authenticator=%s method=%s user=%s result=%s%s%s%s",
	    r->an->name, px_auth_method_name(r->method),
	    user[0] != '\0' ? user : "-", px_auth_result_name(r->result),
	    reason[0] != '\0' ? " reason=\"" : "", reason,
	    reason[0] != '\0' ? "\"" : "");
}

static void
px_auth_run(struct px_auth_req *r)
{
	if (atomic_load(&r->cancelled)) {
		r->result = PX_AUTH_ERROR;
		return;
	}
	if (px_auth_now_us() >= r->deadline_us) {
		r->result = PX_AUTH_TIMEOUT;
		snprintf(r->reason, sizeof(r->reason), "waited timeout=%llums "
		    "for an auth thread", (unsigned long long)
		    r->an->timeout_ms);
	} else if (r->method == PX_AUTH_BASIC || r->method == PX_AUTH_PASSWORD)
		px_auth_ldap_check(r);
	else if (r->method == PX_AUTH_CERTIFICATE) {
		/* The TLS layer proved r->user: only its groups are read
		 * (a user the directory does not know is in none). */
		snprintf(r->id.user, sizeof(r->id.user), "%s", r->user);
		r->result = PX_AUTH_OK;
		px_auth_ldap_groups(r->an, r);
	} else {
		px_auth_krb_check(r);
		if (r->result == PX_AUTH_OK && r->groups_an != NULL)
			px_auth_ldap_groups(r->groups_an, r);
	}
	px_auth_count(r->an, r->method, r->result);
	px_auth_log(r);
}

/* With the mutex held: the first queued check a thread may take now
 * (one whose authenticators have a thread to spare, or one that needs
 * none: cancelled, or past its deadline), unlinked; NULL: none. *work
 * says whether it will talk to its authenticators. */
static struct px_auth_req *
px_auth_pick(bool *work)
{
	struct px_auth_req **p, *r, *prev = NULL;
	uint64_t now = px_auth_now_us();

	for (p = &px_auth_qhead; (r = *p) != NULL; prev = r, p = &r->next) {
		*work = !atomic_load(&r->cancelled) && now < r->deadline_us;
		if (*work && (r->an->busy >= PX_AUTH_PER_AUTHN ||
		    (r->groups_an != NULL &&
		    r->groups_an->busy >= PX_AUTH_PER_AUTHN)))
			continue;
		*p = r->next;
		if (px_auth_qtail == r)
			px_auth_qtail = prev;
		px_auth_qlen--;
		return r;
	}
	return NULL;
}

static void *
px_auth_main(void *arg)
{
	struct px_auth_req *r;
	struct timespec ts;
	unsigned me = (unsigned)(uintptr_t)arg;
	char name[16];
	bool work;

	snprintf(name, sizeof(name), "px-auth-%u", me);
	(void)pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&px_auth_mu);
	for (;;) {
		if ((r = px_auth_pick(&work)) == NULL) {
			if (px_auth_qhead == NULL)
				pthread_cond_wait(&px_auth_cv, &px_auth_mu);
			else {
				/* Held back by busy authenticators: look
				 * again when one frees a thread, or for
				 * deadlines, every 50 ms. */
				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_nsec += 50 * 1000000;
				if (ts.tv_nsec >= 1000000000) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000;
				}
				pthread_cond_timedwait(&px_auth_cv,
				    &px_auth_mu, &ts);
			}
			continue;
		}
		if (work) {
			r->an->busy++;
			if (r->groups_an != NULL)
				r->groups_an->busy++;
		}
		px_auth_running[me] = r;
		pthread_mutex_unlock(&px_auth_mu);
		px_auth_run(r);
		pthread_mutex_lock(&px_auth_mu);
		if (work) {
			r->an->busy--;
			if (r->groups_an != NULL)
				r->groups_an->busy--;
			/* A thread of these authenticators is free: the
			 * checks it held back may go. None queued, no one
			 * waits for it (an idle thread waits for a submit's
			 * signal): waking them all after every check only
			 * made each go back to sleep. */
			if (px_auth_qhead != NULL)
				pthread_cond_broadcast(&px_auth_cv);
		}
		px_auth_running[me] = NULL;
		/* With the mutex: px_auth_box_close takes it to know that no
		 * answer goes to a box once it returned. A closed box's
		 * answers (r->box NULL) have no one to read them. */
		if (r->box != NULL)
			px_auth_deliver(r);
		else
			px_auth_req_free(r);
	}
	return NULL;	/* not reached: the threads live with the process */
}

/* With the mutex held. */
static void
px_auth_start_locked(void)
{
	sigset_t all, old;
	unsigned i;

	px_auth_started = true;
	/* Signals stay with the main thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < PX_AUTH_THREADS; i++)
		if (pthread_create(&px_auth_threads[px_auth_nthreads], NULL,
		    px_auth_main, (void *)(uintptr_t)px_auth_nthreads) == 0)
			px_auth_nthreads++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void
px_auth_submit(struct px_auth_req *r, struct px_auth_box *box,
    px_auth_done_cb done, void *arg)
{
	bool full;

	r->box = box;
	r->done = done;
	r->arg = arg;
	r->next = NULL;
	r->deadline_us = px_auth_now_us() + r->an->timeout_ms * 1000u;
	pthread_mutex_lock(&px_auth_mu);
	if (!px_auth_started)
		px_auth_start_locked();
	full = px_auth_qlen >= PX_AUTH_QUEUE_MAX || px_auth_nthreads == 0;
	if (!full) {
		if (px_auth_qtail != NULL)
			px_auth_qtail->next = r;
		else
			px_auth_qhead = r;
		px_auth_qtail = r;
		px_auth_qlen++;
		pthread_cond_signal(&px_auth_cv);
	}
	pthread_mutex_unlock(&px_auth_mu);
	if (full) {
		r->result = PX_AUTH_BUSY;
		snprintf(r->reason, sizeof(r->reason), "%u checks queued",
		    PX_AUTH_QUEUE_MAX);
		px_auth_count(r->an, r->method, r->result);
		px_auth_log(r);
		px_auth_deliver(r);
	}
}

void
px_auth_box_close(struct px_auth_box *box)
{
	struct px_auth_req *r, *next;
	unsigned i;

	pthread_mutex_lock(&px_auth_mu);
	for (r = px_auth_qhead; r != NULL; r = r->next)
		if (r->box == box)
			r->box = NULL;
	for (i = 0; i < PX_AUTH_THREADS; i++)
		if (px_auth_running[i] != NULL && px_auth_running[i]->box == box)
			px_auth_running[i]->box = NULL;
	pthread_mutex_unlock(&px_auth_mu);
	/* What came before: its owner is gone, no callback runs. */
	for (r = atomic_exchange(&box->head, NULL); r != NULL; r = next) {
		next = r->next;
		px_auth_req_free(r);
	}
	box->wake = NULL;
}

void
px_auth_cancel(struct px_auth_req *r)
{
	atomic_store(&r->cancelled, true);
}

void
px_auth_box_drain(struct px_auth_box *box)
{
	struct px_auth_req *r, *rev = NULL, *next;

	r = atomic_exchange(&box->head, NULL);
	for (; r != NULL; r = next) {
		next = r->next;
		r->next = rev;
		rev = r;
	}
	for (r = rev; r != NULL; r = next) {
		next = r->next;
		r->next = NULL;
		if (atomic_load(&r->cancelled))
			px_auth_req_free(r);
		else
			r->done(r, r->arg);
	}
}
