/* Unit tests for plugins/ftp/ftp_policy.c through the analyser's own
 * policy_load: the defaults, what each list decides (commands, users,
 * paths) and every loader error with its file:line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "analyser.h"
#include "auth.h"
#include "config.h"
#include "ftp/ftp_policy.h"
#include "policy_load.h"

extern const struct px_analyser ftp_analyser;

static struct px_cfgerr err;

/* Loads the <ftp> element of xml (line 1 is "<ftp"): the policy, or NULL
 * with err filled. */
static struct ftp_policy *
load(const char *xml)
{
	return px_test_policy_load(&ftp_analyser, xml, &err);
}

static void
unload(struct ftp_policy *p)
{
	ftp_analyser.policy_free(p);
}

/* No <ftp> at all, and an empty one: the documented defaults. */
static void
test_defaults(void **state)
{
	struct ftp_policy *p;
	void *pol = NULL;
	int i;

	(void)state;
	memset(&err, 0, sizeof(err));
	assert_int_equal(ftp_analyser.policy_load(NULL, &pol, &err), 0);
	for (i = 0; i < 2; i++) {
		p = i == 0 ? pol : load("<ftp/>");
		assert_int_equal(p->client_data, FTP_KEEP);
		assert_int_equal(p->server_data, FTP_KEEP);
		assert_true(p->strict);
		assert_int_equal(p->port_lo, 0);
		assert_int_equal(p->port_hi, 0);
		assert_int_equal(p->max_line, 512);
		assert_int_equal(p->max_user, 64);
		assert_int_equal(p->max_pass, 128);
		assert_int_equal(p->timeout_ms, 30000);
		/* No <command name="*">: the standard set, nothing else. */
		assert_true(ftp_cmd_allowed(p, "USER"));
		assert_true(ftp_cmd_allowed(p, "NOOP"));
		assert_true(ftp_cmd_allowed(p, "EPSV"));
		assert_true(ftp_cmd_allowed(p, "MLSD"));
		assert_true(ftp_cmd_allowed(p, "FEAT"));
		assert_true(ftp_cmd_allowed(p, "STOR"));
		assert_false(ftp_cmd_allowed(p, "XYZZ"));
		assert_false(ftp_cmd_allowed(p, "XMKD"));
		assert_false(ftp_cmd_allowed(p, "MFMT"));
		assert_false(ftp_cmd_allowed(p, "CCC"));
		/* No <user>: any name; no <path>: any path. */
		assert_true(ftp_user_allowed(p, "anyone"));
		assert_true(ftp_path_allowed(p, "/", "/pub/a.exe"));
		unload(p);
	}
}

static void
test_attributes(void **state)
{
	struct ftp_policy *p;

	(void)state;
	p = load("<ftp client-data=\"passive\" server-data=\"active\"\n"
	    "     data-ports=\"40000-40010\" strict-port-check=\"no\">\n"
	    "  <limits max-line=\"256\" max-username=\"32\" max-password=\"64\"\n"
	    "          timeout=\"10s\"/>\n"
	    "</ftp>\n");
	assert_non_null(p);
	assert_int_equal(p->client_data, FTP_PASSIVE);
	assert_int_equal(p->server_data, FTP_ACTIVE);
	assert_int_equal(p->port_lo, 40000);
	assert_int_equal(p->port_hi, 40010);
	assert_false(p->strict);
	assert_int_equal(p->max_line, 256);
	assert_int_equal(p->max_user, 32);
	assert_int_equal(p->max_pass, 64);
	assert_int_equal(p->timeout_ms, 10000);
	unload(p);
	p = load("<ftp client-data=\"active\" server-data=\"keep\" "
	    "strict-port-check=\"yes\"/>");
	assert_non_null(p);
	assert_int_equal(p->client_data, FTP_ACTIVE);
	assert_int_equal(p->server_data, FTP_KEEP);
	assert_true(p->strict);
	unload(p);
}

/* Verbs are exact and case-insensitive; "*" is the default wherever it
 * stands; the TLS commands are refused whatever the policy says. */
