/*
 * Where a cxlcr binary finds its companions: the preload it gives services,
 * the CRIU plugin, the daemon. Run from the build tree they sit next to it
 * (build/); installed (`make install`) they are under its prefix:
 *
 *   PREFIX/bin/cxlcr, PREFIX/bin/cxlcrd, PREFIX/bin/cxlcr-memd
 *   PREFIX/lib/cxlcr/libcxlcr-preload.so
 *   CXLCR_CRIU_PLUGIN_DIR/cxlcr_criu.so   (CRIU's plugin directory, given
 *                                          at build time; /usr/lib/criu)
 *
 * Paths relative to the binary come first, so that a tree installed with
 * DESTDIR finds its own files, not another installation's. The
 * environment ($CXLCR_PRELOAD, $CXLCR_CRIU_PLUGIN_DIR) overrides all.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef CXLCR_CRIU_PLUGIN_DIR
#define CXLCR_CRIU_PLUGIN_DIR "/usr/lib/criu"
#endif

const char *path_near_exe(const char *rel, char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	if ((size_t)snprintf(buf, len, "%s/%s", exe, rel) >= len || access(buf, F_OK) != 0)
		return NULL;
	return buf;
}

const char *installed_preload(char *buf, size_t len)
{
	const char *env = getenv("CXLCR_PRELOAD");
	if (env && *env)
		return env;
	const char *p = path_near_exe("libcxlcr-preload.so", buf, len);
	if (!p && (p = path_near_exe("../lib/cxlcr/libcxlcr-preload.so", buf, len))) {
		char *abs = realpath(p, NULL); /* without the "bin/..": it is in every service's environment */
		if (abs && strlen(abs) < len)
			strcpy(buf, abs);
		free(abs);
	}
	return p;
}

/* The directory holding cxlcr_criu.so (CRIU loads every library of the
 * directory it is given: the build tree's criu/ holds only ours). Found
 * by the plugin in it, not by the name: an installed cxlcr sits next to
 * the criu binary in /usr/local/bin. */
const char *installed_plugin_dir(void)
{
	static char dir[PATH_MAX];
	const char *env = getenv("CXLCR_CRIU_PLUGIN_DIR");
	if (env && *env)
		return env;
	static const char *const near[] = { "criu/cxlcr_criu.so", "../lib/criu/cxlcr_criu.so" };
	for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
		if (path_near_exe(near[i], dir, sizeof(dir))) {
			*strrchr(dir, '/') = 0;
			char *abs = realpath(dir, NULL);
			if (abs) {
				snprintf(dir, sizeof(dir), "%s", abs);
				free(abs);
			}
			return dir;
		}
	}
	return CXLCR_CRIU_PLUGIN_DIR;
}

/* A companion binary: next to this one, else found on the PATH. */
static const char *installed_binary(const char *name, char *buf, size_t len)
{
	const char *p = path_near_exe(name, buf, len);
	if (!p)
		snprintf(buf, len, "%s", name);
	return buf;
}

const char *installed_daemon(char *buf, size_t len)
{
	return installed_binary("cxlcrd", buf, len);
}

const char *installed_memd(char *buf, size_t len)
{
	return installed_binary("cxlcr-memd", buf, len);
}
