/*
 * The pod's API token: whoever knows it may use the fork API over TCP.
 *
 * It is derived from the pod's key in the pool (BLAKE2b keyed with it, of
 * a fixed label), so every host of the pod has the same token without
 * sharing a file: whoever can map the pool (root of a machine of the pod)
 * can compute it, as it can the key. Each daemon, and `cxlcr pod up` on
 * the machine that runs an emulated pod, keep it in their own
 * POD_DIR/api-token (mode 0600) for local clients to read.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"
#include "../include/cxlcr/cxlcr.h"
#include "api.h"
#include "rpc_tcp.h"

#define TOKEN_LABEL "cxlcr fork API token, version 1"

static void token_path(const struct pod *pod, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", pod->dir, API_TOKEN_FILE);
}

int api_token_derive(bool create, char *buf, size_t len)
{
	uint8_t key[32], raw[CXLCR_API_TOKEN_LEN / 2];
	if (len <= CXLCR_API_TOKEN_LEN)
		return cxlcr_error("API token buffer too small");
	if (sodium_init() < 0)
		return cxlcr_error("libsodium cannot start");
	if (rpc_pod_key(key, create) < 0)
		return -1;
	crypto_generichash(raw, sizeof(raw), (const unsigned char *)TOKEN_LABEL, strlen(TOKEN_LABEL), key,
			   sizeof(key));
	sodium_memzero(key, sizeof(key));
	sodium_bin2hex(buf, len, raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	return 0;
}

/* Written under a temporary name and renamed into place, so that a reader
 * never sees half a token. */
int api_token_ensure(const struct pod *pod)
{
	char path[128], tmp[160], hex[CXLCR_API_TOKEN_LEN + 2];
	token_path(pod, path, sizeof(path));
	if (api_token_derive(true, hex, sizeof(hex)) < 0)
		return -1;
	strcat(hex, "\n");
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	int fd = mkstemp(tmp); /* mode 0600 */
	if (fd < 0) {
		sodium_memzero(hex, sizeof(hex));
		return cxlcr_error("cannot write %s: %s", tmp, strerror(errno));
	}
	bool written = write(fd, hex, strlen(hex)) == (ssize_t)strlen(hex) && fchmod(fd, 0600) == 0;
	int e = errno;
	close(fd);
	sodium_memzero(hex, sizeof(hex));
	if (!written || rename(tmp, path) < 0) {
		e = written ? errno : e;
		unlink(tmp);
		return cxlcr_error("cannot write %s: %s", path, strerror(e));
	}
	return 0;
}
