/*
 * rebase_test: cxlcr_rebase_fork() on synthetic image sets, written with
 * the same generated protobuf-c code CRIU's images are read with.
 *
 * The parent maps an arena of a 16-page heap as one shared pool mapping,
 * merged with 2 pages of the pool before it. Its snapshot holds pages
 * 0-2 (one run of copies), 5 and 6 (copies that do not follow on: two
 * runs) and zero pages elsewhere. Checked: the child's VMAs exactly, the
 * fork record, the network identity, the images taken over unchanged; and
 * refusals of cold pages, truncated, corrupt and foreign images, arena
 * pages in the pagemap, a snapshot of another arena, a pool file opened
 * write-only, an address outside the subnet, a corrupt record, a
 * non-empty destination. And cxlcr_rebase_proc_self(): which /proc paths
 * of a dump become /proc/self, and which stay.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "../common/error.h"
#include "../common/record.h"
#include "../rebase/image_io.h"
#include "../rebase/internal.h"
#include "../rebase/rebase.h"
#include "fdinfo.pb-c.h"
#include "mm.pb-c.h"
#include "netdev.pb-c.h"
#include "pagemap.pb-c.h"
#include "pstree.pb-c.h"
#include "test.h"

#define PAGE         4096ull
#define HEAP_PAGES   16u
#define ARENA_OFF    (8 * MiB)
#define REGION_SIZE  (CXLCR_ARENA_HEAP_OFFSET + HEAP_PAGES * PAGE)
#define HEAP_ADDR    0x7f0004000000ull
#define MAP_ADDR     (HEAP_ADDR - CXLCR_ARENA_HEAP_OFFSET)
#define SNAP_OFF     (64 * MiB)
#define DATA_OFF     (SNAP_OFF + 2 * MiB)
#define HDR_COPY_OFF (DATA_OFF + 6 * PAGE)  /* the snapshot's copy of the arena header */
#define HDR_COPY     ((uint64_t)CXLCR_SNAPSHOT_ARENA_HEADER_SIZE)
#define POOL_FILE_ID 7u
#define POOL_PATH    "/dev/shm/cxlcr-x/pool"
#define EXE_ADDR     0x400000ull
#define STACK_ADDR   0x7ffd00000000ull

static const uint8_t UUID[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static const uint8_t PARENT_MAC[6] = { 0x02, 0x78, 0x0a, 0x4e, 0x01, 0x01 };
static const uint8_t CHILD_MAC[6] = { 0x02, 0x78, 0x0a, 0x4e, 0x09, 0x09 };

static char base_dir[256];

static void remove_tree(void)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", base_dir);
}

/* What a fixture differs in from the good one. */
struct knobs {
	bool cold_page;           /* heap page 9 is on the cold tier */
	bool pagemap_in_arena;    /* the pagemap has a page of the heap */
	bool pool_write_only;
	bool other_arena;         /* the snapshot is of another arena */
};

static uint64_t leaves[HEAP_PAGES];
static struct cxlcr_snapshot_run runs[HEAP_PAGES];

/* The run table a snapshot with these leaves has (pool_format.h). */
static void index_runs(struct cxlcr_snapshot *s)
{
	s->runs = runs;
	s->run_count = cxlcr_snapshot_table_runs(leaves, HEAP_PAGES, runs, HEAP_PAGES);
}

static void make_snapshot(struct cxlcr_snapshot *s, const struct knobs *k)
{
	memset(s, 0, sizeof(*s));
	memset(leaves, 0, sizeof(leaves));
	leaves[0] = CXLCR_LEAF(CXLCR_TIER_CXL, DATA_OFF);
	leaves[1] = CXLCR_LEAF(CXLCR_TIER_CXL, DATA_OFF + PAGE);
	leaves[2] = CXLCR_LEAF(CXLCR_TIER_CXL, DATA_OFF + 2 * PAGE);
	leaves[5] = CXLCR_LEAF(CXLCR_TIER_CXL, DATA_OFF + 3 * PAGE);
	leaves[6] = CXLCR_LEAF(CXLCR_TIER_CXL, DATA_OFF + 5 * PAGE);
	if (k->cold_page)
		leaves[9] = CXLCR_LEAF(CXLCR_TIER_COLD, 0x10000);
	s->region.generation = 77;
	s->region.offset = SNAP_OFF;
	s->region.size = 4 * MiB;
	s->region.kind = CXLCR_KIND_SNAPSHOT;
	snprintf(s->region.name, sizeof(s->region.name), "svc-snap");
	struct cxlcr_snapshot_header *h = &s->header;
	memcpy(h->pool_uuid, UUID, 16);
	h->region_generation = 77;
	snprintf(h->name, sizeof(h->name), "svc-snap");
	h->arena_generation = k->other_arena ? 6 : 5;
	h->arena_epoch = 3;
	h->heap_address = HEAP_ADDR;
	h->heap_size = HEAP_PAGES * PAGE;
	h->page_size = PAGE;
	h->page_count = HEAP_PAGES;
	h->arena_header_offset = HDR_COPY_OFF - SNAP_OFF;
	h->arena_header_size = HDR_COPY;
	s->leaves = leaves;
	index_runs(s);
}

