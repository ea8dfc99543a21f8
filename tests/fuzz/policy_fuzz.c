/* libFuzzer target for the policy loader (proxyd/config/config.c and every
 * analyser's policy_load): the input is one whole service policy file,
 * written as the only file of a policies dir next to a fixed daemon file
 * (with zones and an admin endpoint, so references to them resolve), then
 * px_config_load and px_config_unref, as --check and a reload do. Beyond
 * the sanitizers (leaks on every error path included) it checks:
 *   - a refused file has at least one error, a loaded one none;
 *   - a loaded config has exactly the one service, named, with a file and
 *     an analyser, in one group;
 * Build and run: tests/fuzz/run.sh policy SECONDS */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libxml/parser.h>

#include "analyser.h"
#include "config.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s " \
	"(%s:%d)\n", #c, __FILE__, __LINE__); abort(); } } while (0)

static const char daemon_xml[] =
	"<proxyd>\n"
	"  <workers>1</workers>\n"
	"  <log target=\"stderr\" level=\"info\"/>\n"
	"  <zones>\n"
	"    <zone name=\"lan\" addresses=\"198.18.0.0/24 2001:db8:1::/64\">\n"
	"      <zone name=\"admins\" addresses=\"198.18.0.16/28\"/>\n"
	"    </zone>\n"
	"    <zone name=\"dmz\" addresses=\"198.19.2.0/24\">\n"
	"      <zone name=\"web\" addresses=\"198.19.2.0/28\"/>\n"
	"    </zone>\n"
	"    <zone name=\"internet\" addresses=\"0.0.0.0/0 ::/0\"/>\n"
	"  </zones>\n"
	"  <admin listen=\"127.0.0.1:9180\"/>\n"
	"  <policies dir=\"policy\"/>\n"
	"</proxyd>\n";

static char dir[64];
static char conf_path[96], policy_path[96];

static void
policy_cleanup(void)
{
	char p[96];

	unlink(policy_path);
	unlink(conf_path);
	snprintf(p, sizeof(p), "%s/policy", dir);
	rmdir(p);
	rmdir(dir);
}

static void
policy_setup(void)
{
	char p[96];
	FILE *f;
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/policy-fuzz.XXXXXX",
	    tmp != NULL && strlen(tmp) < 32 ? tmp : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(p, sizeof(p), "%s/policy", dir);
	CHECK(mkdir(p, 0700) == 0);
	snprintf(conf_path, sizeof(conf_path), "%s/proxyd.xml", dir);
	snprintf(policy_path, sizeof(policy_path), "%s/policy/s.xml", dir);
	CHECK((f = fopen(conf_path, "w")) != NULL);
	CHECK(fwrite(daemon_xml, 1, sizeof(daemon_xml) - 1, f) ==
	    sizeof(daemon_xml) - 1);
	CHECK(fclose(f) == 0);
	atexit(policy_cleanup);
	xmlInitParser();
	CHECK(px_analyser_registry_check() == 0);
}

/* Loads the daemon file with data as the policy; returns the error count
 * (0: loaded and checked). */
static unsigned
load_once(void)
{
	struct px_cfgerr err;
	struct px_config *c;

	memset(&err, 0, sizeof(err));
	c = px_config_load(conf_path, &err);
	if (c == NULL) {
		CHECK(err.count > 0);
		return err.count;
	}
	CHECK(err.count == 0);
	CHECK(c->nservices == 1);
	CHECK(c->services[0].name != NULL && c->services[0].name[0] != '\0');
	CHECK(c->services[0].file != NULL);
	CHECK(c->services[0].analyser != NULL);
	CHECK(c->ngroups == 1 && c->services[0].group == &c->groups[0]);
	px_config_unref(c);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	FILE *f;

	if (!ready) {
		policy_setup();
		ready = true;
	}
	/* Files this big are not what the loader is about; they only slow
	 * the search down. */
	if (size > 64 * 1024)
		return 0;
	CHECK((f = fopen(policy_path, "w")) != NULL);
	CHECK(fwrite(data, 1, size, f) == size);
	CHECK(fclose(f) == 0);
	(void)load_once();
	return 0;
}
