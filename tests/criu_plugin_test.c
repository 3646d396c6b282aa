/*
 * The helpers of the CRIU plugin (criu-plugin/) and its record format
 * (common/record.c), without CRIU: this process maps an arena of a pool of
 * its own, "dumps" itself into a directory as the CHECKPOINT_DEVICES hook
 * would, and takes the arena over from there as RESUME_DEVICES_LATE would.
 * tests/t_criu_plugin.sh runs it before the real thing with CRIU, and uses
 * its two other modes on the records that the plugin writes:
 *
 *   criu_plugin_test --show FILE           checks the records of FILE and
 *                                          prints each as name=value pairs
 *   criu_plugin_test --tamper FILE HOW     damages the first record of FILE:
 *       uuid        flips a byte of the pool uuid (the checksum no longer fits)
 *       uuid-sealed the same, checksum recomputed: a record of another pool
 *       address     moves the mapping address (checksum recomputed)
 *       truncate    cuts the file short
 */
#include <dirent.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../common/record.h"
#include "../common/util.h"
#include "../criu-plugin/plugin.h"
#include "test.h"

#define POOL_SIZE   (256ull << 20)
#define ARENA_SIZE  (8ull << 20)
#define RACERS      8

static char dir[64], images[96], path[96], other[96];
static int dirfd_ = -1;