static void
test_commands(void **state)
{
	struct ftp_policy *p;

	(void)state;
	p = load("<ftp>\n"
	    "  <command name=\"*\" action=\"deny\"/>\n"
	    "  <command name=\"user pass\tRetr\" action=\"accept\"/>\n"
	    "  <command name=\"AUTH\" action=\"accept\"/>\n"
	    "</ftp>\n");
	assert_non_null(p);
	assert_true(ftp_cmd_allowed(p, "USER"));
	assert_true(ftp_cmd_allowed(p, "PASS"));
	assert_true(ftp_cmd_allowed(p, "RETR"));	/* after "*" still */
	assert_false(ftp_cmd_allowed(p, "STOR"));
	assert_false(ftp_cmd_allowed(p, "RET"));	/* no prefix match */
	assert_false(ftp_cmd_allowed(p, "AUTH"));
	unload(p);
	p = load("<ftp>\n"
	    "  <command name=\"STOR DELE\" action=\"deny\"/>\n"
	    "  <command name=\"*\" action=\"accept\"/>\n"
	    "</ftp>\n");
	assert_non_null(p);
	assert_false(ftp_cmd_allowed(p, "STOR"));
	assert_false(ftp_cmd_allowed(p, "DELE"));
	assert_true(ftp_cmd_allowed(p, "RETR"));
	assert_true(ftp_cmd_allowed(p, "XYZZ"));
	assert_false(ftp_cmd_allowed(p, "PBSZ"));
	assert_false(ftp_cmd_allowed(p, "PROT"));
	assert_false(ftp_cmd_allowed(p, "CCC"));
	assert_false(ftp_cmd_allowed(p, "ADAT"));
	unload(p);
	/* Rules without "*": what they do not name keeps the default (a
	 * read-only service is a list of denials, USER stays allowed). */
	p = load("<ftp><command name=\"STOR APPE DELE\" action=\"deny\"/>"
	    "<command name=\"SITE\" action=\"accept\"/></ftp>");
	assert_non_null(p);
	assert_false(ftp_cmd_allowed(p, "STOR"));
	assert_false(ftp_cmd_allowed(p, "DELE"));
	assert_true(ftp_cmd_allowed(p, "USER"));
	assert_true(ftp_cmd_allowed(p, "RETR"));
	assert_true(ftp_cmd_allowed(p, "SITE"));
	assert_false(ftp_cmd_allowed(p, "XYZZ"));
	unload(p);
	/* A verb with digits is named as the client's parser spells it:
	 * only its letters upper-cased. */
	p = load("<ftp><command name=\"xsha256 XSHA1 XMd5\" action=\"deny\"/>"
	    "<command name=\"*\" action=\"accept\"/></ftp>");
	assert_non_null(p);
	assert_false(ftp_cmd_allowed(p, "XSHA256"));
	assert_false(ftp_cmd_allowed(p, "XSHA1"));
	assert_false(ftp_cmd_allowed(p, "XMD5"));
	assert_true(ftp_cmd_allowed(p, "XSHA512"));
	unload(p);
}

/* rule= of each list's refusals: the deciding element's file:line, its
 * label= instead when it has one (on "*" too), "default" when no rule
 * decided, "builtin" for the TLS verbs. */
static void
test_refs(void **state)
{
	struct ftp_policy *p;
	char b[PX_RULE_REF_MAX];

	(void)state;
	p = load("<ftp>\n"
	    "  <command name=\"STOR\" action=\"deny\"/>\n"
	    "  <command name=\"DELE RMD\" label=\"read-only\" action=\"deny\"/>\n"
	    "  <user name=\"root\" action=\"deny\"/>\n"
	    "  <user name=\"a*\" action=\"accept\"/>\n"
	    "  <path pattern=\"*.exe\" action=\"deny\"/>\n"
	    "  <path pattern=\"/etc/*\" label=\"no-etc\" action=\"deny\"/>\n"
	    "</ftp>\n");
	assert_non_null(p);
	assert_string_equal(ftp_cmd_ref(p, "STOR", "/e/ftp.xml", b, sizeof(b)),
	    "ftp.xml:2");
	assert_string_equal(ftp_cmd_ref(p, "RMD", "/e/ftp.xml", b, sizeof(b)),
	    "read-only");
	assert_string_equal(ftp_cmd_ref(p, "XYZZ", "/e/ftp.xml", b, sizeof(b)),
	    "default");
	assert_string_equal(ftp_cmd_ref(p, "PBSZ", "/e/ftp.xml", b, sizeof(b)),
	    "builtin");
	assert_string_equal(ftp_user_ref(p, "root", "ftp.xml", b, sizeof(b)),
	    "ftp.xml:4");
	assert_string_equal(ftp_user_ref(p, "bob", "ftp.xml", b, sizeof(b)),
	    "default");
	assert_string_equal(ftp_path_ref(p, "/home/u", "/home/u/x.exe",
	    "ftp.xml", b, sizeof(b)), "ftp.xml:6");
	assert_string_equal(ftp_path_ref(p, "/home/u", "/etc/passwd",
	    "ftp.xml", b, sizeof(b)), "no-etc");
	unload(p);
	p = load("<ftp>\n"
	    "  <command name=\"USER\" action=\"accept\"/>\n"
	    "  <command name=\"*\" label=\"only-user\" action=\"deny\"/>\n"
	    "</ftp>\n");
	assert_non_null(p);
	assert_string_equal(ftp_cmd_ref(p, "RETR", "ftp.xml", b, sizeof(b)),
	    "only-user");
	unload(p);
	assert_null(load("<ftp><command name=\"X\" label=\"a b\" "
	    "action=\"deny\"/></ftp>"));
	assert_non_null(strstr(err.first, "t.xml:1: label=\"a b\""));
}

