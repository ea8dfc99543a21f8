/* Kerberos checks (MIT GSSAPI), on an auth thread (auth.h): a Negotiate
 * token accepted with the authenticator's own keytab (gss_acquire_cred_from
 * with a "keytab" credential store: no process-wide KRB5_KTNAME, so two
 * kerberos authenticators may have two keytabs), for a ticket whose
 * service is service= ("HTTP/proxy.example.test@REALM"). The client's
 * principal, its realm stripped, is the user. One leg only: SPNEGO with a
 * Kerberos ticket completes in one token; a mechanism that needs more
 * (NTLM) is refused. The keytab is also read at load: it must hold a key
 * for service=. Each auth thread acquires the acceptor credential of a
 * keytab once and keeps it (krb_creds): acquiring it per token cost more
 * than the accept itself (a library context, the profile and the keytab
 * read again). GSSAPI still reads the keytab and the replay cache at each
 * accept, so a replaced keytab counts at the next token and a replayed
 * authenticator is still refused. */
#include "auth.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gssapi/gssapi.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>
#include <krb5.h>

/* The acceptor credentials an auth thread keeps, by keytab path: a few
 * (a daemon file has few kerberos authenticators; a reload that names
 * another keytab evicts the oldest). */
#define PX_KRB_CREDS	4

struct px_krb_cred {
	char		*keytab;	/* NULL: a free slot */
	gss_cred_id_t	 cred;
	uint64_t	 used;		/* the thread's check count at last use */
};

static _Thread_local struct px_krb_cred px_krb_creds[PX_KRB_CREDS];
static _Thread_local uint64_t px_krb_uses;

int
px_auth_krb_keytab_ok(const char *path, const char *service, char *why,
    size_t size)
{
	krb5_context ctx;
	krb5_keytab kt;
	krb5_kt_cursor cur;
	krb5_keytab_entry ent;
	char name[1024];
	bool found = false;
	size_t sl = strlen(service);

	if (access(path, R_OK) == -1) {
		snprintf(why, size, "cannot be read: %m");
		return -1;
	}
	if (krb5_init_context(&ctx) != 0) {
		snprintf(why, size, "no Kerberos library context");
		return -1;
	}
	snprintf(name, sizeof(name), "FILE:%s", path);
	if (krb5_kt_resolve(ctx, name, &kt) != 0) {
		krb5_free_context(ctx);
		snprintf(why, size, "not a keytab");
		return -1;
	}
	if (krb5_kt_start_seq_get(ctx, kt, &cur) != 0) {
		krb5_kt_close(ctx, kt);
		krb5_free_context(ctx);
		snprintf(why, size, "cannot be read as a keytab");
		return -1;
	}
	while (!found && krb5_kt_next_entry(ctx, kt, &ent, &cur) == 0) {
		char *p = NULL;

		if (krb5_unparse_name(ctx, ent.principal, &p) == 0) {
			found = strncmp(p, service, sl) == 0 && p[sl] == '/';
			krb5_free_unparsed_name(ctx, p);
		}
		krb5_free_keytab_entry_contents(ctx, &ent);
	}
	krb5_kt_end_seq_get(ctx, kt, &cur);
	krb5_kt_close(ctx, kt);
	krb5_free_context(ctx);
	if (!found) {
		snprintf(why, size, "holds no key for %s/...", service);
		return -1;
	}
	return 0;
}

/* GSSAPI's words for (major, minor) into buf. */
static void
px_krb_status(OM_uint32 major, OM_uint32 minor, char *buf, size_t size)
{
	OM_uint32 min2, ctx = 0;
	gss_buffer_desc msg;
	size_t o = 0;
	int pass;

	buf[0] = '\0';
	for (pass = 0; pass < 2; pass++) {
		OM_uint32 code = pass == 0 ? major : minor;
		int type = pass == 0 ? GSS_C_GSS_CODE : GSS_C_MECH_CODE;

		if (pass == 1 && minor == 0)
			break;
		ctx = 0;
		do {
			if (gss_display_status(&min2, code, type,
			    GSS_C_NO_OID, &ctx, &msg) != GSS_S_COMPLETE)
				break;
			if (o < size) {
				int n = snprintf(buf + o, size - o, "%s%.*s",
				    o ? ": " : "", (int)msg.length,
				    (const char *)msg.value);

				if (n > 0)
					o += (size_t)n;
			}
			gss_release_buffer(&min2, &msg);
		} while (ctx != 0);
	}
}

static void
px_krb_cred_drop(struct px_krb_cred *c)
{
	OM_uint32 min2;

	if (c->cred != GSS_C_NO_CREDENTIAL)
		gss_release_cred(&min2, &c->cred);
	free(c->keytab);
	c->keytab = NULL;
	c->cred = GSS_C_NO_CREDENTIAL;
}

/* This thread's acceptor credential for keytab: kept from an earlier
 * check, or acquired now and kept. NULL, with the failure in why. */
