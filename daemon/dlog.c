/* cxlcrd's log (see dlog.h). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dlog.h"

static int log_fd = STDERR_FILENO;
static bool journal;
static const char *log_host = "?";

/* systemd sets $JOURNAL_STREAM to "DEV:INODE" of the stream it gave the
 * service; the prefixes are for the journal only, so stderr must still
 * be that stream (not redirected since, as `pod up` does). */
static bool stderr_is_journal(void)
{
	const char *v = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	if (!v || sscanf(v, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void dlog_init(const char *host)
{
	log_host = host ? host : "?";
	journal = stderr_is_journal();
}

void dlog_set_fd(int fd)
{
	log_fd = fd;
}

static void vlog(int priority, const char *fmt, va_list ap)
{
	char line[1024];
	int n;
	if (journal) {
		n = snprintf(line, sizeof(line), "<%d>", priority & LOG_PRIMASK);
	} else {
		char when[32];
		time_t t = time(NULL);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime(&t));
		n = snprintf(line, sizeof(line), "%s cxlcrd[%s]: ", when, log_host);
	}
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	dprintf(log_fd, "%s\n", line);
}

void dlog(int priority, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(priority, fmt, ap);
	va_end(ap);
}

void dlog_info(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(LOG_INFO, fmt, ap);
	va_end(ap);
}

void dlog_startup_error(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	dprintf(STDERR_FILENO, "%scxlcrd: %s\n", stderr_is_journal() ? "<3>" : "", line);
}