static void write_image(int dir, const char *name, uint32_t magic, ProtobufCMessage **msgs, size_t n)
{
	struct image_out o;
	image_begin(&o, name, magic);
	for (size_t i = 0; i < n; i++)
		image_put(&o, msgs[i]);
	CHECK(image_write(dir, &o) == 0, "%s", cxlcr_last_error());
}

static void write_file(int dir, const char *name, const void *data, size_t len)
{
	int fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, data, len) == (ssize_t)len);
	close(fd);
}

static size_t read_file(int dir, const char *name, uint8_t *buf, size_t max)
{
	int fd = openat(dir, name, O_RDONLY);
	CHECK(fd >= 0, " %s", name);
	ssize_t n = read(fd, buf, max);
	CHECK(n >= 0);
	close(fd);
	return (size_t)n;
}

static void vma(VmaEntry *v, uint64_t start, uint64_t end, uint64_t pgoff, uint64_t shmid, uint32_t flags,
		uint32_t status)
{
	vma_entry__init(v);
	v->start = start;
	v->end = end;
	v->pgoff = pgoff;
	v->shmid = shmid;
	v->prot = PROT_READ | PROT_WRITE;
	v->flags = flags;
	v->status = status;
	v->fd = -1;
	if (status & (CRIU_VMA_FILE_SHARED | CRIU_VMA_FILE_PRIVATE)) {
		v->has_fdflags = true;
		v->fdflags = O_RDWR;
	}
}

static void write_mm(int dir)
{
	VmaEntry v[3];
	vma(&v[0], EXE_ADDR, EXE_ADDR + PAGE, 0, 1, MAP_PRIVATE, CRIU_VMA_AREA_REGULAR | CRIU_VMA_FILE_PRIVATE);
	/* the arena, merged with two pages of the pool that precede it */
	vma(&v[1], MAP_ADDR - 2 * PAGE, MAP_ADDR + REGION_SIZE, ARENA_OFF - 2 * PAGE, POOL_FILE_ID, MAP_SHARED,
	    CRIU_VMA_AREA_REGULAR | CRIU_VMA_FILE_SHARED);
	vma(&v[2], STACK_ADDR, STACK_ADDR + 8 * PAGE, 0, 0, MAP_PRIVATE | MAP_ANONYMOUS,
	    CRIU_VMA_AREA_REGULAR | CRIU_VMA_ANON_PRIVATE);
	VmaEntry *pv[3] = { &v[0], &v[1], &v[2] };
	MmEntry mm = MM_ENTRY__INIT;
	mm.mm_start_code = EXE_ADDR;
	mm.mm_end_code = EXE_ADDR + PAGE;
	mm.exe_file_id = 1;
	mm.n_vmas = 3;
	mm.vmas = pv;
	ProtobufCMessage *m = &mm.base;
	write_image(dir, "mm-1.img", CRIU_MM_MAGIC, &m, 1);
}

static void write_pagemap(int dir, bool in_arena)
{
	PagemapHead head = PAGEMAP_HEAD__INIT;
	head.pages_id = 1;
	PagemapEntry pe[2];
	pagemap_entry__init(&pe[0]);
	pe[0].vaddr = EXE_ADDR;
	pe[0].compat_nr_pages = 1;
	pagemap_entry__init(&pe[1]);
	pe[1].vaddr = in_arena ? HEAP_ADDR + 4 * PAGE : STACK_ADDR;
	pe[1].has_nr_pages = true;
	pe[1].nr_pages = 2;
	ProtobufCMessage *m[3] = { &head.base, &pe[0].base, &pe[1].base };
	write_image(dir, "pagemap-1.img", CRIU_PAGEMAP_MAGIC, m, 3);
}

