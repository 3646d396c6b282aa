/*
 * A host's own files that a checkpoint names: a service's log.
 *
 * A service started without --log writes to HOST_LOG_DIR/podN/NAME.log
 * (`cxlcr run`), which is the host's own: a real machine's disk, an
 * emulated host's tmpfs. A checkpoint names it by its path; CRIU would
 * open that path on the restoring host, where it does not exist (or has
 * another size). So the restoring host opens its own file of that path,
 * appending (a service that comes back goes on with its log there), and
 * hands it to CRIU in its place (--inherit-fd).
 */
#ifndef CXLCR_HOST_FILES_H
#define CXLCR_HOST_FILES_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#define HOST_LOG_DIR   "/var/log/cxlcr"
#define HOST_FILES_MAX 4

struct host_files {
	int n;
	int fd[HOST_FILES_MAX];
	char arg[HOST_FILES_MAX][PATH_MAX + 16]; /* "fd[N]:PATH" for --inherit-fd */
};

/* Opens this host's file of every HOST_LOG_DIR path the checkpoint in dir
 * names; CRIU will have hf->fd[i] as fd first_fd + i. -1 and one line if
 * one cannot be opened (or there are more than HOST_FILES_MAX). */
int host_files_open(const char *dir, int first_fd, struct host_files *hf);
void host_files_close(struct host_files *hf);
/* The same for files named beforehand (a migrate's source lists the ones
 * its service has open, so that the destination's CRIU can be started
 * before the checkpoint exists: criu.h), and whether the checkpoint in dir
 * names exactly hf's. */
int host_files_open_paths(char *const *paths, int n, int first_fd, struct host_files *hf);
bool host_files_same(const struct host_files *hf, const char *dir);
/* The paths under HOST_LOG_DIR that process pid (of this host) has open:
 * what its checkpoint will name (at most max). */
int host_files_of(pid_t pid, char (*paths)[PATH_MAX], int max);

/* Appends "DATE TIME (UTC) line" to this host's log HOST_LOG_DIR/name,
 * made 0640 if new, as every log of a host's (the prefetch and pager
 * logs): what a service did may be nobody else's to read. */
__attribute__((format(printf, 2, 3)))
void host_log_line(const char *name, const char *fmt, ...);

#endif
