/* The pod's membership as this host sees it (see membership.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/pool.h"
#include "../common/util.h"
#include "membership.h"

#define HISTORY_DIR   "/run/cxlcr"
#define HISTORY_MAGIC "CXLCRHW1"

struct history {
	char magic[8];
	uint32_t size;               /* sizeof(struct history): one binary's own file */
	char boot_id[40];            /* the monotonic clock's boot */
	struct cxlcr_hosts_watch watch;
};

static void boot_id(char *buf, size_t len)
{
	memset(buf, 0, len);
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, buf, len - 1) < 0)
			buf[0] = 0;
		close(fd);
	}
}

static void uuid_path(const uint8_t uuid[16], char *buf, size_t len)
{
	char hex[33];
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", uuid[i]);
	snprintf(buf, len, "%s/hosts-%s.watch", HISTORY_DIR, hex);
}

static void history_path(const struct cxlcr_hosts_map *m, char *buf, size_t len)
{
	uuid_path(m->header->pool_uuid, buf, len);
}

void membership_forget(const uint8_t pool_uuid[16])
{
	char path[128];
	uuid_path(pool_uuid, path, sizeof(path));
	unlink(path);
}

/* What an earlier reader of this host, since this boot, saw of this pool;
 * only from a directory nobody but root could have written. */
static void history_load(const struct cxlcr_hosts_map *m, struct cxlcr_hosts_watch *w)
{
	static struct history h;
	char path[128], boot[40];
	history_path(m, path, sizeof(path));
	boot_id(boot, sizeof(boot));
	if (cxlcr_check_trusted_dir(HISTORY_DIR) < 0)
		return;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	bool ok = read(fd, &h, sizeof(h)) == (ssize_t)sizeof(h) && !memcmp(h.magic, HISTORY_MAGIC, 8) &&
		  h.size == sizeof(h) && boot[0] && !memcmp(h.boot_id, boot, sizeof(boot)) &&
		  !memcmp(h.watch.pool_uuid, m->header->pool_uuid, sizeof(h.watch.pool_uuid));
	close(fd);
	if (ok) {
		uint64_t lease = w->lease_ns;
		memcpy(w->entry, h.watch.entry, sizeof(w->entry));
		memcpy(w->pool_uuid, h.watch.pool_uuid, sizeof(w->pool_uuid));
		w->lease_ns = lease;
	}
}

/* Best effort: a reader that cannot keep its history (not root) judges
 * from its own window only. */
static void history_save(const struct cxlcr_hosts_map *m, const struct cxlcr_hosts_watch *w)
{
	static struct history h;
	char path[128], tmp[160];
	if (cxlcr_check_trusted_dir(HISTORY_DIR) < 0)
		return;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, HISTORY_MAGIC, 8);
	h.size = sizeof(h);
	boot_id(h.boot_id, sizeof(h.boot_id));
	h.watch = *w;
	history_path(m, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	bool ok = write(fd, &h, sizeof(h)) == (ssize_t)sizeof(h);
	close(fd);
	if (!ok || rename(tmp, path) < 0)
		unlink(tmp);
}

/* Whether every running host is judged from this window: seen to
 * advance, or silent long enough to be suspect. */
static bool all_judged(const struct cxlcr_hosts_watch *w, uint64_t now)
{
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++)
		if (cxlcr_hosts_judge(w, i, now, NULL) == CXLCR_VERDICT_WATCHING)
			return false;
	return true;
}

void membership_sample(const struct cxlcr_hosts_map *m, struct cxlcr_hosts_watch *w, uint64_t *now)
{
	history_load(m, w);
	uint64_t start = cxlcr_mono_ns(), longest = 0, shortest = UINT64_MAX;
	cxlcr_hosts_observe(w, m, start);
	/* A change since the last reader is a renewal too, but of unknown
	 * age: this window's own sightings say how long ago. */
	cxlcr_hosts_advanced_reset(w);
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		const struct cxlcr_host_seen *s = &w->entry[i];
		if (s->intact && s->state == CXLCR_HOST_RUNNING && s->period_ns) {
			longest = s->period_ns > longest ? s->period_ns : longest;
			shortest = s->period_ns < shortest ? s->period_ns : shortest;
		}
	}
	/* Look often enough to date a renewal to a tenth of a period. */
	uint64_t step = shortest == UINT64_MAX ? 0 : shortest / 10;
	step = step < 1000000ull ? 1000000ull : step > 50000000ull ? 50000000ull : step;
	uint64_t t = start;
	while (!all_judged(w, t) && t - start <= 2 * longest) {
		struct timespec ts = { 0, (long)step };
		nanosleep(&ts, NULL);
		t = cxlcr_mono_ns();
		cxlcr_hosts_observe(w, m, t);
	}
	*now = t;
	history_save(m, w);
}
