/* Finding and sizing devdax devices with libdaxctl. */
#include <daxctl/libdaxctl.h>
#include <errno.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "devdax.h"
#include "error.h"

int cxlcr_devdax_size(dev_t rdev, const char *path, uint64_t *size)
{
	struct daxctl_ctx *ctx;
	struct daxctl_region *region;
	struct daxctl_dev *dev;
	int rc = daxctl_new(&ctx);
	if (rc < 0)
		return cxlcr_error("pool %s: libdaxctl: %s", path, strerror(-rc));
	rc = cxlcr_error("pool %s: character device %u:%u is not a devdax device", path,
			 major(rdev), minor(rdev));
	daxctl_region_foreach(ctx, region) {
		daxctl_dev_foreach(region, dev) {
			if ((unsigned)daxctl_dev_get_major(dev) == major(rdev) &&
			    (unsigned)daxctl_dev_get_minor(dev) == minor(rdev)) {
				*size = daxctl_dev_get_size(dev);
				rc = 0;
			}
		}
	}
	daxctl_unref(ctx);
	return rc;
}
