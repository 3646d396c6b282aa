#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "pool_format.h"
#include "util.h"

uint64_t cxlcr_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t cxlcr_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* An absolute CLOCK_MONOTONIC timeout (FUTEX_WAIT_BITSET), so that no
 * caller converts a span into a timespec: a tv_nsec of a second or more is
 * EINVAL, which turned one caller's 2 s wait into a busy loop. */
void cxlcr_futex_wait_until(uint32_t *word, uint32_t val, uint64_t deadline_ns)
{
	if (cxlcr_mono_ns() >= deadline_ns)
		return;
	struct timespec at = { (time_t)(deadline_ns / 1000000000ull), (long)(deadline_ns % 1000000000ull) };
	syscall(SYS_futex, word, FUTEX_WAIT_BITSET, val, deadline_ns == CXLCR_FOREVER ? NULL : &at, NULL,
		FUTEX_BITSET_MATCH_ANY);
}

void cxlcr_futex_wake_all(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}

int cxlcr_parse_count(const char *text, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (!*text || *end || errno || text[0] < '0' || text[0] > '9' || v > max)
		return -1;
	*out = v;
	return 0;
}

int cxlcr_parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -1;
	double v = strtod(s, &end);
	if (end == s || v < 0)
		return -1;
	double mul = 1;
	switch (toupper((unsigned char)*end)) {
	case 'K': mul = 1024.0; end++; break;
	case 'M': mul = 1024.0 * 1024; end++; break;
	case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
	case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
	}
	if (mul > 1 && (!strcasecmp(end, "iB") || !strcasecmp(end, "B")))
		end += strlen(end);
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	v *= mul;
	if (v >= 18446744073709551615.0)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

const char *cxlcr_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, unit[u]);
	return buf;
}

static __thread char host_name[CXLCR_HOST_MAX];

void cxlcr_host_name_set(const char *name)
{
	cxlcr_copy_field(host_name, sizeof(host_name), name);
}

const char *cxlcr_host_name(void)
{
	char *name = host_name;
	struct utsname u;
	if (!name[0]) {
		if (uname(&u) == 0)
			cxlcr_copy_field(name, sizeof(host_name), u.nodename);
		else
			cxlcr_copy_field(name, sizeof(host_name), "unknown");
	}
	return name;
}

void cxlcr_copy_field(char *dst, size_t len, const char *src)
{
	size_t n = src ? strnlen(src, len - 1) : 0;
	memcpy(dst, src ? src : "", n);
	memset(dst + n, 0, len - n);
}

bool cxlcr_valid_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n >= CXLCR_NAME_MAX || name[0] == '.' || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return false;
	return true;
}

bool cxlcr_image_set_of(const char *region_name, const char *service)
{
	const char *dot = strrchr(region_name, '.');
	if (!dot || dot == region_name || !dot[1])
		return false;
	for (const char *p = dot + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return (size_t)(dot - region_name) == strlen(service) && !strncmp(region_name, service, strlen(service));
}

uint64_t cxlcr_pid_namespace(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* /proc/PID/stat from its state on ("R 1 ..."), into line: 1, 0 if pid has
 * no such process, -1 if the look failed otherwise. "pid (comm) state
 * ...": comm may hold anything, so it is found from the last ')'. */
static int stat_fields(int32_t pid, char *line, size_t len, char **state)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? 0 : -1;
	ssize_t n = read(fd, line, len - 1);
	int err = errno;
	close(fd);
	if (n <= 0)
		return n == 0 || err == ESRCH ? 0 : -1; /* (it ended between the open and the read) */
	line[n] = 0;
	char *p = strrchr(line, ')');
	if (!p || p[1] != ' ')
		return -1;
	*state = p + 2;
	return 1;
}

char cxlcr_process_state(int32_t pid)
{
	char line[1024], *p;
	return stat_fields(pid, line, sizeof(line), &p) == 1 ? *p : 0;
}

int cxlcr_process_start_known(int32_t pid, uint64_t *start)
{
	char line[1024], *p;
	int rc = stat_fields(pid, line, sizeof(line), &p);
	if (rc != 1)
		return rc;
	if (*p == 'Z' || *p == 'X' || *p == 'x')
		return 0;
	for (int field = 3; field < 22; field++) { /* starttime is field 22 */
		p = strchr(p, ' ');
		if (!p)
			return -1;
		p++;
	}
	*start = strtoull(p, NULL, 10);
	return 1;
}

bool cxlcr_process_start(int32_t pid, uint64_t *start)
{
	return cxlcr_process_start_known(pid, start) == 1;
}

bool cxlcr_pid_has_file_open(int32_t pid, uint64_t dev, uint64_t ino)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return false;
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		struct stat st;
		found = e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_ino == ino &&
			st.st_dev == dev;
	}
	closedir(d);
	return found;
}

bool cxlcr_pidfd_kill_wait(int fd, int timeout_ms)
{
	syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0); /* fails only if it has ended */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, timeout_ms) == 1;
}

int32_t cxlcr_pidfd_pid(int fd)
{
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(path, "re");
	int pid = 0;
	while (f && fgets(line, sizeof(line), f) && sscanf(line, "Pid: %d", &pid) != 1)
		;
	if (f)
		fclose(f);
	return pid > 0 ? pid : 0;
}

bool cxlcr_pidfd_running(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return fd >= 0 && poll(&p, 1, 0) == 0;
}

bool cxlcr_pid_maps_file(int32_t pid, uint64_t dev, uint64_t ino, uint64_t lo, uint64_t hi)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long start, end;
		unsigned long long off, inode;
		unsigned int maj, min;
		if (sscanf(line, "%lx-%lx %*s %llx %x:%x %llu", &start, &end, &off, &maj, &min, &inode) != 6 ||
		    inode != ino || makedev(maj, min) != dev)
			continue;
		found = hi == 0 || (off < hi && off + (end - start) > lo);
	}
	fclose(f);
	return found;
}

bool cxlcr_file_range_mapped(uint64_t dev, uint64_t ino, uint64_t lo, uint64_t hi)
{
	DIR *d = opendir("/proc");
	if (!d)
		return true; /* cannot tell: as if it were */
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		int32_t pid = (int32_t)atoi(e->d_name);
		found = pid > 0 && cxlcr_pid_maps_file(pid, dev, ino, lo, hi);
	}
	closedir(d);
	return found;
}

int cxlcr_utf8_length(const unsigned char *s)
{
	unsigned char c = s[0];
	int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	for (int i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
	    (c == 0xf4 && s[1] > 0x8f))
		return 0;
	return n;
}