/* An allow-list: any name while there is no rule, first match once there
 * are some, and what none matches is refused (even with deny rules only). */
static void
test_users(void **state)
{
	struct ftp_policy *p;

	(void)state;
	p = load("<ftp>\n"
	    "  <user name=\"root\" action=\"deny\"/>\n"
	    "  <user name=\"anonymous  ftp r*\" action=\"accept\"/>\n"
	    "</ftp>\n");
	assert_non_null(p);
	assert_true(ftp_user_allowed(p, "anonymous"));
	assert_true(ftp_user_allowed(p, "ftp"));
	assert_true(ftp_user_allowed(p, "robert"));
	assert_false(ftp_user_allowed(p, "root"));	/* first match */
	assert_false(ftp_user_allowed(p, "Anonymous"));	/* case matters */
	assert_false(ftp_user_allowed(p, "bob"));
	unload(p);
	p = load("<ftp><user name=\"root\" action=\"deny\"/></ftp>");
	assert_non_null(p);
	assert_false(ftp_user_allowed(p, "root"));
	assert_false(ftp_user_allowed(p, "bob"));
	unload(p);
}

/* One pattern per rule, spaces and all; "*" crosses "/"; first match;
 * what none matches is accepted. */
static void
test_paths(void **state)
{
	struct ftp_policy *p;

	(void)state;
	p = load("<ftp>\n"
	    "  <path pattern=\"safe/*\" action=\"accept\"/>\n"
	    "  <path pattern=\"*.exe\" action=\"deny\"/>\n"
	    "  <path pattern=\"my file\" action=\"deny\"/>\n"
	    "</ftp>\n");
	assert_non_null(p);
	assert_true(ftp_path_allowed(p, "/", "/safe/tool.exe"));
	assert_false(ftp_path_allowed(p, "/", "/pub/deep/tool.exe"));
	assert_false(ftp_path_allowed(p, "/", "/my file"));
	assert_true(ftp_path_allowed(p, "/", "/my"));
	assert_true(ftp_path_allowed(p, "/", "/file"));
	assert_true(ftp_path_allowed(p, "/", "/pub/a.txt"));
	assert_true(ftp_path_allowed(p, "/", "/TOOL.EXE"));	/* case matters */
	/* A login directory other than "/": relative patterns are relative
	 * to it, or to "/" outside it; "/..." ones on the whole path. */
	assert_false(ftp_path_allowed(p, "/home/u", "/home/u/my file"));
	assert_true(ftp_path_allowed(p, "/home/u", "/home/u/safe/x.exe"));
	assert_true(ftp_path_allowed(p, "/home/u", "/home/my file"));
	assert_false(ftp_path_allowed(p, "/home/u", "/home/v/x.exe"));
	assert_false(ftp_path_allowed(p, "/home/u", "/home/uu/safe/x.exe"));
	assert_true(ftp_path_allowed(p, "/home/u", "/safe/x.exe"));
	unload(p);
	p = load("<ftp>\n"
	    "  <path pattern=\"secret\" action=\"deny\"/>\n"
	    "  <path pattern=\"secret/*\" action=\"deny\"/>\n"
	    "  <path pattern=\"/etc/*\" action=\"deny\"/>\n"
	    "</ftp>\n");
	assert_non_null(p);
	assert_true(ftp_path_rules(p));
	assert_false(ftp_path_allowed(p, "/", "/secret"));
	assert_false(ftp_path_allowed(p, "/", "/secret/a.txt"));
	assert_true(ftp_path_allowed(p, "/", "/dl/secret"));
	assert_true(ftp_path_allowed(p, "/", "/SECRET/a.txt"));
	assert_true(ftp_path_allowed(p, "/", "/"));
	assert_false(ftp_path_allowed(p, "/home/u", "/home/u/secret/a"));
	assert_false(ftp_path_allowed(p, "/home/u", "/secret/a"));
	assert_true(ftp_path_allowed(p, "/home/u", "/home/secret/a"));
	assert_false(ftp_path_allowed(p, "/home/u", "/etc/passwd"));
	assert_false(ftp_path_allowed(p, "/", "/etc/passwd"));
	unload(p);
}

