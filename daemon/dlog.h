/*
 * cxlcrd's log: one line per event on stderr (or the fd a worker kept).
 *
 * Run by systemd with stderr connected to the journal ($JOURNAL_STREAM
 * names stderr's device:inode), each line starts with the sd-daemon
 * priority prefix `<N>` and carries no time of its own (the journal adds
 * one); otherwise a line is "TIME cxlcrd[HOST]: MESSAGE" for a log file.
 */
#ifndef CXLCR_DAEMON_DLOG_H
#define CXLCR_DAEMON_DLOG_H

#include <syslog.h>

/* Looks at stderr and $JOURNAL_STREAM once; host names the lines. */
void dlog_init(const char *host);
/* Where the lines go from now on (a worker keeps the daemon's stderr). */
void dlog_set_fd(int fd);
void dlog(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* dlog at LOG_INFO, for callers that take a plain printf-like logger. */
void dlog_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An error before the log is set up (a bad flag or configuration line):
 * "cxlcrd: MESSAGE" on stderr, with the journal's <3> in front when stderr
 * is the journal, so that `journalctl -p err` shows why it did not start. */
void dlog_startup_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