static void remove_all(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

static void flip_byte(const char *name, off_t off)
{
	int fd = openat(dirfd_, name, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0, "%s: %s", name, strerror(errno));
	uint8_t b;
	CHECK(pread(fd, &b, 1, off) == 1);
	b ^= 0x5a;
	CHECK(pwrite(fd, &b, 1, off) == 1);
	close(fd);
}

static void copy_file(const char *from, const char *to, size_t len)
{
	char buf[4096];
	int in = openat(dirfd_, from, O_RDONLY | O_CLOEXEC);
	CHECK(in >= 0, "%s: %s", from, strerror(errno));
	ssize_t n = read(in, buf, sizeof(buf));
	close(in);
	CHECK(n > 0);
	if ((size_t)n > len)
		n = (ssize_t)len;
	int out = openat(dirfd_, to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(out >= 0, "%s: %s", to, strerror(errno));
	CHECK(write(out, buf, (size_t)n) == n);
	close(out);
}

static void test_records(void)
{
	SAY("records: sealed ones pass, foreign, other-version, corrupt and truncated ones do not");
	struct cxlcr_arena_record r;
	memset(&r, 0, sizeof(r));
	r.region_offset = 4 << 20;
	r.region_size = 8 << 20;
	r.map_pgoff = 4 << 20;
	r.map_length = 8 << 20;
	r.nspid = 1;
	snprintf(r.region_name, sizeof(r.region_name), "svc");
	cxlcr_arena_record_seal(&r);
	CHECK(cxlcr_arena_record_check(&r) == 0, "%s", cxlcr_last_error());

	struct cxlcr_arena_record bad = r;
	bad.magic ^= 1;
	CHECK_ERROR(cxlcr_arena_record_check(&bad), "bad magic");
	bad = r;
	bad.version = 2;
	CHECK_ERROR(cxlcr_arena_record_check(&bad), "format version 2");
	bad = r;
	bad.pool_uuid[3] ^= 0x10;
	CHECK_ERROR(cxlcr_arena_record_check(&bad), "checksum mismatch");
	bad = r;
	bad.map_length = 9 << 20;
	cxlcr_arena_record_seal(&bad);
	CHECK_ERROR(cxlcr_arena_record_check(&bad), "outside region");

	CHECK(cxlcr_arena_records_write(dirfd_, "cxlcr-arena-1.img", &r, 1) == 0, "%s",
	      cxlcr_last_error());
	struct cxlcr_arena_record *got;
	CHECK_EQ(cxlcr_arena_records_read(dirfd_, "cxlcr-arena-1.img", &got), 1);
	CHECK(!memcmp(got, &r, sizeof(r)));
	free(got);
	CHECK_EQ(cxlcr_arena_records_read(dirfd_, "cxlcr-arena-2.img", &got), 0);
	copy_file("cxlcr-arena-1.img", "cxlcr-arena-3.img", sizeof(r) - 8);
	CHECK_ERROR((int)cxlcr_arena_records_read(dirfd_, "cxlcr-arena-3.img", &got), "truncated");
	flip_byte("cxlcr-arena-1.img", offsetof(struct cxlcr_arena_record, pool_uuid));
	CHECK_ERROR((int)cxlcr_arena_records_read(dirfd_, "cxlcr-arena-1.img", &got), "checksum");
	flip_byte("cxlcr-arena-1.img", 0);
	CHECK_ERROR((int)cxlcr_arena_records_read(dirfd_, "cxlcr-arena-1.img", &got), "bad magic");
	copy_file("cxlcr-arena-1.img", "cxlcr-arena-4.img", 0);
	CHECK_ERROR((int)cxlcr_arena_records_read(dirfd_, "cxlcr-arena-4.img", &got), "empty");

	struct cxlcr_file_record f;
	memset(&f, 0, sizeof(f));
	snprintf(f.path, sizeof(f.path), "/dev/dax0.0");
	cxlcr_file_record_seal(&f);
	CHECK(cxlcr_file_record_check(&f) == 0, "%s", cxlcr_last_error());
	f.open_flags ^= 1;
	CHECK_ERROR(cxlcr_file_record_check(&f), "checksum mismatch");

	SAY("dump_remove_old_records removes cxlcr-*.img and nothing else");
	int keep = openat(dirfd_, "core-1.img", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHECK(keep >= 0);
	close(keep);
	CHECK(dump_remove_old_records(dirfd_) == 0, "%s", cxlcr_last_error());
	struct stat st;
	CHECK(fstatat(dirfd_, "cxlcr-arena-1.img", &st, 0) < 0 && errno == ENOENT);
	CHECK(fstatat(dirfd_, "cxlcr-arena-3.img", &st, 0) < 0 && errno == ENOENT);
	CHECK(fstatat(dirfd_, "core-1.img", &st, 0) == 0);
	unlinkat(dirfd_, "core-1.img", 0);
}

static void test_proc(void)
{
	SAY("maps lines parse; the innermost NSpid of this process is getpid()");
	struct maps_line m;
	CHECK(proc_parse_maps_line("7fcbbfe00000-7fcbd0000000 rw-s 00200000 00:1b 588     /dev/shm/x/pool\n",
				   &m));
	CHECK_EQ(m.start, 0x7fcbbfe00000ull);
	CHECK_EQ(m.end, 0x7fcbd0000000ull);
	CHECK_EQ(m.pgoff, 0x200000);
	CHECK_EQ(m.dev_minor, 0x1b);
	CHECK_EQ(m.inode, 588);
	CHECK(!strcmp(m.perms, "rw-s"));
	CHECK(!proc_parse_maps_line("garbage\n", &m));
	pid_t ns;
	CHECK(proc_innermost_nspid(getpid(), &ns) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(ns, getpid());
}

/* The arena record file of this process, read back. */
static ssize_t my_records(struct cxlcr_arena_record **recs)
{
	char name[64];
	return cxlcr_arena_records_read(dirfd_, cxlcr_arena_record_name(name, sizeof(name), getpid()),
					recs);
}

/* The take-over of a restored tree of one task: this process. */
static int take_over_me(const char *pool_path)
{
	pid_t me = getpid();
	return restore_take_over(dirfd_, &me, 1, pool_path);
}

static void test_dump_restore(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_region r, now;
	struct pool_id id;
	int n;

	SAY("a process with an arena mapped dumps one record for it");
	CHECK(cxlcr_pool_format(path, POOL_SIZE, true, &pool) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "svc", ARENA_SIZE, &r) == 0, "%s",
	      cxlcr_last_error());
	CHECK(cxlcr_region_claim(&pool, r.generation, getpid(), cxlcr_host_name(), "test", &r) == 0);
	CHECK_EQ(r.owner_epoch, 1);
	char *arena = cxlcr_pool_map(&pool, r.offset, r.size, 0, 0);
	CHECK(arena, "%s", cxlcr_last_error());
	/* Split the mapping in three VMAs: it is still one mapping of one region. */
	CHECK(mprotect(arena + (1 << 20), 4096, PROT_READ) == 0);
	CHECK(pool_id_load(path, &id) == 0, "%s", cxlcr_last_error());
	CHECK(!id.devdax && id.known);

	struct pool_mapping *maps;
	size_t nmaps;
	CHECK(proc_pool_mappings(getpid(), &id, &maps, &nmaps) == 0, "%s", cxlcr_last_error());
	CHECK(nmaps >= 1 && nmaps <= 2); /* the arena, and the metadata that the open pool maps */
	free(maps);

	CHECK_EQ(dump_task_arenas(dirfd_, getpid(), &id, false), 1);
	struct cxlcr_arena_record *recs;
	CHECK_EQ(my_records(&recs), 1);
	CHECK(!memcmp(recs[0].pool_uuid, pool.sb->uuid, 16));
	CHECK_EQ(recs[0].region_generation, r.generation);
	CHECK_EQ(recs[0].region_offset, r.offset);
	CHECK_EQ(recs[0].region_size, r.size);
	CHECK(!strcmp(recs[0].region_name, "svc"));
	CHECK_EQ(recs[0].map_address, (uintptr_t)arena);
	CHECK_EQ(recs[0].map_length, r.size);
	CHECK_EQ(recs[0].map_pgoff, r.offset);
	CHECK_EQ(recs[0].owner_epoch, 1);
	CHECK_EQ(recs[0].nspid, getpid());
	CHECK_EQ(recs[0].real_pid, getpid());
	CHECK(recs[0].flags & CXLCR_RECORD_F_SHARED);
	CHECK(!(recs[0].flags & CXLCR_RECORD_F_DEVDAX));
	CHECK(!strcmp(recs[0].pool_path, path));
	free(recs);

	SAY("the records hold; taking over bumps the epoch and names this pid and host");
	restore_forget_claims();
	CHECK(restore_precheck(dirfd_, path, &n) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(n, 1);
	CHECK(take_over_me(path) == 1, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_get(&pool, r.generation, &now) == 0);
	CHECK_EQ(now.owner_epoch, 2);
	CHECK_EQ(now.owner_pid, getpid());
	CHECK(!strcmp(now.owner_host, cxlcr_host_name()));

	SAY("another task of the same restore that shares the arena is let through");
	CHECK(take_over_me(path) == 1, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_get(&pool, r.generation, &now) == 0);
	CHECK_EQ(now.owner_epoch, 2);

	SAY("a second restore of the same records is stale, before and at take-over");
	restore_forget_claims();
	CHECK_ERROR(restore_precheck(dirfd_, path, &n),
		    "checkpoint is stale: arena svc was taken over (epoch 1, now 2)");
	CHECK_ERROR(take_over_me(path),
		    "checkpoint is stale: arena svc was taken over (epoch 1, now 2)");
	CHECK(cxlcr_region_get(&pool, r.generation, &now) == 0);
	CHECK_EQ(now.owner_epoch, 2);

	SAY("a record of another pool is refused");
	CHECK(cxlcr_pool_format(other, POOL_SIZE, true, NULL) == 0, "%s", cxlcr_last_error());
	CHECK(dump_task_arenas(dirfd_, getpid(), &id, false) == 1);
	CHECK_ERROR(restore_precheck(dirfd_, other, &n), "record is from another pool");
	CHECK_ERROR(take_over_me(other), "record is from another pool");

	SAY("a task that does not map the arena where the record says is refused, and takes nothing");
	char *moved = cxlcr_pool_map(&pool, r.offset, r.size, 0, 0);
	CHECK(moved);
	CHECK(munmap(arena, r.size) == 0);
	CHECK(restore_precheck(dirfd_, path, &n) == 0, "%s", cxlcr_last_error());
	CHECK_ERROR(take_over_me(path), "does not map it at");
	CHECK(cxlcr_region_get(&pool, r.generation, &now) == 0);
	CHECK_EQ(now.owner_epoch, 2);
	arena = moved;

	SAY("a mapping of pool memory that no region holds fails the dump");
	char *stray = cxlcr_pool_map(&pool, POOL_SIZE - CXLCR_POOL_ALIGN, CXLCR_POOL_ALIGN, 0, 0);
	CHECK(stray);
	CHECK_ERROR(dump_task_arenas(dirfd_, getpid(), &id, false), "which no live region holds");
	CHECK(munmap(stray, CXLCR_POOL_ALIGN) == 0);

	SAY("a freed region is gone; one made again under its name is another arena");
	CHECK(dump_task_arenas(dirfd_, getpid(), &id, false) == 1);
	CHECK(munmap(arena, r.size) == 0);
	CHECK(cxlcr_region_free(&pool, r.generation) == 0);
	CHECK_ERROR(restore_precheck(dirfd_, path, &n), "its region is gone");
	struct cxlcr_region again;
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "svc", ARENA_SIZE, &again) == 0);
	CHECK_ERROR(restore_precheck(dirfd_, path, &n), "freed and made again");

	SAY("a task that maps a pool other than CRIU's is noticed");
	char where[PATH_MAX];
	struct cxlcr_pool opool;
	CHECK(cxlcr_pool_open(&opool, other) == 0);
	CHECK_EQ(proc_other_pool(getpid(), &id, where, sizeof(where)), 1);
	CHECK(!strcmp(where, other), "found %s", where);
	cxlcr_pool_close(&opool);
	CHECK_EQ(proc_other_pool(getpid(), &id, where, sizeof(where)), 0);

	CHECK(dump_remove_old_records(dirfd_) == 0);
	cxlcr_pool_close(&pool);
}

/* A restored tree of two tasks: a refusal of the second leaves the first's
 * arena untaken (issue 12 point 6: task by task, the first had taken it). */
static void test_tree_refused(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_region a, b, now;
	struct pool_id id;
	SAY("a tree of two tasks (the second maps an arena of its own) whose second task's record is stale: "
	    "nothing is taken, not even the first task's arena");
	CHECK(cxlcr_pool_format(path, POOL_SIZE, true, &pool) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "tree-a", ARENA_SIZE, &a) == 0);
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "tree-b", ARENA_SIZE, &b) == 0);
	CHECK(pool_id_load(path, &id) == 0);
	char *ma = cxlcr_pool_map(&pool, a.offset, a.size, 0, 0);
	CHECK(ma, "%s", cxlcr_last_error());
	int up[2], down[2];
	CHECK(pipe(up) == 0 && pipe(down) == 0);
	fflush(stdout);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		char c = cxlcr_pool_map(&pool, b.offset, b.size, 0, 0) ? 'm' : 'x';
		if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	char c;
	CHECK(read(up[0], &c, 1) == 1 && c == 'm', "the second task did not map its arena");
	CHECK_EQ(dump_task_arenas(dirfd_, getpid(), &id, false), 1);
	CHECK_EQ(dump_task_arenas(dirfd_, kid, &id, false), 2);  /* its parent's arena, and its own */
	pid_t tree[2] = { getpid(), kid };
	restore_forget_claims();
	CHECK(cxlcr_region_set_owner(&pool, b.generation, 77, "elsewhere", NULL) == 0);
	CHECK_ERROR(restore_take_over(dirfd_, tree, 2, path), "arena tree-b was taken over");
	CHECK(cxlcr_region_get(&pool, a.generation, &now) == 0);
	CHECK(now.owner_epoch == a.owner_epoch && now.owner_pid == 0, "tree-a was taken: epoch %llu, pid %d",
	      (unsigned long long)now.owner_epoch, now.owner_pid);

	SAY("with both records good, both tasks take their arenas, the first task the shared one");
	CHECK_EQ(dump_task_arenas(dirfd_, kid, &id, false), 2);
	restore_forget_claims();
	CHECK(restore_take_over(dirfd_, tree, 2, path) == 3, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_get(&pool, a.generation, &now) == 0 && now.owner_pid == getpid());
	CHECK(cxlcr_region_get(&pool, b.generation, &now) == 0 && now.owner_pid == kid);
	CHECK(write(down[1], "q", 1) == 1);
	int status;
	CHECK(waitpid(kid, &status, 0) == kid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(up[0]), close(up[1]), close(down[0]), close(down[1]);
	CHECK(munmap(ma, a.size) == 0);
	CHECK(dump_remove_old_records(dirfd_) == 0);
	cxlcr_pool_close(&pool);
}