/* case="insensitive": patterns and the login directory ignore ASCII
 * case; the default is sensitive. */
static void
test_path_case(void **state)
{
	struct ftp_policy *p;

	(void)state;
	p = load("<ftp case=\"insensitive\">\n"
	    "  <path pattern=\"*.exe\" action=\"deny\"/>\n"
	    "  <path pattern=\"secret/*\" action=\"deny\"/>\n"
	    "</ftp>\n");
	assert_non_null(p);
	assert_true(p->icase);
	assert_false(ftp_path_allowed(p, "/", "/TOOL.EXE"));
	assert_false(ftp_path_allowed(p, "/", "/dl/Tool.Exe"));
	assert_false(ftp_path_allowed(p, "/", "/Secret/a.txt"));
	assert_false(ftp_path_allowed(p, "/Home/U", "/home/u/SECRET/a"));
	assert_true(ftp_path_allowed(p, "/", "/dl/a.txt"));
	unload(p);
	p = load("<ftp case=\"sensitive\">\n"
	    "  <path pattern=\"*.exe\" action=\"deny\"/>\n"
	    "</ftp>\n");
	assert_non_null(p);
	assert_false(p->icase);
	assert_true(ftp_path_allowed(p, "/", "/TOOL.EXE"));
	assert_false(ftp_path_allowed(p, "/", "/tool.exe"));
	unload(p);
	p = load("<ftp/>");
	assert_false(p->icase);
	assert_false(ftp_path_rules(p));
	unload(p);
}