/* files.img with n regular files: names[i] under id ids[i], opened with flags[i]. */
static void write_reg_files(int dir, const char **names, const uint32_t *ids, const uint32_t *flags, size_t n)
{
	FownEntry fown = FOWN_ENTRY__INIT;
	RegFileEntry reg[8];
	FileEntry fe[8];
	ProtobufCMessage *m[8];
	CHECK(n <= 8);
	for (size_t i = 0; i < n; i++) {
		reg_file_entry__init(&reg[i]);
		reg[i].id = ids[i];
		reg[i].flags = flags[i];
		reg[i].fown = &fown;
		reg[i].name = (char *)names[i];
		file_entry__init(&fe[i]);
		fe[i].type = FD_TYPES__REG;
		fe[i].id = ids[i];
		fe[i].reg = &reg[i];
		m[i] = &fe[i].base;
	}
	write_image(dir, "files.img", CRIU_FILES_MAGIC, m, n);
}

static void write_files(int dir, bool write_only)
{
	const char *names[2] = { "/usr/bin/svc", POOL_PATH };
	uint32_t ids[2] = { 1, POOL_FILE_ID }, flags[2] = { O_RDWR, write_only ? O_WRONLY : O_RDWR };
	write_reg_files(dir, names, ids, flags, 2);
}

static void write_netdev(int dir)
{
	NetDeviceEntry nd[2];
	uint8_t lo_mac[6] = { 0 };
	const char *names[2] = { "lo", "eth0" };
	ProtobufCMessage *m[2];
	for (int i = 0; i < 2; i++) {
		net_device_entry__init(&nd[i]);
		nd[i].type = i ? ND_TYPE__VETH : ND_TYPE__LOOPBACK;
		nd[i].ifindex = (uint32_t)i + 1;
		nd[i].mtu = 1500;
		nd[i].name = (char *)names[i];
		nd[i].has_address = true;
		nd[i].address.len = 6;
		nd[i].address.data = (uint8_t *)(i ? PARENT_MAC : lo_mac);
		m[i] = &nd[i].base;
	}
	write_image(dir, "netdev-10.img", CRIU_NETDEV_MAGIC, m, 2);
}

/* A netlink message being built into buf. */
static size_t nl_begin(uint8_t *buf, size_t at, uint16_t type, const void *body, size_t body_len)
{
	struct nlmsghdr h = { .nlmsg_len = NLMSG_LENGTH(body_len), .nlmsg_type = type };
	memcpy(buf + at, &h, sizeof(h));
	memcpy(buf + at + NLMSG_HDRLEN, body, body_len);
	return at;
}

static void nl_attr(uint8_t *buf, size_t msg, uint16_t type, const void *data, size_t len)
{
	struct nlmsghdr *h = (struct nlmsghdr *)(void *)(buf + msg);
	struct rtattr a = { .rta_len = (unsigned short)RTA_LENGTH(len), .rta_type = type };
	size_t at = msg + NLMSG_ALIGN(h->nlmsg_len);
	memcpy(buf + at, &a, sizeof(a));
	memcpy(buf + at + RTA_LENGTH(0), data, len);
	h->nlmsg_len = (uint32_t)(NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a.rta_len));
}

static size_t nl_end(uint8_t *buf, size_t msg)
{
	return msg + NLMSG_ALIGN(((struct nlmsghdr *)(void *)(buf + msg))->nlmsg_len);
}

static uint32_t ip(const char *s)
{
	struct in_addr a;
	CHECK(inet_pton(AF_INET, s, &a) == 1);
	return a.s_addr;
}

static void link_local(const uint8_t mac[6], uint8_t out[16])
{
	const uint8_t ll[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, (uint8_t)(mac[0] ^ 2), mac[1], mac[2], 0xff, 0xfe,
				 mac[3], mac[4], mac[5] };
	memcpy(out, ll, 16);
}

static uint8_t ifaddr_img[1024] __attribute__((aligned(4)));
static size_t ifaddr_len;

static void write_ifaddr(int dir)
{
	uint8_t *b = ifaddr_img;
	uint32_t magic = 0x47361222, a;
	memcpy(b, &magic, 4);
	size_t at = 4;
	struct ifaddrmsg lo = { .ifa_family = AF_INET, .ifa_prefixlen = 8, .ifa_index = 1 };
	size_t m = nl_begin(b, at, RTM_NEWADDR, &lo, sizeof(lo));
	a = ip("127.0.0.1");
	nl_attr(b, m, IFA_ADDRESS, &a, 4);
	nl_attr(b, m, IFA_LOCAL, &a, 4);
	at = nl_end(b, m);
	struct ifaddrmsg eth = { .ifa_family = AF_INET, .ifa_prefixlen = 16, .ifa_index = 2 };
	m = nl_begin(b, at, RTM_NEWADDR, &eth, sizeof(eth));
	a = ip("10.78.1.1");
	nl_attr(b, m, IFA_ADDRESS, &a, 4);
	nl_attr(b, m, IFA_LOCAL, &a, 4);
	a = ip("10.78.255.255");
	nl_attr(b, m, IFA_BROADCAST, &a, 4);
	nl_attr(b, m, IFA_LABEL, "eth0", 5);
	at = nl_end(b, m);
	struct ifaddrmsg eth6 = { .ifa_family = AF_INET6, .ifa_prefixlen = 64, .ifa_index = 2 };
	m = nl_begin(b, at, RTM_NEWADDR, &eth6, sizeof(eth6));
	uint8_t ll[16];
	link_local(PARENT_MAC, ll);
	nl_attr(b, m, IFA_ADDRESS, ll, 16);
	ifaddr_len = nl_end(b, m);
	write_file(dir, "ifaddr-10.img", b, ifaddr_len);
}

