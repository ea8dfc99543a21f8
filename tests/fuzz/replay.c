/* Replays fuzz inputs without libFuzzer: each argument is a file or a
 * directory of files (not recursed), fed one by one to the target's
 * LLVMFuzzerTestOneInput, in name order. A target reports a broken
 * promise by aborting, so the normal and sanitizer builds catch a seed
 * that regressed; the exit status is 0 when every input ran. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
replay_file(const char *path)
{
	FILE *f;
	uint8_t *buf;
	long n;

	if ((f = fopen(path, "rb")) == NULL) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) == -1 || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) == -1) {
		fprintf(stderr, "replay: %s: cannot size it\n", path);
		fclose(f);
		return -1;
	}
	/* malloc(0) may give NULL: one spare byte; the exact size to the
	 * target, so ASan sees reads past the input. */
	if ((buf = malloc((size_t)n + 1)) == NULL ||
	    fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "replay: %s: read failed\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int
main(int argc, char **argv)
{
	unsigned ran = 0, bad = 0;
	int i, k, n;

	for (i = 1; i < argc; i++) {
		struct dirent **ents;
		struct stat st;

		if (stat(argv[i], &st) == -1) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
			    strerror(errno));
			bad++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (replay_file(argv[i]) == 0)
				ran++;
			else
				bad++;
			continue;
		}
		if ((n = scandir(argv[i], &ents, NULL, alphasort)) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
			    strerror(errno));
			bad++;
			continue;
		}
		for (k = 0; k < n; k++) {
			char path[4096];

			snprintf(path, sizeof(path), "%s/%s", argv[i],
			    ents[k]->d_name);
			if (ents[k]->d_name[0] != '.' &&
			    stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				if (replay_file(path) == 0)
					ran++;
				else
					bad++;
			}
			free(ents[k]);
		}
		free(ents);
	}
	printf("replay: %u inputs ran, %u unreadable\n", ran, bad);
	return bad == 0 && ran > 0 ? 0 : 1;
}
