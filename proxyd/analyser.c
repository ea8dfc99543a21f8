#include "analyser.h"

#include <stdio.h>
#include <string.h>

const struct px_analyser *
px_analyser_find(const char *name)
{
	size_t i;

	for (i = 0; px_analysers[i] != NULL; i++)
		if (strcmp(px_analysers[i]->name, name) == 0)
			return px_analysers[i];
	return NULL;
}

unsigned
px_analyser_index(const struct px_analyser *a)
{
	unsigned i;

	for (i = 0; px_analysers[i] != NULL && px_analysers[i] != a; i++)
		;
	return i;
}

int
px_analyser_registry_check(void)
{
	size_t i, j;

	for (i = 0; px_analysers[i] != NULL; i++) {
		const struct px_analyser *a = px_analysers[i];

		if (a->name == NULL || a->name[0] == '\0' || a->on_open == NULL) {
			fprintf(stderr, "proxyd: analyser #%zu is incomplete\n", i);
			return -1;
		}
		if (i >= PX_ANALYSERS_MAX) {
			fprintf(stderr, "proxyd: more than %d analysers\n",
			    PX_ANALYSERS_MAX);
			return -1;
		}
		for (j = 0; a->counters != NULL && a->counters[j] != NULL; j++)
			;
		if (j > PX_AN_COUNTERS_MAX) {
			fprintf(stderr, "proxyd: analyser '%s' has more than %d "
			    "counters\n", a->name, PX_AN_COUNTERS_MAX);
			return -1;
		}
		for (j = 0; j < i; j++)
			if (strcmp(px_analysers[j]->name, a->name) == 0) {
				fprintf(stderr, "proxyd: analyser '%s' registered twice\n",
				    a->name);
				return -1;
			}
	}
	return 0;
}
