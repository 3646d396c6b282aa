/*
 * Finding and sizing devdax devices with libdaxctl.
 *
 * libdaxctl is loaded when a pool turns out to be a character device, not
 * linked: it brings libkmod, libcrypto, libzstd and liblzma along, ~1 ms of
 * loading in every process that opens a pool (each service the preload
 * starts, each criu run the plugin is loaded into, each cxlcr command),
 * and a pool file never needs it.
 */
#include <daxctl/libdaxctl.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "devdax.h"
#include "error.h"

#define LIBDAXCTL "libdaxctl.so.1"

/* The functions of libdaxctl used here, as they are declared there. */
static struct {
	bool loaded;
	__typeof__(daxctl_new) *new_ctx;
	__typeof__(daxctl_unref) *unref;
	__typeof__(daxctl_region_get_first) *region_first;
	__typeof__(daxctl_region_get_next) *region_next;
	__typeof__(daxctl_dev_get_first) *dev_first;
	__typeof__(daxctl_dev_get_next) *dev_next;
	__typeof__(daxctl_dev_get_major) *dev_major;
	__typeof__(daxctl_dev_get_minor) *dev_minor;
	__typeof__(daxctl_dev_get_size) *dev_size;
	__typeof__(daxctl_dev_get_resource) *dev_resource;
} dax;

static int load_libdaxctl(const char *path)
{
	if (dax.loaded)
		return 0;
	void *lib = dlopen(LIBDAXCTL, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return cxlcr_error("pool %s is a character device, and %s cannot be loaded: %s", path,
				   LIBDAXCTL, dlerror());
	dax.new_ctx = dlsym(lib, "daxctl_new");
	dax.unref = dlsym(lib, "daxctl_unref");
	dax.region_first = dlsym(lib, "daxctl_region_get_first");
	dax.region_next = dlsym(lib, "daxctl_region_get_next");
	dax.dev_first = dlsym(lib, "daxctl_dev_get_first");
	dax.dev_next = dlsym(lib, "daxctl_dev_get_next");
	dax.dev_major = dlsym(lib, "daxctl_dev_get_major");
	dax.dev_minor = dlsym(lib, "daxctl_dev_get_minor");
	dax.dev_size = dlsym(lib, "daxctl_dev_get_size");
	dax.dev_resource = dlsym(lib, "daxctl_dev_get_resource");
	if (!dax.new_ctx || !dax.unref || !dax.region_first || !dax.region_next || !dax.dev_first ||
	    !dax.dev_next || !dax.dev_major || !dax.dev_minor || !dax.dev_size || !dax.dev_resource) {
		dlclose(lib);
		return cxlcr_error("pool %s: %s lacks a function cxlcr needs", path, LIBDAXCTL);
	}
	dax.loaded = true;
	return 0;
}

/* What libdaxctl says of the devdax device rdev: its capacity, and the
 * physical address of its first byte. */
static int describe(dev_t rdev, const char *path, uint64_t *size, uint64_t *phys)
{
	if (load_libdaxctl(path) < 0)
		return -1;
	struct daxctl_ctx *ctx;
	int rc = dax.new_ctx(&ctx);
	if (rc < 0)
		return cxlcr_error("pool %s: libdaxctl: %s", path, strerror(-rc));
	rc = cxlcr_error("pool %s: character device %u:%u is not a devdax device", path,
			 major(rdev), minor(rdev));
	for (struct daxctl_region *region = dax.region_first(ctx); region; region = dax.region_next(region)) {
		for (struct daxctl_dev *dev = dax.dev_first(region); dev; dev = dax.dev_next(dev)) {
			if ((unsigned)dax.dev_major(dev) == major(rdev) &&
			    (unsigned)dax.dev_minor(dev) == minor(rdev)) {
				*size = dax.dev_size(dev);
				*phys = dax.dev_resource(dev);
				rc = 0;
			}
		}
	}
	dax.unref(ctx);
	return rc;
}

int cxlcr_devdax_size(dev_t rdev, const char *path, uint64_t *size)
{
	uint64_t phys;
	return describe(rdev, path, size, &phys);
}

int cxlcr_devdax_phys(dev_t rdev, const char *path, uint64_t *phys)
{
	uint64_t size;
	if (describe(rdev, path, &size, phys) < 0)
		return -1;
	return *phys ? 0 : cxlcr_error("pool %s: libdaxctl knows no physical address of the device", path);
}
