/*
 * The pod's API token: whoever can read POD_DIR/api-token (root) may use
 * the fork API over TCP. It is made once per pod, by `cxlcr pod up` or the
 * first daemon, and goes with the pod (`pod down` removes the directory).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"
#include "../include/cxlcr/cxlcr.h"
#include "api.h"

static void token_path(const struct pod *pod, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", pod->dir, API_TOKEN_FILE);
}

/* Written under a temporary name and linked into place, so that a reader
 * never sees half a token and two makers cannot both win. */
int api_token_ensure(const struct pod *pod)
{
	char path[128], tmp[160];
	token_path(pod, path, sizeof(path));
	if (access(path, F_OK) == 0)
		return 0;
	unsigned char raw[CXLCR_API_TOKEN_LEN / 2];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return cxlcr_error("cannot make an API token: getrandom: %s", strerror(errno));
	char hex[CXLCR_API_TOKEN_LEN + 2];
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	strcat(hex, "\n");
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	int fd = mkstemp(tmp); /* mode 0600 */
	if (fd < 0)
		return cxlcr_error("cannot write %s: %s", tmp, strerror(errno));
	bool written = write(fd, hex, strlen(hex)) == (ssize_t)strlen(hex) && fchmod(fd, 0600) == 0;
	int e = errno;
	close(fd);
	if (!written || (link(tmp, path) < 0 && errno != EEXIST)) {
		e = written ? errno : e;
		unlink(tmp);
		return cxlcr_error("cannot write %s: %s", path, strerror(e));
	}
	unlink(tmp);
	explicit_bzero(hex, sizeof(hex));
	return 0;
}

int api_token_read(const struct pod *pod, char *buf, size_t len)
{
	char path[128];
	token_path(pod, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return cxlcr_error("cannot read the API token %s: %s", path, strerror(errno));
	char text[CXLCR_API_TOKEN_LEN + 2];
	ssize_t n = read(fd, text, sizeof(text));
	close(fd);
	bool sized = n == CXLCR_API_TOKEN_LEN || (n == CXLCR_API_TOKEN_LEN + 1 && text[n - 1] == '\n');
	if (sized)
		text[CXLCR_API_TOKEN_LEN] = 0;
	if (!sized ||
	    strspn(text, "0123456789abcdef") != CXLCR_API_TOKEN_LEN || len <= CXLCR_API_TOKEN_LEN)
		return cxlcr_error("the API token %s is not %d hex digits", path, CXLCR_API_TOKEN_LEN);
	memcpy(buf, text, CXLCR_API_TOKEN_LEN + 1);
	explicit_bzero(text, sizeof(text));
	return 0;
}

bool api_token_matches(const char *given, const char *expected)
{
	size_t want = strlen(expected), got = strnlen(given, want + 1);
	unsigned char diff = got != want || want == 0;
	/* Every byte is looked at, whatever the first difference. */
	for (size_t i = 0; i < want; i++)
		diff |= (unsigned char)((i < got ? given[i] : 0) ^ expected[i]);
	return diff == 0;
}
