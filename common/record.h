/*
 * The checkpoint records of the CRIU plugin (struct cxlcr_arena_record and
 * struct cxlcr_file_record, see pool_format.h): sealing them with their
 * checksum, checking them, and reading and writing their files in an image
 * directory. Whoever reads checkpoints (the plugin on restore, the daemon
 * when it publishes or inspects one) goes through these.
 */
#ifndef CXLCR_RECORD_H
#define CXLCR_RECORD_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "pool_format.h"

/* Sets magic, version, size and checksum: the record is ready to write. */
void cxlcr_arena_record_seal(struct cxlcr_arena_record *r);
void cxlcr_file_record_seal(struct cxlcr_file_record *r);

/* Refuses a record that is foreign (magic), of another format version or
 * size, or corrupt (checksum), or whose fields contradict each other. */
int cxlcr_arena_record_check(const struct cxlcr_arena_record *r);
int cxlcr_file_record_check(const struct cxlcr_file_record *r);

/* "cxlcr-arena-<nspid>.img" and "cxlcr-file-<id>.img" into buf. */
const char *cxlcr_arena_record_name(char *buf, size_t len, pid_t nspid);
/* Is this file name one of cxlcr_arena_record_name()'s? */
bool cxlcr_is_arena_record_file(const char *name);
const char *cxlcr_file_record_name(char *buf, size_t len, uint32_t id);

/* Writes n sealed records as file name of directory dirfd (replacing it). */
int cxlcr_arena_records_write(int dirfd, const char *name, const struct cxlcr_arena_record *r,
			      size_t n);
int cxlcr_file_record_write(int dirfd, const char *name, const struct cxlcr_file_record *r);

/* Reads and checks every record of file name of dirfd into *out (malloc'd;
 * the caller frees it). Returns how many, 0 if there is no such file, -1
 * if it is unreadable, empty, truncated or holds a bad record. */
ssize_t cxlcr_arena_records_read(int dirfd, const char *name, struct cxlcr_arena_record **out);
/* A listing of image directory dirfd from its start (dirfd stays open). */
DIR *cxlcr_image_dir_open(int dirfd);
/* Calls fn for every arena record file of dirfd with its records (read and
 * checked; fn may change them, they are freed afterwards). Stops at the
 * first fn or read that fails; returns 0 or -1. */
int cxlcr_arena_records_each(int dirfd,
			     int (*fn)(int dirfd, const char *file, struct cxlcr_arena_record *recs, size_t n,
				       void *arg),
			     void *arg);
/* 1 if read and good, 0 if there is no such file, -1 if it is bad. */
int cxlcr_file_record_read(int dirfd, const char *name, struct cxlcr_file_record *out);

/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" into buf (at least 37 bytes). */
const char *cxlcr_uuid_str(const uint8_t uuid[16], char *buf);

#endif
