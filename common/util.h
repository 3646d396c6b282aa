#ifndef CXLCR_UTIL_H
#define CXLCR_UTIL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint64_t cxlcr_now_ns(void);          /* CLOCK_REALTIME */
uint64_t cxlcr_mono_ns(void);         /* CLOCK_MONOTONIC */

/* Futexes in the pool (shared between processes): sleeps while *word is
 * still val, until a wake or deadline_ns (cxlcr_mono_ns), which may be
 * past already, or CXLCR_FOREVER; callers re-check their condition after.
 * And wakes every sleeper on word. */
#define CXLCR_FOREVER UINT64_MAX
void cxlcr_futex_wait_until(uint32_t *word, uint32_t val, uint64_t deadline_ns);
void cxlcr_futex_wake_all(uint32_t *word);

/* A setting's whole number: decimal digits only (no sign, space or
 * suffix), at most max; -1 on anything else (the caller says what it
 * wanted). */
int cxlcr_parse_count(const char *text, uint64_t max, uint64_t *out);
/* "512M", "4G", "1.5GiB", "4096" -> bytes; -1 on junk. */
int cxlcr_parse_size(const char *s, uint64_t *out);
/* 1610612736 -> "1.5 GiB" into buf. */
const char *cxlcr_format_size(uint64_t bytes, char *buf, size_t len);

/* This host's name as the pool records owners. */
const char *cxlcr_host_name(void);
/* This process acts as host name from now on (a daemon configured with a
 * name other than the machine's; its workers inherit it). */
void cxlcr_host_name_set(const char *name);

/* Copies src into a fixed-size on-device field, always terminated. */
void cxlcr_copy_field(char *dst, size_t len, const char *src);

/* A valid service or arena name: [A-Za-z0-9._-], 1..63 chars. */
bool cxlcr_valid_name(const char *name);
/* Whether region_name ("SERVICE.EPOCH") names an image set of service (a
 * service's checkpoints, or a snapshot's dump under the snapshot's name). */
bool cxlcr_image_set_of(const char *region_name, const char *service);

/* Whether pid runs (a zombie has ended), and its start time in clock
 * ticks since boot, which tells a reused pid from the one recorded. */
bool cxlcr_process_start(int32_t pid, uint64_t *start);
/* cxlcr_process_start(), telling an ended process (0) from a look that
 * failed for another reason (-1: no fd, no memory); 1 with *start. */
int cxlcr_process_start_known(int32_t pid, uint64_t *start);
/* pid's state letter (/proc/PID/stat: R, S, T stopped by a signal, t by a
 * tracer, Z...), 0 if there is no such process or the look failed. */
char cxlcr_process_state(int32_t pid);
/* Whether pid maps any of bytes [lo, hi) of the file (dev, ino): hi 0 means
 * any part of it. /proc/PID/maps names a mapping's device and inode,
 * whatever path it was opened by. */
bool cxlcr_pid_maps_file(int32_t pid, uint64_t dev, uint64_t ino, uint64_t lo, uint64_t hi);
/* Whether any process this one can see in /proc (its host's, in its pid
 * namespace) maps any of bytes [lo, hi) of the file (dev, ino). */
bool cxlcr_file_range_mapped(uint64_t dev, uint64_t ino, uint64_t lo, uint64_t hi);
/* Whether pid has the file (dev, ino) open as one of its fds. */
bool cxlcr_pid_has_file_open(int32_t pid, uint64_t dev, uint64_t ino);
/* SIGKILL to the process of pidfd fd, then a wait of at most timeout_ms for
 * its end: whether it has ended. A pidfd, never a pid: a pid may be another
 * process's by the time it is signalled. */
bool cxlcr_pidfd_kill_wait(int fd, int timeout_ms);
/* Whether the process of pidfd fd has not ended yet (while it has not, its
 * pid is its own). */
bool cxlcr_pidfd_running(int fd);
/* The pid of pidfd fd's process as this process's /proc sees it
 * (/proc/self/fdinfo), 0 if unknown or it ended. */
int32_t cxlcr_pidfd_pid(int fd);
/* This process's pid namespace (the inode of /proc/self/ns/pid), 0 if unknown. */
uint64_t cxlcr_pid_namespace(void);

/* Length of the valid UTF-8 sequence at s (2 to 4 bytes, lead byte >=
 * 0x80), or 0 if it is not one: overlong forms, surrogates and code points
 * past U+10FFFF are not. Stops at the first byte that does not continue
 * the sequence, so a NUL ends it. */
int cxlcr_utf8_length(const unsigned char *s);

#endif
