/*
 * The kernel interfaces of write tracking that Debian 12's headers (Linux
 * 6.1) lack: PAGEMAP_SCAN and userfaultfd's asynchronous write protection,
 * both Linux 6.7 uapi. The one place they are defined; each is taken from
 * the system's headers where those have it.
 */
#ifndef CXLCR_TRACKING_UAPI_H
#define CXLCR_TRACKING_UAPI_H

#include <linux/fs.h>
#include <linux/types.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>

#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#ifndef PAGEMAP_SCAN
#define PAGE_IS_WPALLOWED  (1 << 0)
#define PAGE_IS_WRITTEN    (1 << 1)
#define PAGE_IS_FILE       (1 << 2)
#define PAGE_IS_PRESENT    (1 << 3)
#define PAGE_IS_SWAPPED    (1 << 4)
#define PAGE_IS_PFNZERO    (1 << 5)
#define PAGE_IS_HUGE       (1 << 6)
#define PAGE_IS_SOFT_DIRTY (1 << 7)

/* A run of pages [start, end) that share the categories asked for. */
struct page_region {
	__u64 start;
	__u64 end;
	__u64 categories;
};

#define PM_SCAN_WP_MATCHING   (1 << 0) /* write-protect what matched, in the same walk */
#define PM_SCAN_CHECK_WPASYNC (1 << 1) /* fail (EPERM) on a page not tracked */

struct pm_scan_arg {
	__u64 size;
	__u64 flags;
	__u64 start;
	__u64 end;
	__u64 walk_end;             /* out: where the walk stopped */
	__u64 vec;                  /* struct page_region[vec_len] */
	__u64 vec_len;
	__u64 max_pages;
	__u64 category_inverted;
	__u64 category_mask;
	__u64 category_anyof_mask;
	__u64 return_mask;
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

#endif