static void write_route(int dir)
{
	uint8_t b[256] __attribute__((aligned(4)));
	uint32_t magic = 0x45311224, a;
	memcpy(b, &magic, 4);
	struct rtmsg r = { .rtm_family = AF_INET, .rtm_dst_len = 16, .rtm_table = RT_TABLE_MAIN };
	size_t m = nl_begin(b, 4, RTM_NEWROUTE, &r, sizeof(r));
	a = ip("10.78.0.0");
	nl_attr(b, m, RTA_DST, &a, 4);
	a = ip("10.78.1.1");
	nl_attr(b, m, RTA_PREFSRC, &a, 4);
	uint32_t oif = 2;
	nl_attr(b, m, RTA_OIF, &oif, 4);
	write_file(dir, "route-10.img", b, nl_end(b, m));
}

static struct cxlcr_arena_record good_record(void)
{
	struct cxlcr_arena_record r;
	memset(&r, 0, sizeof(r));
	memcpy(r.pool_uuid, UUID, 16);
	r.region_generation = 5;
	r.region_offset = ARENA_OFF;
	r.region_size = REGION_SIZE;
	r.region_kind = CXLCR_KIND_ARENA;
	r.flags = CXLCR_RECORD_F_SHARED;
	snprintf(r.region_name, sizeof(r.region_name), "svc");
	r.map_address = MAP_ADDR;
	r.map_length = REGION_SIZE;
	r.map_pgoff = ARENA_OFF;
	r.map_prot = PROT_READ | PROT_WRITE;
	r.owner_epoch = 3;
	r.nspid = 1;
	r.real_pid = 4242;
	snprintf(r.pool_path, sizeof(r.pool_path), POOL_PATH);
	cxlcr_arena_record_seal(&r);
	return r;
}

/* A fresh parent image set in base_dir/NAME/src and an empty .../dst. */
static int fixture(const char *name, const struct knobs *k, char *src, char *dst)
{
	sprintf(src, "%s/%s-src", base_dir, name);
	sprintf(dst, "%s/%s-dst", base_dir, name);
	CHECK(mkdir(src, 0755) == 0 && mkdir(dst, 0755) == 0);
	int dir = open(src, O_RDONLY | O_DIRECTORY);
	CHECK(dir >= 0);
	write_mm(dir);
	write_pagemap(dir, k->pagemap_in_arena);
	write_files(dir, k->pool_write_only);
	write_netdev(dir);
	write_ifaddr(dir);
	write_route(dir);
	write_file(dir, "core-1.img", "core", 4);
	struct cxlcr_arena_record r = good_record();
	CHECK(cxlcr_arena_records_write(dir, "cxlcr-arena-1.img", &r, 1) == 0);
	return dir;
}

static struct cxlcr_rebase_fork spec_for(const struct cxlcr_snapshot *s, const char *child_ip)
{
	struct cxlcr_rebase_fork spec = { .snapshot = s, .child_ip = ip(child_ip), .ifname = "eth0" };
	memcpy(spec.child_mac, CHILD_MAC, 6);
	return spec;
}

static void expect_vma(const VmaEntry *v, uint64_t start, uint64_t end, uint64_t pgoff, uint32_t status,
		       bool anon)
{
	CHECK(v->start == start && v->end == end, " VMA %#llx-%#llx, expected %#llx-%#llx",
	      (unsigned long long)v->start, (unsigned long long)v->end, (unsigned long long)start,
	      (unsigned long long)end);
	CHECK_EQ(v->status, status);
	if (anon) {
		CHECK_EQ(v->flags, MAP_PRIVATE | MAP_ANONYMOUS);
		CHECK_EQ(v->shmid, 0);
		CHECK(!v->has_fdflags);
	} else {
		CHECK_EQ(v->pgoff, pgoff);
		CHECK_EQ(v->shmid, POOL_FILE_ID);
		CHECK(v->has_fdflags && v->fdflags == O_RDONLY);
		CHECK_EQ(v->flags, MAP_PRIVATE);
	}
	CHECK_EQ(v->prot, PROT_READ | PROT_WRITE);
	CHECK_EQ(v->fd, -1);
}