/* One mapping that the kernel merged across region boundaries. */
static void test_split_mappings(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_region a, b;
	struct pool_id id;
	SAY("a mapping over the metadata and two neighbouring regions gives one record per region");
	CHECK(cxlcr_pool_format(path, POOL_SIZE, true, &pool) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "a", ARENA_SIZE, &a) == 0);
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "b", ARENA_SIZE, &b) == 0);
	CHECK_EQ(a.offset, CXLCR_DATA_OFFSET);
	CHECK_EQ(b.offset, a.offset + a.size);
	CHECK(pool_id_load(path, &id) == 0);
	size_t len = CXLCR_DATA_OFFSET + a.size + b.size / 2;
	char *m = cxlcr_pool_map(&pool, 0, len, 0, 0);
	CHECK(m);
	CHECK_EQ(dump_task_arenas(dirfd_, getpid(), &id, false), 2);
	struct cxlcr_arena_record *recs;
	CHECK_EQ(my_records(&recs), 2);
	CHECK(!strcmp(recs[0].region_name, "a") && !strcmp(recs[1].region_name, "b"));
	CHECK_EQ(recs[0].map_address, (uintptr_t)m + CXLCR_DATA_OFFSET);
	CHECK_EQ(recs[0].map_length, a.size);
	CHECK_EQ(recs[0].map_pgoff, a.offset);
	CHECK_EQ(recs[1].map_address, (uintptr_t)m + CXLCR_DATA_OFFSET + a.size);
	CHECK_EQ(recs[1].map_length, b.size / 2);
	CHECK_EQ(recs[1].map_pgoff, b.offset);
	free(recs);
	restore_forget_claims();
	CHECK(take_over_me(path) == 2, "%s", cxlcr_last_error());
	CHECK(munmap(m, len) == 0);
	CHECK(dump_remove_old_records(dirfd_) == 0);
	cxlcr_pool_close(&pool);
}