static struct px_krb_cred *
px_krb_cred(const char *keytab, char *why, size_t size)
{
	gss_key_value_element_desc el = { .key = "keytab", .value = keytab };
	gss_key_value_set_desc store = { .count = 1, .elements = &el };
	struct px_krb_cred *c, *lru = &px_krb_creds[0];
	OM_uint32 major, minor;
	size_t i;

	px_krb_uses++;
	for (i = 0; i < PX_KRB_CREDS; i++) {
		c = &px_krb_creds[i];
		if (c->keytab != NULL && strcmp(c->keytab, keytab) == 0) {
			c->used = px_krb_uses;
			return c;
		}
		if (c->keytab == NULL || (lru->keytab != NULL &&
		    c->used < lru->used))
			lru = c;
	}
	px_krb_cred_drop(lru);
	major = gss_acquire_cred_from(&minor, GSS_C_NO_NAME, GSS_C_INDEFINITE,
	    GSS_C_NO_OID_SET, GSS_C_ACCEPT, &store, &lru->cred, NULL, NULL);
	if (GSS_ERROR(major)) {
		px_krb_status(major, minor, why, size);
		lru->cred = GSS_C_NO_CREDENTIAL;
		return NULL;
	}
	if ((lru->keytab = strdup(keytab)) == NULL) {
		px_krb_cred_drop(lru);
		snprintf(why, size, "out of memory");
		return NULL;
	}
	lru->used = px_krb_uses;
	return lru;
}

void
px_auth_krb_check(struct px_auth_req *r)
{
	struct px_authn *an = r->an;
	struct px_krb_cred *kc;
	gss_ctx_id_t ctx = GSS_C_NO_CONTEXT;
	gss_buffer_desc in = { .length = r->secret_len, .value = r->secret };
	gss_buffer_desc out = GSS_C_EMPTY_BUFFER, nm = GSS_C_EMPTY_BUFFER;
	gss_name_t src = GSS_C_NO_NAME, targ = GSS_C_NO_NAME;
	OM_uint32 major, minor, min2;
	char why[128], realm[256];
	size_t i, sl = strlen(an->service);

	r->id.method = PX_AUTH_NEGOTIATE;
	if ((kc = px_krb_cred(an->keytab, why, sizeof(why))) == NULL) {
		r->result = PX_AUTH_ERROR;
		snprintf(r->reason, sizeof(r->reason), "keytab: %s", why);
		return;
	}
	major = gss_accept_sec_context(&minor, &ctx, kc->cred, &in,
	    GSS_C_NO_CHANNEL_BINDINGS, &src, NULL, &out, NULL, NULL, NULL);
	if (GSS_ERROR(major)) {
		/* A credential gone bad is acquired afresh next time. */
		if (GSS_ROUTINE_ERROR(major) == GSS_S_NO_CRED ||
		    GSS_ROUTINE_ERROR(major) == GSS_S_DEFECTIVE_CREDENTIAL ||
		    GSS_ROUTINE_ERROR(major) == GSS_S_CREDENTIALS_EXPIRED)
			px_krb_cred_drop(kc);
		px_krb_status(major, minor, why, sizeof(why));
		r->result = PX_AUTH_BAD_TOKEN;
		snprintf(r->reason, sizeof(r->reason), "%s", why);
		goto out;
	}
	if (major & GSS_S_CONTINUE_NEEDED) {
		r->result = PX_AUTH_BAD_TOKEN;
		snprintf(r->reason, sizeof(r->reason), "the mechanism needs "
		    "more than one leg (only Kerberos is taken)");
		goto out;
	}
	/* The ticket is for service=: a key of the keytab for another
	 * service (host/, say) proves nothing to this one. */
	if (gss_inquire_context(&min2, ctx, NULL, &targ, NULL, NULL, NULL,
	    NULL, NULL) != GSS_S_COMPLETE ||
	    gss_display_name(&min2, targ, &nm, NULL) != GSS_S_COMPLETE ||
	    nm.length <= sl || strncmp(nm.value, an->service, sl) != 0 ||
	    ((const char *)nm.value)[sl] != '/') {
		r->result = PX_AUTH_BAD_TOKEN;
		snprintf(r->reason, sizeof(r->reason), "the ticket is not for "
		    "service %s", an->service);
		goto out;
	}
	/* Our realm: the acceptor principal's (the keytab's). */
	realm[0] = '\0';
	for (i = nm.length; i > 0; i--)
		if (((const char *)nm.value)[i - 1] == '@') {
			if (nm.length - i < sizeof(realm)) {
				memcpy(realm, (const char *)nm.value + i,
				    nm.length - i);
				realm[nm.length - i] = '\0';
			}
			break;
		}
	gss_release_buffer(&min2, &nm);
	if (gss_display_name(&min2, src, &nm, NULL) != GSS_S_COMPLETE) {
		r->result = PX_AUTH_ERROR;
		snprintf(r->reason, sizeof(r->reason), "no client name");
		goto out;
	}
	if (px_auth_principal_user(nm.value, nm.length, realm, r->id.user,
	    sizeof(r->id.user)) == -1 || r->id.user[0] == '\0') {
		r->result = PX_AUTH_BAD_TOKEN;
		snprintf(r->reason, sizeof(r->reason), "empty or too long "
		    "principal");
		goto out;
	}
	r->result = PX_AUTH_OK;
	if (out.length > 0 && (r->reply = malloc(out.length)) != NULL) {
		memcpy(r->reply, out.value, out.length);
		r->reply_len = out.length;
	}
out:
	gss_release_buffer(&min2, &nm);
	gss_release_buffer(&min2, &out);
	if (src != GSS_C_NO_NAME)
		gss_release_name(&min2, &src);
	if (targ != GSS_C_NO_NAME)
		gss_release_name(&min2, &targ);
	if (ctx != GSS_C_NO_CONTEXT)
		gss_delete_sec_context(&min2, &ctx, GSS_C_NO_BUFFER);
}