static bool contains(const uint8_t *hay, size_t len, const void *needle, size_t n)
{
	return memmem(hay, len, needle, n) != NULL;
}

static void test_good(void)
{
	SAY("a good image set: runs split, zero runs anonymous, fork record, new identity");
	struct knobs k = { 0 };
	struct cxlcr_snapshot s;
	char src[512], dst[512];
	make_snapshot(&s, &k);
	int sd = fixture("good", &k, src, dst);
	uint8_t before[4096], after[4096];
	size_t before_len = read_file(sd, "mm-1.img", before, sizeof(before));
	struct cxlcr_rebase_fork spec = spec_for(&s, "10.78.9.9");
	struct cxlcr_rebase_stats st;
	CHECK(cxlcr_rebase_fork(src, dst, &spec, &st) == 0, " %s", cxlcr_last_error());
	CHECK_EQ(st.vmas_in, 3);
	CHECK_EQ(st.vmas_out, 10);
	CHECK_EQ(st.runs_cxl, 3);
	CHECK_EQ(st.runs_zero, 2);
	CHECK_EQ(st.files_rewritten, 5);   /* mm, record, netdev, ifaddr, route */
	CHECK_EQ(st.files_linked, 3);      /* pagemap, files, core */
	CHECK(read_file(sd, "mm-1.img", after, sizeof(after)) == before_len && !memcmp(before, after, before_len),
	      " the parent's mm image changed");

	int dd = open(dst, O_RDONLY | O_DIRECTORY);
	CHECK(dd >= 0);
	struct image_file f;
	ProtobufCMessage *m;
	CHECK(image_load(dd, "mm-1.img", CRIU_MM_MAGIC, &f) == 1);
	CHECK(image_next(&f, &mm_entry__descriptor, &m) == 1);
	const MmEntry *mm = (const MmEntry *)m;
	CHECK_EQ(mm->n_vmas, 10);
	uint32_t file_priv = CRIU_VMA_AREA_REGULAR | CRIU_VMA_FILE_PRIVATE;
	uint32_t anon_priv = CRIU_VMA_AREA_REGULAR | CRIU_VMA_ANON_PRIVATE;
	CHECK_EQ(mm->vmas[0]->start, EXE_ADDR);
	/* the pool pages before the arena stay a shared mapping of them */
	CHECK(mm->vmas[1]->start == MAP_ADDR - 2 * PAGE && mm->vmas[1]->end == MAP_ADDR);
	CHECK_EQ(mm->vmas[1]->pgoff, ARENA_OFF - 2 * PAGE);
	CHECK_EQ(mm->vmas[1]->status, CRIU_VMA_AREA_REGULAR | CRIU_VMA_FILE_SHARED);
	CHECK_EQ(mm->vmas[1]->flags, MAP_SHARED);
	/* the header: a view of the snapshot's copy of it (never of the
	 * parent's live arena region), then zero up to the heap */
	expect_vma(mm->vmas[2], MAP_ADDR, MAP_ADDR + HDR_COPY, HDR_COPY_OFF, file_priv, false);
	expect_vma(mm->vmas[3], MAP_ADDR + HDR_COPY, HEAP_ADDR, 0, anon_priv, true);
	expect_vma(mm->vmas[4], HEAP_ADDR, HEAP_ADDR + 3 * PAGE, DATA_OFF, file_priv, false);
	expect_vma(mm->vmas[5], HEAP_ADDR + 3 * PAGE, HEAP_ADDR + 5 * PAGE, 0, anon_priv, true);
	expect_vma(mm->vmas[6], HEAP_ADDR + 5 * PAGE, HEAP_ADDR + 6 * PAGE, DATA_OFF + 3 * PAGE, file_priv, false);
	expect_vma(mm->vmas[7], HEAP_ADDR + 6 * PAGE, HEAP_ADDR + 7 * PAGE, DATA_OFF + 5 * PAGE, file_priv, false);
	expect_vma(mm->vmas[8], HEAP_ADDR + 7 * PAGE, HEAP_ADDR + HEAP_PAGES * PAGE, 0, anon_priv, true);
	CHECK_EQ(mm->vmas[9]->start, STACK_ADDR);
	CHECK_EQ(mm->exe_file_id, 1);
	CHECK(image_next(&f, &mm_entry__descriptor, &m) == 0 || (protobuf_c_message_free_unpacked(m, NULL), 0));
	protobuf_c_message_free_unpacked((ProtobufCMessage *)mm, NULL);
	image_free(&f);
	SAY("  VMAs: view of the snapshot's header copy, zero to the heap, 3 CXL runs (pgoff of the copies), 2 zero runs");

	struct cxlcr_arena_record *recs;
	CHECK(cxlcr_arena_records_read(dd, "cxlcr-arena-1.img", &recs) == 1, " %s", cxlcr_last_error());
	struct cxlcr_arena_record want = good_record();
	CHECK(recs[0].flags == CXLCR_RECORD_F_FORK);
	CHECK_EQ(recs[0].region_kind, CXLCR_KIND_SNAPSHOT);
	CHECK_EQ(recs[0].region_generation, 77);
	CHECK(recs[0].map_address == want.map_address && recs[0].map_length == want.map_length &&
	      recs[0].map_pgoff == want.map_pgoff && recs[0].owner_epoch == want.owner_epoch);
	CHECK(cxlcr_arena_record_check(&recs[0]) == 0);
	free(recs);
	SAY("  fork record: valid, F_FORK, snapshot kind and generation, map_* kept");

	CHECK(image_load(dd, "netdev-10.img", CRIU_NETDEV_MAGIC, &f) == 1);
	int links = 0;
	while (image_next(&f, &net_device_entry__descriptor, &m) == 1) {
		const NetDeviceEntry *nd = (const NetDeviceEntry *)m;
		if (!strcmp(nd->name, "eth0")) {
			CHECK(nd->address.len == 6 && !memcmp(nd->address.data, CHILD_MAC, 6));
			links++;
		} else {
			CHECK(nd->address.len == 6 && nd->address.data[5] == 0, " lo's MAC changed");
		}
		protobuf_c_message_free_unpacked(m, NULL);
	}
	CHECK_EQ(links, 1);
	image_free(&f);

	uint8_t buf[1024];
	size_t n = read_file(dd, "ifaddr-10.img", buf, sizeof(buf));
	CHECK_EQ(n, ifaddr_len);
	uint32_t a = ip("10.78.9.9"), old = ip("10.78.1.1"), brd = ip("10.78.255.255"), lo = ip("127.0.0.1");
	uint8_t ll[16], old_ll[16];
	link_local(CHILD_MAC, ll);
	link_local(PARENT_MAC, old_ll);
	CHECK(contains(buf, n, &a, 4) && !contains(buf, n, &old, 4), " ifaddr keeps the parent's address");
	CHECK(contains(buf, n, &brd, 4) && contains(buf, n, &lo, 4));
	CHECK(contains(buf, n, ll, 16) && !contains(buf, n, old_ll, 16), " link-local not rederived");
	n = read_file(dd, "route-10.img", buf, sizeof(buf));
	CHECK(contains(buf, n, &a, 4) && !contains(buf, n, &old, 4), " route keeps the parent's source");
	SAY("  network: child MAC on eth0, address/local/link-local and route source rewritten");

	struct stat s1, s2;
	CHECK(fstatat(sd, "core-1.img", &s1, 0) == 0 && fstatat(dd, "core-1.img", &s2, 0) == 0);
	CHECK(s1.st_ino == s2.st_ino, " core-1.img was not hard-linked");
	CHECK(fstatat(sd, "mm-1.img", &s1, 0) == 0 && fstatat(dd, "mm-1.img", &s2, 0) == 0);
	CHECK(s1.st_ino != s2.st_ino);
	SAY("  unchanged images hard-linked, rewritten ones new files");

	CHECK_ERROR(cxlcr_rebase_fork(src, dst, &spec, NULL), "is not empty");
	close(dd);
	close(sd);
}