/* Every loader error, as "t.xml:LINE: what" (the first one reported). */
static void
test_errors(void **state)
{
	static const struct {
		const char *xml;
		const char *first;
	} cases[] = {
		{ "<ftp client-data=\"sideways\"/>",
		  "t.xml:1: client-data=\"sideways\": expected keep, active or passive" },
		{ "<ftp server-data=\"\"/>",
		  "t.xml:1: server-data=\"\": expected keep, active or passive" },
		{ "<ftp data-ports=\"41000-40000\"/>",
		  "t.xml:1: data-ports=\"41000-40000\": the low port is above the high one (expected LOW-HIGH within 1024..65535)" },
		{ "<ftp data-ports=\"40000\"/>",
		  "t.xml:1: data-ports=\"40000\": expected LOW-HIGH, 1024..65535 (expected LOW-HIGH within 1024..65535)" },
		{ "<ftp strict-port-check=\"maybe\"/>",
		  "t.xml:1: strict-port-check=\"maybe\": expected yes or no" },
		{ "<ftp>\n<limits/>\n<limits/></ftp>",
		  "t.xml:3: <limits> given twice" },
		{ "<ftp>\n\n<ldap/></ftp>",
		  "t.xml:3: <ldap>: unknown in <ftp>" },
		{ "<ftp>\n<command name=\"RETR\" action=\"maybe\"/></ftp>",
		  "t.xml:2: action=\"maybe\": expected accept or deny" },
		{ "<ftp>\n<command name=\"RETR\" action=\"abort\"/></ftp>",
		  "t.xml:2: action=\"abort\": expected accept or deny" },
		{ "<ftp>\n<command name=\"RETR\"/></ftp>",
		  "t.xml:2: <command> needs action= (accept or deny)" },
		{ "<ftp>\n<command name=\"7ETR\" action=\"deny\"/></ftp>",
		  "t.xml:2: command \"7ETR\": expected 1 to 8 letters and "
		  "digits, a letter first, or *" },
		/* no patterns: a verb is a name */
		{ "<ftp>\n<command name=\"RE*\" action=\"deny\"/></ftp>",
		  "t.xml:2: command \"RE*\": expected 1 to 8 letters and "
		  "digits, a letter first, or *" },
		{ "<ftp>\n<command name=\"ABCDEFGHI\" action=\"deny\"/></ftp>",
		  "t.xml:2: command \"ABCDEFGHI\": expected 1 to 8 letters "
		  "and digits, a letter first, or *" },
		{ "<ftp>\n<command name=\"RETR\" action=\"deny\"/>\n"
		  "<command name=\"stor retr\" action=\"accept\"/></ftp>",
		  "t.xml:3: command RETR has a rule already" },
		{ "<ftp>\n<command name=\" \" action=\"deny\"/></ftp>",
		  "t.xml:2: <command> needs name=\"VERB ...\"" },
		{ "<ftp>\n<command action=\"deny\"/></ftp>",
		  "t.xml:2: <command> needs name=\"VERB ...\"" },
		{ "<ftp>\n<command name=\"*\" action=\"deny\"/>\n"
		  "<command name=\"NOOP *\" action=\"accept\"/></ftp>",
		  "t.xml:3: command \"*\" given twice" },
		{ "<ftp>\n<user name=\"\" action=\"deny\"/></ftp>",
		  "t.xml:2: <user> needs a non-empty name=" },
		{ "<ftp>\n<user name=\"  \" action=\"deny\"/></ftp>",
		  "t.xml:2: <user> needs a non-empty name=" },
		{ "<ftp>\n<user name=\"bob\" action=\"maybe\"/></ftp>",
		  "t.xml:2: action=\"maybe\": expected accept or deny" },
		{ "<ftp>\n<path action=\"deny\"/></ftp>",
		  "t.xml:2: <path> needs a non-empty pattern=" },
		{ "<ftp>\n<path pattern=\"*.exe\"/></ftp>",
		  "t.xml:2: <path> needs action= (accept or deny)" },
		{ "<ftp case=\"upper\"/>",
		  "t.xml:1: case=\"upper\": expected sensitive or insensitive" },
	};
	struct ftp_policy *p;
	char xml[512], big[300];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (load(cases[i].xml) != NULL)
			fail_msg("case %zu loaded: %s", i, cases[i].xml);
		assert_string_equal(err.first, cases[i].first);
	}
	/* A pattern is at most 255 bytes. */
	memset(big, 'a', 256);
	big[256] = '\0';
	snprintf(xml, sizeof(xml), "<ftp>\n<user name=\"ftp %s\" "
	    "action=\"accept\"/></ftp>", big);
	assert_null(load(xml));
	assert_string_equal(err.first,
	    "t.xml:2: name: a pattern longer than 255 bytes");
	big[255] = '\0';
	snprintf(xml, sizeof(xml), "<ftp>\n<path pattern=\"%s\" "
	    "action=\"deny\"/></ftp>", big);
	p = load(xml);
	assert_non_null(p);
	unload(p);
	/* Every error is counted, not only the first. */
	assert_null(load("<ftp client-data=\"x\" strict-port-check=\"x\">\n"
	    "<limits max-line=\"1\"/>\n"
	    "<user name=\"\" action=\"deny\"/></ftp>"));
	assert_int_equal(err.count, 4);
	assert_string_equal(err.first,
	    "t.xml:1: client-data=\"x\": expected keep, active or passive");
}

/* <ftp> inside a <service>: its parent tells whether there is an <auth>
 * (user=, group= and <login> need one). NULL: refused. */
static struct ftp_policy *
load_in_service(const char *xml)
{
	xmlDoc *doc;
	xmlNode *n;
	void *pol = NULL;
	int rc;

	memset(&err, 0, sizeof(err));
	err.file = "t.xml";
	doc = xmlReadMemory(xml, (int)strlen(xml), "t.xml", NULL,
	    XML_PARSE_NONET);
	assert_non_null(doc);
	for (n = xmlDocGetRootElement(doc)->children; n != NULL; n = n->next)
		if (n->type == XML_ELEMENT_NODE &&
		    xmlStrcmp(n->name, (const xmlChar *)"ftp") == 0)
			break;
	assert_non_null(n);
	rc = ftp_analyser.policy_load(n, &pol, &err);
	xmlFreeDoc(doc);
	return rc == 0 ? pol : NULL;
}