/* Several restores of one checkpoint at once: exactly one takes the arena. */
static void test_claim_race(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_region r;
	SAY("%d concurrent claims of one epoch: exactly one succeeds", RACERS);
	CHECK(cxlcr_pool_format(path, POOL_SIZE, true, &pool) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "race", ARENA_SIZE, &r) == 0);
	pid_t kids[RACERS];
	for (int i = 0; i < RACERS; i++) {
		kids[i] = fork();
		CHECK(kids[i] >= 0);
		if (kids[i] == 0) {
			struct cxlcr_pool p;
			struct cxlcr_region now;
			if (cxlcr_pool_open(&p, path) < 0)
				_exit(2);
			_exit(cxlcr_region_claim_epoch(&p, r.generation, 0, getpid(), "racer", &now) == 0 ? 0 : 1);
		}
	}
	int won = 0, lost = 0;
	for (int i = 0; i < RACERS; i++) {
		int status;
		CHECK(waitpid(kids[i], &status, 0) == kids[i]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) <= 1);
		if (WEXITSTATUS(status) == 0)
			won++;
		else
			lost++;
	}
	CHECK_EQ(won, 1);
	CHECK_EQ(lost, RACERS - 1);
	struct cxlcr_region now;
	CHECK(cxlcr_region_get(&pool, r.generation, &now) == 0);
	CHECK_EQ(now.owner_epoch, 1);
	CHECK(!strcmp(now.owner_host, "racer"));
	cxlcr_pool_close(&pool);
}