/* A fixture with one change, that must be refused with want. */
static void refused(const char *name, const struct knobs *k, void (*spoil)(int dir), const char *child_ip,
		    const char *want)
{
	struct cxlcr_snapshot s;
	char src[512], dst[512];
	make_snapshot(&s, k);
	int sd = fixture(name, k, src, dst);
	if (spoil)
		spoil(sd);
	struct cxlcr_rebase_fork spec = spec_for(&s, child_ip ? child_ip : "10.78.9.9");
	CHECK_ERROR(cxlcr_rebase_fork(src, dst, &spec, NULL), want);
	SAY("%s: refused: %s", name, cxlcr_last_error());
	close(sd);
}

static void truncate_mm(int dir)
{
	uint8_t buf[4096];
	size_t n = read_file(dir, "mm-1.img", buf, sizeof(buf));
	write_file(dir, "mm-1.img", buf, n - 10);
}

static void corrupt_mm(int dir)
{
	uint8_t buf[64];
	uint32_t head[3] = { CRIU_IMG_COMMON_MAGIC, CRIU_MM_MAGIC, 40 };
	memcpy(buf, head, sizeof(head));
	memset(buf + sizeof(head), 0xff, 40);
	write_file(dir, "mm-1.img", buf, sizeof(head) + 40);
}

