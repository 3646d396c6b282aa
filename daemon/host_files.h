/*
 * A host's own files that a checkpoint names: a service's log, and the
 * directory it runs in.
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
#define HOST_FILES_MAX 5 /* four logs and the working directory (criu_swrk.c: at most 7 fds) */

/*
 * A service runs in a directory of its own, HOST_WD_DIR/NAME, on the
 * host's /run (a tmpfs; the host's own tmpfs on an emulated host), and
 * each host that restores it makes its own (a fork child's: one of the
 * child's name) and hands it to CRIU as the checkpoint's.
 *
 * Why: CRIU's parasite, in every dump, makes a directory "proc.crtools" in
 * the dumped task's working directory, mounts a procfs there, opens it and
 * takes it down again: once for the task, once per thread for its cgroups
 * (criu/pie/parasite.c, get_proc_fd(): a service in a PID namespace of its
 * own never takes its fast path). In / on this machine's ext4 that cost
 * 0.4-1.9 ms each, ~6 ms of a 15 ms freeze for Redis's six threads; on a
 * tmpfs 0.07-0.15 ms. And one directory per service keeps two services'
 * dumps at the same time from making the same proc.crtools, which fails
 * one of them.
 */
#define HOST_WD_DIR "/run/cxlcr/wd"

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
/* The paths under HOST_LOG_DIR that process pid (of this host) has open,
 * and its working directory if it is under HOST_WD_DIR: what its
 * checkpoint will name (at most max). */
int host_files_of(pid_t pid, char (*paths)[PATH_MAX], int max);
/* As host_files_open(), but the working directory the checkpoint names is
 * this host's HOST_WD_DIR/wd_name (a fork child's own name). */
int host_files_open_as(const char *dir, int first_fd, const char *wd_name, struct host_files *hf);

/* Makes this host's HOST_WD_DIR/name (0700; a proc.crtools that a dump
 * killed halfway left in it goes) and opens it (O_DIRECTORY, O_NOFOLLOW,
 * O_CLOEXEC); path gets its name. -1 and one line if it cannot. */
int host_wd_open(const char *name, char *path, size_t len);
/* Is this host's HOST_WD_DIR/name a directory with nothing but CRIU's
 * leftovers in it, that no process works in? Two services of one name in
 * two pools of one machine share one: one's going must not take it from
 * the other. */
bool host_wd_idle(const char *name);
/* Removes it if so: the service has stopped, or left this host. */
void host_wd_remove(const char *name);

/* Appends "DATE TIME (UTC) line" to this host's log HOST_LOG_DIR/name,
 * made 0640 if new, as every log of a host's (the prefetch and pager
 * logs): what a service did may be nobody else's to read. */
__attribute__((format(printf, 2, 3)))
void host_log_line(const char *name, const char *fmt, ...);

#endif