static void test_devdax(void)
{
	SAY("device VMAs: only the pool's devdax device is admitted");
	struct pool_id dax = { .known = true, .devdax = true, .rdev = makedev(250, 3) };
	struct pool_id file = { .known = true, .dev = makedev(0, 27), .ino = 588 };
	struct stat st;
	memset(&st, 0, sizeof(st));
	st.st_mode = S_IFCHR | 0600;
	st.st_rdev = makedev(250, 3);
	CHECK_EQ(devdax_admit_vma(&dax, &st), 0);
	CHECK_EQ(devdax_admit_vma(&file, &st), -ENOTSUP);
	st.st_rdev = makedev(250, 4);
	CHECK_EQ(devdax_admit_vma(&dax, &st), -ENOTSUP);
	st.st_mode = S_IFREG | 0600;
	st.st_rdev = makedev(250, 3);
	CHECK_EQ(devdax_admit_vma(&dax, &st), -ENOTSUP);
	st.st_dev = makedev(0, 27);
	st.st_ino = 588;
	CHECK(pool_id_match(&file, &st));
	struct pool_id unknown = { .known = false };
	CHECK(!pool_id_match(&unknown, &st));

	SAY("device mappings are rebased onto this host's path of the same pool, same offset");
	struct pool_id here;
	CHECK(cxlcr_pool_format(path, POOL_SIZE, true, NULL) == 0);
	CHECK(pool_id_load(path, &here) == 0);
	struct cxlcr_arena_record rec;
	memset(&rec, 0, sizeof(rec));
	memcpy(rec.pool_uuid, here.uuid, 16);
	rec.region_offset = rec.map_pgoff = CXLCR_DATA_OFFSET;
	rec.region_size = rec.map_length = ARENA_SIZE;
	rec.nspid = 7;
	rec.flags = CXLCR_RECORD_F_DEVDAX | CXLCR_RECORD_F_SHARED;
	snprintf(rec.region_name, sizeof(rec.region_name), "dax");
	snprintf(rec.pool_path, sizeof(rec.pool_path), "/dev/dax0.0");
	cxlcr_arena_record_seal(&rec);
	CHECK(cxlcr_arena_records_write(dirfd_, "cxlcr-arena-7.img", &rec, 1) == 0);
	uint8_t uuid[16];
	CHECK(devdax_dumped_pool(dirfd_, "/dev/dax0.0", uuid));
	CHECK(!memcmp(uuid, here.uuid, 16));
	CHECK(devdax_dumped_pool(dirfd_, "dev/dax0.0", uuid));
	CHECK(!devdax_dumped_pool(dirfd_, "/dev/dax1.0", uuid));

	uint64_t pgoff = 0;
	int fd = -1;
	CHECK_EQ(devdax_update_vma(dirfd_, "/dev/dax1.0", path, 123 << 21, &pgoff, &fd), -ENOTSUP);
	CHECK_EQ(devdax_update_vma(dirfd_, "/dev/dax0.0", "/dev/dax0.0", 123 << 21, &pgoff, &fd),
		 -ENOTSUP);
	CHECK_EQ(devdax_update_vma(dirfd_, "/dev/dax0.0", path, 3 << 21, &pgoff, &fd), 1);
	CHECK_EQ(pgoff, 3 << 21);
	struct stat fst, pst;
	CHECK(fd >= 0 && fstat(fd, &fst) == 0 && stat(path, &pst) == 0);
	CHECK(fst.st_ino == pst.st_ino && fst.st_dev == pst.st_dev);
	CHECK_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
	close(fd);
	CHECK(cxlcr_pool_format(other, POOL_SIZE, true, NULL) == 0);
	CHECK_ERROR(devdax_update_vma(dirfd_, "/dev/dax0.0", other, 0, &pgoff, &fd),
		    "record is from another pool");

	SAY("an open device fd is reopened from this host's pool path with its flags");
	struct cxlcr_file_record f;
	memset(&f, 0, sizeof(f));
	memcpy(f.pool_uuid, here.uuid, 16);
	f.open_flags = O_RDONLY | O_NONBLOCK;
	f.file_id = 0x2a;
	snprintf(f.path, sizeof(f.path), "/dev/dax0.0");
	cxlcr_file_record_seal(&f);
	char name[64];
	CHECK(cxlcr_file_record_write(dirfd_, cxlcr_file_record_name(name, sizeof(name), 0x2a), &f) == 0);
	CHECK(!strcmp(name, "cxlcr-file-2a.img"));
	CHECK_EQ(devdax_restore_fd(dirfd_, 0x2b, path), -ENOTSUP);
	fd = devdax_restore_fd(dirfd_, 0x2a, path);
	CHECK(fd >= 0, "%s", cxlcr_last_error());
	CHECK_EQ(fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_RDONLY | O_NONBLOCK);
	close(fd);
	CHECK_ERROR(devdax_restore_fd(dirfd_, 0x2a, other), "record is from another pool");
	SAY("a file pool's fds are CRIU's own business");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK_EQ(devdax_dump_fd(dirfd_, fd, 1, &here), -ENOTSUP);
	close(fd);
	CHECK(dump_remove_old_records(dirfd_) == 0);
}