static void foreign_mm(int dir)
{
	uint8_t buf[4096];
	size_t n = read_file(dir, "mm-1.img", buf, sizeof(buf));
	uint32_t magic = CRIU_PAGEMAP_MAGIC;
	memcpy(buf + 4, &magic, 4);
	write_file(dir, "mm-1.img", buf, n);
}

static void truncate_ifaddr(int dir)
{
	write_file(dir, "ifaddr-10.img", ifaddr_img, ifaddr_len - 6);
}

static void foreign_ifaddr(int dir)
{
	write_file(dir, "ifaddr-10.img", "# not an ip addr save dump\n", 27);
}

static void truncate_netdev(int dir)
{
	uint8_t buf[4096];
	size_t n = read_file(dir, "netdev-10.img", buf, sizeof(buf));
	write_file(dir, "netdev-10.img", buf, n - 3);
}

static void corrupt_record(int dir)
{
	struct cxlcr_arena_record r = good_record();
	r.map_address += PAGE;   /* not sealed again */
	write_file(dir, "cxlcr-arena-1.img", &r, sizeof(r));
}

static void missing_mm(int dir)
{
	CHECK(unlinkat(dir, "mm-1.img", 0) == 0);
}

/* A dump's files.img with these regular files, and a pstree.img of
 * `processes` processes (none: no pstree.img). */
static int proc_fixture(const char *name, const char **paths, size_t n, unsigned processes)
{
	char dir_path[300];
	snprintf(dir_path, sizeof(dir_path), "%s/%s", base_dir, name);
	CHECK(mkdir(dir_path, 0755) == 0);
	int dir = open(dir_path, O_RDONLY | O_DIRECTORY);
	CHECK(dir >= 0);
	uint32_t ids[8], flags[8];
	CHECK(n <= 8);
	for (size_t i = 0; i < n; i++) {
		ids[i] = (uint32_t)i + 1;
		flags[i] = O_RDONLY;
	}
	write_reg_files(dir, paths, ids, flags, n);
	PstreeEntry pe[2];
	ProtobufCMessage *pm[2];
	for (unsigned i = 0; i < processes && i < 2; i++) {
		pstree_entry__init(&pe[i]);
		pe[i].pid = i + 1;
		pe[i].ppid = i;
		pm[i] = &pe[i].base;
	}
	if (processes)
		write_image(dir, "pstree.img", CRIU_PSTREE_MAGIC, pm, processes);
	return dir;
}