static void
test_who(void **state)
{
	static const char groups[] = "cn=ops,ou=groups,dc=example,dc=test\0";
	struct px_auth_id alice = { .user = "alice",
	    .groups = (char *)groups, .groups_len = sizeof(groups) };
	struct px_auth_id bob = { .user = "bob" };
	const struct ftp_login *l;
	struct ftp_policy *p;

	(void)state;
	p = load_in_service("<service><auth authenticator=\"dir\"/><ftp>\n"
	    "<login group=\"ops\" server-user=\"opsftp\" quota-transfers=\"5\"/>\n"
	    "<login user=\"bob\" pass-password=\"yes\"/>\n"
	    "<login user=\"*\" server-user=\"anonymous\"/>\n"
	    "<command name=\"DELE\" user=\"alice\" action=\"accept\"/>\n"
	    "<command name=\"DELE\" action=\"deny\"/>\n"
	    "<path pattern=\"/ops/*\" group=\"ops\" action=\"accept\"/>\n"
	    "<path pattern=\"/ops/*\" action=\"deny\"/>\n"
	    "</ftp></service>");
	assert_non_null(p);
	/* nobody proven: the rules for some users are passed by */
	ftp_policy_who(NULL);
	assert_false(ftp_cmd_allowed(p, "DELE"));
	assert_false(ftp_path_allowed(p, "/", "/ops/a"));
	ftp_policy_who(&alice);
	assert_true(ftp_cmd_allowed(p, "DELE"));
	assert_true(ftp_path_allowed(p, "/", "/ops/a"));
	ftp_policy_who(&bob);
	assert_false(ftp_cmd_allowed(p, "DELE"));
	assert_false(ftp_path_allowed(p, "/", "/ops/a"));
	assert_true(ftp_path_allowed(p, "/", "/pub/a"));
	ftp_policy_who(NULL);
	l = ftp_login_for(p, &alice);
	assert_non_null(l);
	assert_string_equal(l->server_user, "opsftp");
	assert_int_equal(l->quota.transfers, 5);
	assert_int_equal(l->line, 2);
	l = ftp_login_for(p, &bob);
	assert_true(l->pass_password);
	assert_null(l->server_user);
	bob.user[0] = 'B';	/* "Bob": names compare exactly */
	assert_string_equal(ftp_login_for(p, &bob)->server_user, "anonymous");
	unload(p);

	/* without <auth>: refused where they stand */
	assert_null(load_in_service("<service><ftp>\n"
	    "<login user=\"*\" server-user=\"anonymous\"/></ftp></service>"));
	assert_string_equal(err.first, "t.xml:2: <login>: the service has no "
	    "<auth>: proxyd logs into the server only for users it "
	    "authenticated");
	assert_null(load_in_service("<service><ftp>\n"
	    "<path pattern=\"*\" user=\"a\" action=\"deny\"/></ftp></service>"));
	assert_string_equal(err.first, "t.xml:2: user=/group=: the service has "
	    "no <auth> to say who its users are");
	/* user= and group= read as <scan>'s and <content>'s (px_who_set):
	 * an empty list is an error at its line, naming its element */
	assert_null(load_in_service("<service><auth authenticator=\"d\"/><ftp>\n"
	    "<command name=\"DELE\" group=\" \" action=\"deny\"/>"
	    "</ftp></service>"));
	assert_string_equal(err.first, "t.xml:2: <command group=\"\">: empty "
	    "list");
	/* a <login> that says no server user, or two passwords */
	assert_null(load_in_service("<service><auth authenticator=\"d\"/><ftp>\n"
	    "<login user=\"*\"/></ftp></service>"));
	assert_string_equal(err.first, "t.xml:2: <login>: server-user= is "
	    "required (or pass-password=\"yes\": the user's own name and "
	    "password)");
	assert_null(load_in_service("<service><auth authenticator=\"d\"/><ftp>\n"
	    "<login user=\"*\" pass-password=\"yes\" server-password-file=\"x\"/>"
	    "</ftp></service>"));
	assert_string_equal(err.first, "t.xml:2: <login>: server-password-file= "
	    "and pass-password=\"yes\" together");
	assert_null(load_in_service("<service><auth authenticator=\"d\"/><ftp>\n"
	    "<login server-user=\"u\" server-password-file=\"/nonexistent/pw\"/>"
	    "</ftp></service>"));
	assert_string_equal(err.first, "t.xml:2: server-password-file="
	    "\"/nonexistent/pw\": No such file or directory");
	assert_null(load_in_service("<service><auth authenticator=\"d\"/><ftp>\n"
	    "<command name=\"*\" user=\"a\" action=\"deny\"/></ftp></service>"));
	assert_string_equal(err.first, "t.xml:2: command \"*\" with "
	    "user=/group=: name the commands");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_attributes),
		cmocka_unit_test(test_commands),
		cmocka_unit_test(test_refs),
		cmocka_unit_test(test_users),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_path_case),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_who),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