static int show(const char *file)
{
	struct cxlcr_arena_record *recs;
	ssize_t n = cxlcr_arena_records_read(AT_FDCWD, file, &recs);
	if (n <= 0) {
		fprintf(stderr, "%s\n", n < 0 ? cxlcr_last_error() : "no such record file");
		return 1;
	}
	for (ssize_t i = 0; i < n; i++) {
		const struct cxlcr_arena_record *r = &recs[i];
		char uuid[40];
		printf("name=%s generation=%llu epoch=%llu nspid=%d real_pid=%d owner_pid=%d "
		       "address=0x%llx length=%llu pgoff=%llu region_offset=%llu region_size=%llu "
		       "uuid=%s host=%s pool=%s flags=%u\n",
		       r->region_name, (unsigned long long)r->region_generation,
		       (unsigned long long)r->owner_epoch, r->nspid, r->real_pid, r->owner_pid,
		       (unsigned long long)r->map_address, (unsigned long long)r->map_length,
		       (unsigned long long)r->map_pgoff, (unsigned long long)r->region_offset,
		       (unsigned long long)r->region_size, cxlcr_uuid_str(r->pool_uuid, uuid), r->host,
		       r->pool_path, r->flags);
	}
	free(recs);
	return 0;
}

static int tamper(const char *file, const char *how)
{
	struct cxlcr_arena_record r;
	int fd = open(file, O_RDWR | O_CLOEXEC);
	if (fd < 0 || pread(fd, &r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		fprintf(stderr, "%s: cannot read a record\n", file);
		return 1;
	}
	if (!strcmp(how, "truncate")) {
		if (ftruncate(fd, sizeof(r) - 100) < 0)
			return 1;
		close(fd);
		return 0;
	}
	if (!strcmp(how, "uuid") || !strcmp(how, "uuid-sealed"))
		r.pool_uuid[5] ^= 0xff;
	else if (!strcmp(how, "address"))
		r.map_address += 64ull << 20;
	else {
		fprintf(stderr, "tamper: unknown way '%s'\n", how);
		return 2;
	}
	if (strcmp(how, "uuid"))
		cxlcr_arena_record_seal(&r);
	if (pwrite(fd, &r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return 1;
	close(fd);
	return 0;
}

static void *idle_thread(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* A stopped, traced, two-threaded process, as CRIU holds the restored
 * tasks when RESUME_DEVICES_LATE runs. */
static void test_kill_traced(void)
{
	SAY("a refusal kills and reaps every thread it traces, so that CRIU cannot hang on them");
	int ready[2];
	CHECK(pipe(ready) == 0);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		pthread_t t;
		if (pthread_create(&t, NULL, idle_thread, NULL) != 0)
			_exit(1);
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	char c;
	CHECK(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	close(ready[1]);
	char taskdir[64];
	snprintf(taskdir, sizeof(taskdir), "/proc/%d/task", (int)child);
	DIR *d = opendir(taskdir);
	CHECK(d);
	int traced = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0)
			continue;
		CHECK(ptrace(PTRACE_SEIZE, tid, NULL, NULL) == 0, "seize %d: %s", (int)tid, strerror(errno));
		CHECK(ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) == 0);
		CHECK(waitpid(tid, NULL, __WALL) == tid);
		traced++;
	}
	closedir(d);
	CHECK_EQ(traced, 2);
	restore_kill_traced();
	CHECK(waitpid(child, NULL, __WALL | WNOHANG) < 0 && errno == ECHILD, "child %d was not reaped",
	      (int)child);
	CHECK(kill(child, 0) < 0 && errno == ESRCH);
}

/* The snapshot a fork dump takes beside CRIU (fork_snapshot_begin/end):
 * nothing to wait for without one; one that fails gives its line to end,
 * and to the daemon in CXLCR_SNAPSHOT_ERROR_FILE; none is noted taken. */
static void test_snapshot_job(void)
{
	uint64_t took, waited;
	CHECK(fork_snapshot_end(&took, &waited) == 0 && took == 0 && waited == 0);
	struct pool_id id;
	CHECK(pool_id_load(path, &id) == 0, "%s", cxlcr_last_error());
	unlinkat(dirfd_, CXLCR_SNAPSHOT_ERROR_FILE, 0);
	unlinkat(dirfd_, CXLCR_SNAPSHOT_INFO_FILE, 0);
	/* A task with no arena records in the directory: the parent. */
	CHECK(fork_snapshot_begin(dirfd_, getppid(), &id, "job") == 0, "%s", cxlcr_last_error());
	CHECK(fork_snapshot_begin(dirfd_, getppid(), &id, "job") < 0, "a second snapshot was begun in one dump");
	CHECK(fork_snapshot_end(&took, &waited) < 0, "a snapshot of a task without an arena was taken");
	char why[CXLCR_ERROR_MAX];
	snprintf(why, sizeof(why), "%s", cxlcr_last_error());
	char line[CXLCR_ERROR_MAX + 2] = "";
	int fd = openat(dirfd_, CXLCR_SNAPSHOT_ERROR_FILE, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "no %s: %s", CXLCR_SNAPSHOT_ERROR_FILE, strerror(errno));
	ssize_t n = read(fd, line, sizeof(line) - 1);
	close(fd);
	CHECK(n > 1 && line[n - 1] == '\n' && !memchr(line, '\n', (size_t)n - 1), "not one line: '%s'", line);
	line[n - 1] = 0;
	CHECK(!strcmp(line, why), "the file says '%s', end said '%s'", line, why);
	CHECK(faccessat(dirfd_, CXLCR_SNAPSHOT_INFO_FILE, F_OK, 0) < 0, "a failed snapshot was noted as taken");
	CHECK(fork_snapshot_end(&took, &waited) == 0, "ended twice");
	unlinkat(dirfd_, CXLCR_SNAPSHOT_ERROR_FILE, 0);
	printf("  ok   a fork dump's snapshot job: its failure is one line, for the daemon too (%s)\n", why);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--show"))
		return show(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "--tamper"))
		return tamper(argv[2], argv[3]);
	if (argc != 1) {
		fprintf(stderr, "usage: criu_plugin_test [--show FILE | --tamper FILE HOW]\n");
		return 2;
	}
	printf("criu_plugin_test: the CRIU plugin's helpers and records\n");
	snprintf(dir, sizeof(dir), "/dev/shm/cxlcr-plugin-test.XXXXXX");
	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	test_on_failure(remove_all);
	snprintf(images, sizeof(images), "%s/images", dir);
	snprintf(path, sizeof(path), "%s/pool", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	CHECK(mkdir(images, 0700) == 0);
	dirfd_ = open(images, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(dirfd_ >= 0);

	test_records();
	test_proc();
	test_dump_restore();
	test_split_mappings();
	test_tree_refused();
	test_claim_race();
	test_devdax();
	test_kill_traced();
	test_snapshot_job();

	close(dirfd_);
	remove_all();
	printf("criu_plugin_test: all checks passed\n");
	return 0;
}