/* The names in files.img of dir, in order, into names[] (freed by the caller). */
static size_t file_names(int dir, char **names, size_t max)
{
	struct image_file f;
	CHECK(image_load(dir, "files.img", CRIU_FILES_MAGIC, &f) == 1, "%s", cxlcr_last_error());
	ProtobufCMessage *m;
	size_t n = 0;
	int rc;
	while ((rc = image_next(&f, &file_entry__descriptor, &m)) > 0) {
		const FileEntry *fe = (const FileEntry *)m;
		CHECK(n < max && fe->reg);
		names[n++] = strdup(fe->reg->name);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	CHECK(rc == 0);
	image_free(&f);
	return n;
}

static void test_proc_self(void)
{
	const char *paths[] = { "/proc/42/stat", "/proc/42", "proc/42/fd/", "/proc/42/task/43/stat",
				"/proc/420/stat", "/proc/4/stat", "/proc/self/stat", "/usr/bin/svc" };
	const char *want[] = { "/proc/self/stat", "/proc/self", "proc/self/fd/", "/proc/42/task/43/stat",
			       "/proc/420/stat", "/proc/4/stat", "/proc/self/stat", "/usr/bin/svc" };
	size_t n = sizeof(paths) / sizeof(paths[0]);
	char dir_path[300], *got[8];
	unsigned rewritten = 99;

	/* One process, pid 42: its own files, not its threads' or others'. */
	int dir = proc_fixture("proc-one", paths, n, 1);
	snprintf(dir_path, sizeof(dir_path), "%s/proc-one", base_dir);
	CHECK(cxlcr_rebase_proc_self(dir_path, 42, &rewritten) == 0, "%s", cxlcr_last_error());
	CHECK(rewritten == 3, " rewrote %u paths, not 3", rewritten);
	CHECK(file_names(dir, got, 8) == n);
	for (size_t i = 0; i < n; i++) {
		CHECK(strcmp(got[i], want[i]) == 0, " path %zu: %s, not %s", i, got[i], want[i]);
		free(got[i]);
	}
	CHECK(faccessat(dir, "files.img.proc-self", F_OK, 0) < 0, " the temporary image was left");
	close(dir);

	/* Two processes: the holder need not be the process named. */
	dir = proc_fixture("proc-two", paths, n, 2);
	snprintf(dir_path, sizeof(dir_path), "%s/proc-two", base_dir);
	CHECK(cxlcr_rebase_proc_self(dir_path, 42, &rewritten) == 0 && rewritten == 0);
	CHECK(file_names(dir, got, 8) == n);
	for (size_t i = 0; i < n; i++) {
		CHECK(strcmp(got[i], paths[i]) == 0, " path %zu changed to %s", i, got[i]);
		free(got[i]);
	}
	close(dir);

	/* No /proc path: not even pstree.img is needed. */
	const char *plain[] = { "/usr/bin/svc", POOL_PATH };
	dir = proc_fixture("proc-none", plain, 2, 0);
	snprintf(dir_path, sizeof(dir_path), "%s/proc-none", base_dir);
	CHECK(cxlcr_rebase_proc_self(dir_path, 42, &rewritten) == 0 && rewritten == 0, "%s", cxlcr_last_error());
	close(dir);

	/* A /proc path and no pstree.img, or a corrupt one: one line. */
	dir = proc_fixture("proc-nopstree", paths, 1, 0);
	snprintf(dir_path, sizeof(dir_path), "%s/proc-nopstree", base_dir);
	CHECK(cxlcr_rebase_proc_self(dir_path, 42, &rewritten) < 0);
	CHECK(strstr(cxlcr_last_error(), "pstree.img: missing"), " said: %s", cxlcr_last_error());
	write_file(dir, "pstree.img", "\x19\x43\x56\x54\x30\x30\x27\x50\x40\0\0\0\x08", 13);
	CHECK(cxlcr_rebase_proc_self(dir_path, 42, &rewritten) < 0);
	CHECK(strstr(cxlcr_last_error(), "pstree.img"), " said: %s", cxlcr_last_error());
	CHECK(file_names(dir, got, 8) == 1 && strcmp(got[0], paths[0]) == 0);
	free(got[0]);
	close(dir);
	printf("  ok: /proc/<pid> paths of a one-process dump become /proc/self; threads', others' and "
	       "several processes' stay\n");
}

int main(void)
{
	const char *tmp = getenv("CXLCR_TEST_TMP");
	snprintf(base_dir, sizeof(base_dir), "%s/rebase_test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	CHECK(mkdtemp(base_dir) != NULL);
	test_on_failure(remove_tree);
	printf("rebase_test\n");

	test_good();
	struct knobs none = { 0 }, cold = { .cold_page = true }, pm = { .pagemap_in_arena = true },
		     wo = { .pool_write_only = true }, other = { .other_arena = true };
	refused("cold", &cold, NULL, NULL, "cold pages are not supported yet");
	refused("truncated-mm", &none, truncate_mm, NULL, "mm-1.img: truncated");
	refused("corrupt-mm", &none, corrupt_mm, NULL, "mm-1.img: corrupt entry");
	refused("foreign-mm", &none, foreign_mm, NULL, "mm-1.img: not the CRIU image expected");
	refused("missing-mm", &none, missing_mm, NULL, "there is no mm-1.img");
	refused("truncated-netdev", &none, truncate_netdev, NULL, "netdev-10.img: truncated");
	refused("truncated-ifaddr", &none, truncate_ifaddr, NULL, "ifaddr-10.img: truncated");
	refused("foreign-ifaddr", &none, foreign_ifaddr, NULL, "ifaddr-10.img: not an iproute2 dump");
	refused("corrupt-record", &none, corrupt_record, NULL, "cxlcr-arena-1.img: corrupt arena record");
	refused("pagemap", &pm, NULL, NULL, "inside arena svc");
	refused("write-only-pool", &wo, NULL, NULL, "allow no private mapping");
	refused("other-arena", &other, NULL, NULL, "was taken of arena generation 6");
	refused("subnet", &none, NULL, "10.79.0.5", "outside the parent's subnet 10.78.1.1/16");
	test_proc_self();

	remove_tree();
	printf("rebase_test: all passed\n");
	return 0;
}
