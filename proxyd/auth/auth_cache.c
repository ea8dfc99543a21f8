/* The users an LDAP authenticator checked lately (auth.h): per user its
 * groups and, once a password bound, a salted SHA-256 of that password
 * (never the password), each until cache= runs out. A hash table under
 * one mutex, taken only by the auth threads; bounded: at the bound the
 * entry closest to its expiry goes. */
#include "auth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#define PX_AC_BUCKETS	1024

struct px_ac_entry {
	struct px_ac_entry	*next;
	char			*user;
	char			*canon;		/* the directory's spelling */
	bool			 has_pw;
	unsigned char		 pw[32];	/* SHA-256(salt, password) */
	char			*groups;
	size_t			 glen;
	uint64_t		 expires_ms;
};

struct px_auth_cache {
	pthread_mutex_t		 mu;
	struct px_ac_entry	*b[PX_AC_BUCKETS];
	size_t			 n, max;
	unsigned char		 salt[16];
};

struct px_auth_cache *
px_auth_cache_new(size_t max)
{
	struct px_auth_cache *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	pthread_mutex_init(&c->mu, NULL);
	c->max = max;
	if (getrandom(c->salt, sizeof(c->salt), 0) != (ssize_t)sizeof(c->salt))
		memset(c->salt, 0x5a, sizeof(c->salt));
	return c;
}

static void
px_ac_entry_free(struct px_ac_entry *x)
{
	free(x->user);
	free(x->canon);
	free(x->groups);
	OPENSSL_cleanse(x->pw, sizeof(x->pw));
	free(x);
}

void
px_auth_cache_free(struct px_auth_cache *c)
{
	struct px_ac_entry *x, *next;
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < PX_AC_BUCKETS; i++)
		for (x = c->b[i]; x != NULL; x = next) {
			next = x->next;
			px_ac_entry_free(x);
		}
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static unsigned
px_ac_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % PX_AC_BUCKETS;
}

static void
px_ac_digest(const struct px_auth_cache *c, const void *pw, size_t len,
    unsigned char out[32])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned n = 32;

	memset(out, 0, 32);
	if (md == NULL)
		return;
	if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
	    EVP_DigestUpdate(md, c->salt, sizeof(c->salt)) == 1 &&
	    EVP_DigestUpdate(md, pw, len) == 1)
		EVP_DigestFinal_ex(md, out, &n);
	EVP_MD_CTX_free(md);
}

/* With the mutex held: unlinks and frees user's entry, if any. */
static void
px_ac_drop(struct px_auth_cache *c, const char *user)
{
	struct px_ac_entry **p = &c->b[px_ac_hash(user)], *x;

	for (; (x = *p) != NULL; p = &x->next)
		if (strcmp(x->user, user) == 0) {
			*p = x->next;
			px_ac_entry_free(x);
			c->n--;
			return;
		}
}

/* With the mutex held: room for one more, expired ones first. */
static void
px_ac_make_room(struct px_auth_cache *c, uint64_t now_ms)
{
	struct px_ac_entry **p, *x, **oldest = NULL;
	size_t i;

	for (i = 0; i < PX_AC_BUCKETS && c->n >= c->max; i++)
		for (p = &c->b[i]; (x = *p) != NULL; ) {
			if (x->expires_ms <= now_ms) {
				*p = x->next;
				px_ac_entry_free(x);
				c->n--;
				continue;
			}
			if (oldest == NULL || x->expires_ms <
			    (*oldest)->expires_ms)
				oldest = p;
			p = &x->next;
		}
	if (c->n >= c->max && oldest != NULL) {
		x = *oldest;
		*oldest = x->next;
		px_ac_entry_free(x);
		c->n--;
	}
}

void
px_auth_cache_put(struct px_auth_cache *c, const char *user,
    const char *canon, const void *pw, size_t pwlen, const char *groups,
    size_t glen, uint64_t now_ms, uint64_t ttl_ms)
{
	struct px_ac_entry *x;
	unsigned h;

	if (c == NULL || ttl_ms == 0 || c->max == 0)
		return;
	if ((x = calloc(1, sizeof(*x))) == NULL ||
	    (x->user = strdup(user)) == NULL ||
	    (x->canon = strdup(canon != NULL ? canon : user)) == NULL ||
	    (glen > 0 && (x->groups = malloc(glen)) == NULL)) {
		if (x != NULL)
			px_ac_entry_free(x);
		return;
	}
	if (glen > 0)
		memcpy(x->groups, groups, glen);
	x->glen = glen;
	x->expires_ms = now_ms + ttl_ms;
	if (pw != NULL) {
		x->has_pw = true;
		px_ac_digest(c, pw, pwlen, x->pw);
	}
	h = px_ac_hash(user);
	pthread_mutex_lock(&c->mu);
	px_ac_drop(c, user);
	px_ac_make_room(c, now_ms);
	x->next = c->b[h];
	c->b[h] = x;
	c->n++;
	pthread_mutex_unlock(&c->mu);
}

int
px_auth_cache_get(struct px_auth_cache *c, const char *user, const void *pw,
    size_t pwlen, uint64_t now_ms, char **groups, size_t *glen, char *canon,
    size_t csize)
{
	struct px_ac_entry *x;
	unsigned char d[32];
	int rc = 0;

	memset(d, 0, sizeof(d));
	*groups = NULL;
	*glen = 0;
	if (c == NULL)
		return 0;
	if (pw != NULL)
		px_ac_digest(c, pw, pwlen, d);
	pthread_mutex_lock(&c->mu);
	for (x = c->b[px_ac_hash(user)]; x != NULL; x = x->next)
		if (strcmp(x->user, user) == 0)
			break;
	if (x == NULL)
		goto out;
	if (x->expires_ms <= now_ms) {
		px_ac_drop(c, user);
		goto out;
	}
	if (pw != NULL && !x->has_pw)
		goto out;	/* groups only: the password is unchecked */
	if (pw != NULL && CRYPTO_memcmp(d, x->pw, sizeof(d)) != 0) {
		px_ac_drop(c, user);
		rc = -1;
		goto out;
	}
	if (canon != NULL && csize > 0)
		snprintf(canon, csize, "%s", x->canon);
	if (x->glen > 0 && (*groups = malloc(x->glen)) != NULL) {
		memcpy(*groups, x->groups, x->glen);
		*glen = x->glen;
	}
	rc = 1;
out:
	pthread_mutex_unlock(&c->mu);
	OPENSSL_cleanse(d, sizeof(d));
	return rc;
}

size_t
px_auth_cache_count(struct px_auth_cache *c)
{
	size_t n;

	pthread_mutex_lock(&c->mu);
	n = c->n;
	pthread_mutex_unlock(&c->mu);
	return n;
}
