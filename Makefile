# cxlcr: checkpoint, migrate and fork services whose heap lives in CXL memory.
#
#   make demo     set up this machine, build, run the Redis demo on an emulated pool
#   make test     set up this machine, build, run every test (and the sanitizer build)
#   make          build only (needs `make deps` once)
#   make setup    set up this machine, then build
#   make bench    the figures of the issues (throughput and heap placement)

CC      ?= gcc
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
BASE    := -std=gnu11 -D_GNU_SOURCE -fPIC $(WARN) $(CFLAGS) $(EXTRA_CFLAGS)
O       ?= build

# What every component needs of common/ (the preload and the CRIU plugin
# take only this), and the rest of it.
POOL_SRC    := common/arena.c common/checksum.c common/devdax.c common/error.c common/pool.c common/util.c \
               tracking/scan.c
COMMON_SRC  := $(POOL_SRC) \
               common/snapshot.c common/snapshot_draft.c common/snapshot_split.c common/catalog.c common/hosts.c common/rtnl.c common/netns_nursery.c common/seal.c common/cpus.c
PRELOAD_SRC := preload/glue.c preload/glibc.c preload/attach.c preload/grow.c preload/stats.c preload/malloc.c preload/shed.c preload/release.c preload/track.c
VERBS_SRC   := daemon/dispatch.c daemon/rpc.c daemon/cmd_pool.c daemon/cmd_pool_check.c daemon/cmd_pod.c daemon/cmd_pod_host.c daemon/host_files.c \
               daemon/cmd_run.c daemon/cmd_status.c daemon/service_there.c daemon/cmd_migrate.c daemon/restore.c daemon/restore_session.c daemon/container.c \
               daemon/criu.c daemon/criu_swrk.c daemon/image_store.c daemon/services.c daemon/exec.c daemon/json.c \
               daemon/pod.c daemon/fork.c daemon/cmd_snapshot.c daemon/cmd_gc.c daemon/prefetch.c \
               daemon/paths.c daemon/cmd_hosts.c pod/membership.c tracking/tracker.c tracking/since.c tracking/zap_probe.c tracking/huge_again.c tracking/idle.c daemon/cmd_huge_pages.c emulation/hostgroup.c emulation/hostfs.c emulation/hostpid.c emulation/host_start.c \
               control/lease.c control/frozen.c control/fence.c control/outcome.c control/owner_state.c recovery/drain.c recovery/kmsg.c recovery/points.c recovery/restore_point.c recovery/tombstone.c \
               recovery/spawn.c recovery/fresh_arena.c recovery/restore_elsewhere.c recovery/takeover.c recovery/test_step.c recovery/marks.c recovery/ended_runs.c \
               daemon/config.c daemon/rpc_tcp.c daemon/rpc_wire.c pager/inject.c pager/pager.c pager/ahead.c daemon/cmd_tier.c daemon/snapshot_tier.c
# The cold tier (tier/, docs/cold-tier.md): its libfabric client, the tier
# table, tiered snapshots and their reader; cxlcr-memd is its server.
TIER_SRC    := tier/fabric.c tier/table.c tier/client.c tier/snapshot.c tier/reader.c tier/hotset.c tier/watch.c
VERBS_SRC   += $(TIER_SRC)
# The fork API (see the end of this file): both binaries serve or use it.
API_SRC     := api/protocol.c api/decode.c
VERBS_SRC   += daemon/api.c daemon/api_token.c daemon/cmd_fork.c $(API_SRC) lib/api_client.c
TEST_PROGS  := alloc_stress alloc_api alloc_fork alloc_exhaust alloc_grow pool_test snapshot_test track_test

all: $(O)/libcxlcr-preload.so $(O)/cxlcr $(O)/cxlcrd $(O)/cxlcr-memd $(addprefix $(O)/tests/,$(TEST_PROGS)) \
     $(O)/tests/tier_tool $(O)/tests/tier_table_test $(O)/tests/claim_tool $(O)/tests/lock_tool \
     $(O)/tests/track_tool $(O)/tests/thread_forker

$(O)/common/%.o: common/%.c common/*.h | $(O)/common
	$(CC) $(BASE) -c -o $@ $<
$(O)/preload/%.o: preload/%.c preload/*.h common/*.h tracking/*.h | $(O)/preload
	$(CC) $(BASE) -fvisibility=hidden -ftls-model=initial-exec -c -o $@ $<
$(O)/daemon/%.o: daemon/%.c daemon/*.h common/*.h | $(O)/daemon
	$(CC) $(BASE) -c -o $@ $<
# The control protocol's messages (proto/control.proto), compiled with
# protoc-c at build time like CRIU's images (below); rpc_wire.c alone
# packs and parses them.
CTL_GEN := $(O)/proto/gen/control.pb-c.c
CTL_OBJ := $(CTL_GEN:.c=.o)
$(O)/proto/gen/control.pb-c.c $(O)/proto/gen/control.pb-c.h &: proto/control.proto | $(O)/proto/gen
	protoc-c --proto_path=proto --c_out=$(O)/proto/gen $<
$(CTL_OBJ): $(CTL_GEN) $(CTL_GEN:.c=.h)
	$(CC) -std=gnu11 -D_GNU_SOURCE -fPIC -w $(CFLAGS) $(EXTRA_CFLAGS) -I$(O)/proto/gen -c -o $@ $<
$(O)/daemon/rpc_wire.o: daemon/rpc_wire.c daemon/*.h common/*.h $(CTL_GEN:.c=.h) | $(O)/daemon
	$(CC) $(BASE) -I$(O)/proto/gen -c -o $@ $<
# CRIU's restore requests (rpc.proto, generated with CRIU's images below).
$(O)/daemon/criu_swrk.o: daemon/criu_swrk.c daemon/*.h common/*.h $(O)/rebase/gen/rpc.pb-c.h | $(O)/daemon
	$(CC) $(BASE) -I$(O)/rebase/gen -c -o $@ $<
$(O)/proto/gen:
	mkdir -p $@
.SECONDARY: $(CTL_GEN) $(CTL_GEN:.c=.h)
# Test programs of the control protocol: a client that can send what an
# attacker can (a wrong key, a replay), and the fuzzer of its parsers.
CTL_TESTS := ctl_client
all: $(addprefix $(O)/tests/,$(CTL_TESTS))
$(O)/tests/ctl_%: tests/ctl_%.c tests/*.h daemon/rpc_wire.h $(O)/daemon/rpc_wire.o $(CTL_OBJ) \
		$(O)/libcxlcr-common.a | $(O)/tests
	$(CC) $(BASE) -o $@ $< $(O)/daemon/rpc_wire.o $(CTL_OBJ) $(O)/libcxlcr-common.a -lprotobuf-c -lsodium -ldl -lpthread
$(O)/tracking/%.o: tracking/%.c tracking/*.h common/*.h | $(O)/tracking
	$(CC) $(BASE) -c -o $@ $<
$(O)/emulation/%.o: emulation/%.c emulation/*.h daemon/pod.h daemon/host_files.h common/*.h | $(O)/emulation
	$(CC) $(BASE) -c -o $@ $<
$(O)/pager/%.o: pager/%.c pager/*.h daemon/host_files.h common/*.h | $(O)/pager
	$(CC) $(BASE) -c -o $@ $<
$(O)/pod/%.o: pod/%.c pod/*.h common/*.h | $(O)/pod
	$(CC) $(BASE) -c -o $@ $<
$(O)/control/%.o: control/%.c control/*.h daemon/*.h common/*.h | $(O)/control
	$(CC) $(BASE) -c -o $@ $<
$(O)/recovery/%.o: recovery/%.c recovery/*.h daemon/*.h common/*.h | $(O)/recovery
	$(CC) $(BASE) -c -o $@ $<
$(O)/tier/%.o: tier/%.c tier/*.h common/*.h | $(O)/tier
	$(CC) $(BASE) -c -o $@ $<
$(O)/cxlcr-memd: $(O)/tier/memd.o $(TIER_SRC:%.c=$(O)/%.o) $(O)/libcxlcr-common.a
	$(CC) $(CFLAGS) $(EXTRA_CFLAGS) -o $@ $^ -ldl -lpthread
# The tier table's own test (no fabric: the table is pool memory).
$(O)/tests/tier_table_test: tests/tier_table_test.c tests/test.h tier/*.h $(O)/tier/table.o $(O)/libcxlcr-common.a | $(O)/tests
	$(CC) $(BASE) -o $@ $< $(O)/tier/table.o $(O)/libcxlcr-common.a -ldl -lpthread
# The verb lease's own test (a holder on another host, fenced).
all: $(O)/tests/lease_test
$(O)/tests/lease_test: tests/lease_test.c tests/test.h control/lease.h $(O)/control/lease.o $(O)/control/frozen.o $(O)/libcxlcr-common.a | $(O)/tests
	$(CC) $(BASE) -o $@ $< $(O)/control/lease.o $(O)/control/frozen.o $(O)/libcxlcr-common.a -ldl -lpthread
# The cold tier's test tool: RMA round trips, reading, checking and
# damaging tiered snapshots, timing cold reads (tests/t_tier.sh, bench/tier.sh).
$(O)/tests/tier_tool: tests/tier_tool.c tier/*.h $(TIER_SRC:%.c=$(O)/%.o) $(O)/libcxlcr-common.a | $(O)/tests
	$(CC) $(BASE) -o $@ $< $(TIER_SRC:%.c=$(O)/%.o) $(O)/libcxlcr-common.a -ldl -lpthread
$(O)/tests/%: tests/%.c tests/*.h common/*.h $(O)/libcxlcr-common.a | $(O)/tests
	$(CC) $(BASE) -o $@ $< $(O)/libcxlcr-common.a -ldl -lpthread

# alloc_exhaust again, linked with another allocator (tests/run.sh runs
# each whose library is installed): fallback blocks must still be glibc's.
FOREIGN_ALLOCATORS := tcmalloc:/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
                      jemalloc:/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
define foreign_alloc_test
all: $$(if $$(wildcard $(2)),$(O)/tests/alloc_exhaust_$(1))
$(O)/tests/alloc_exhaust_$(1): tests/alloc_exhaust.c tests/*.h common/*.h $(O)/libcxlcr-common.a | $(O)/tests
	$$(CC) $$(BASE) -o $$@ $$< $(O)/libcxlcr-common.a $(2) -ldl -lpthread
endef
$(foreach a,$(FOREIGN_ALLOCATORS),$(eval $(call foreign_alloc_test,$(word 1,$(subst :, ,$(a))),$(word 2,$(subst :, ,$(a))))))

$(O)/libcxlcr-common.a: $(COMMON_SRC:%.c=$(O)/%.o)
	ar rcs $@ $^

# The preload carries its own copy of the common code: it must not depend
# on anything but libc (libdaxctl and mimalloc are loaded at run time).
$(O)/libcxlcr-preload.so: $(PRELOAD_SRC:%.c=$(O)/%.o) $(POOL_SRC:%.c=$(O)/%.o) preload/exports.map
	$(CC) -shared $(CFLAGS) $(EXTRA_CFLAGS) -o $@ $(filter %.o,$^) -ldl -lpthread -Wl,-z,defs -Wl,-z,now \
		-Wl,--version-script=preload/exports.map

# The command line and the per-host daemon share all the verb code.
$(O)/cxlcr: $(O)/daemon/cxlcr.o $(VERBS_SRC:%.c=$(O)/%.o) $(CTL_OBJ) $(O)/librebase.a $(O)/libcxlcr-common.a
	$(CC) $(CFLAGS) $(EXTRA_CFLAGS) -o $@ $^ -ldl -lprotobuf-c -lsodium -ljansson -lpthread
$(O)/cxlcrd: $(O)/daemon/cxlcrd.o $(O)/daemon/workers.o $(O)/daemon/dlog.o $(O)/pod/liveness.o $(VERBS_SRC:%.c=$(O)/%.o) $(CTL_OBJ) $(O)/librebase.a $(O)/libcxlcr-common.a
	$(CC) $(CFLAGS) $(EXTRA_CFLAGS) -o $@ $^ -ldl -lprotobuf-c -lsodium -ljansson -lpthread

# A pipelined Memcached load client for the benchmark, and the paced
# one-request-at-a-time client of the continuity measurements.
$(O)/bench/mcload: bench/mcload.c | $(O)/bench
	$(CC) $(BASE) -o $@ $<
$(O)/bench/loadclient: bench/loadclient.c | $(O)/bench
	$(CC) $(BASE) -o $@ $<
# What a write after tracking re-armed its page costs (bench/wp_fault.c).
$(O)/bench/wp_fault: bench/wp_fault.c $(O)/libcxlcr-common.a | $(O)/bench
	$(CC) $(BASE) -o $@ $< $(O)/libcxlcr-common.a -ldl -lpthread
# What authenticating the control protocol's answers costs (bench/ctl_seal.c).
$(O)/bench/ctl_seal: bench/ctl_seal.c daemon/rpc_wire.h $(O)/daemon/rpc_wire.o $(CTL_OBJ) $(O)/libcxlcr-common.a \
		| $(O)/bench
	$(CC) $(BASE) -o $@ $< $(O)/daemon/rpc_wire.o $(CTL_OBJ) $(O)/libcxlcr-common.a -lprotobuf-c -lsodium \
		-ldl -lpthread

$(O)/common $(O)/preload $(O)/daemon $(O)/tracking $(O)/emulation $(O)/control $(O)/recovery $(O)/pod $(O)/pager $(O)/tier $(O)/tests $(O)/bench:
	mkdir -p $@

deps:
	@CRIU_PROTO_DIR=$(CRIU_PROTO_DIR) scripts/install-deps.sh

# The sanitizer build: UBSan everywhere (ASan cannot run under a malloc
# interposer, so it checks the pool code and the command line only).
sanitize:
	$(MAKE) O=build/ubsan EXTRA_CFLAGS="-fsanitize=undefined -fno-sanitize-recover=all" all
	$(MAKE) O=build/asan EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all" \
		build/asan/cxlcr build/asan/tests/pool_test build/asan/tests/snapshot_test build/asan/tests/ctl_fuzz

# `deps` may create what the build's rules depend on (CRIU's image
# definitions in $(CRIU_PROTO_DIR)); make reads a directory once, so a rule
# looked at before deps ran would still find it missing. The build therefore
# runs in a make of its own, started after deps.
setup: deps
	@$(MAKE) --no-print-directory all

# `make test` runs the short set (CXLCR_TESTS=short), to stay within twenty
# minutes: a sample of the fault matrix (every step of each verb and every
# victim at least once: tests/lib/faults.sh) and 20 rounds of the migrate
# soak. `make long` runs what it leaves out or cuts short: every case of
# the matrix, tests/t_faults.sh, the soak's 50 rounds and the demos
# (tests/t_demos.sh). CI runs both.
test: setup
	@$(MAKE) --no-print-directory sanitize
	@$(MAKE) --no-print-directory module
	@CXLCR_TESTS=short tests/run.sh

long: setup
	@CXLCR_TESTS=long CXLCR_TEST_TIMEOUT=600 tests/run.sh 't_fault_*' t_faults t_soak t_demos

demo: setup
	@demos/redis/run.sh

# The pool under minutes of forks, snapshots, stops and reaps from several
# hosts (tests/t_stress.sh; `make test` runs it for 20 s).
STRESS_SECONDS ?= 300
stress: setup
	@STRESS_SECONDS=$(STRESS_SECONDS) CXLCR_TEST_TIMEOUT=$$(($(STRESS_SECONDS) + 300)) tests/run.sh -v t_stress

bench: deps
	@$(MAKE) --no-print-directory all $(O)/bench/mcload $(O)/bench/loadclient $(O)/bench/ctl_seal \
		$(O)/bench/wp_fault
	@bench/run.sh

clean:
	rm -rf build

.PHONY: all deps setup sanitize test long demo stress bench clean

# The CRIU plugin, criu-plugin/ (needs CRIU's criu-plugin.h, from `make deps`).
# CRIU loads every *.so of the directory given with `criu --lib DIR`, and the
# preload in build/ must never be loaded into criu: pass $(O)/criu.
# `make install` copies the plugin into CRIU's default plugin directory
# (/usr/lib/criu for the CRIU that `make deps` builds).
PLUGIN_HELPERS  := criu-plugin/pool_id.c criu-plugin/proc.c criu-plugin/dump.c \
                   criu-plugin/restore.c criu-plugin/devdax.c criu-plugin/fork.c criu-plugin/netlock.c \
                   criu-plugin/live_source.c
PLUGIN_OBJS     := $(O)/criu-plugin/cxlcr_criu.o $(PLUGIN_HELPERS:%.c=$(O)/%.o) $(O)/common/record.o \
                   $(O)/common/snapshot.o $(O)/common/snapshot_draft.o $(O)/common/catalog.o $(O)/common/hosts.o \
                   $(O)/common/rtnl.o $(O)/common/netns_nursery.o $(O)/tracking/since.o
CRIU_PLUGIN_DIR ?= /usr/lib/criu

all: plugin
plugin: $(O)/cxlcr_criu.so $(O)/criu/cxlcr_criu.so $(O)/tests/criu_plugin_test

$(O)/criu-plugin/%.o: criu-plugin/%.c criu-plugin/*.h common/*.h | $(O)/criu-plugin
	$(CC) $(BASE) -c -o $@ $<
$(O)/cxlcr_criu.so: $(PLUGIN_OBJS) $(POOL_SRC:%.c=$(O)/%.o) criu-plugin/exports.map
	$(CC) -shared $(CFLAGS) $(EXTRA_CFLAGS) -o $@ $(filter %.o,$^) -ldl -Wl,-z,now \
		-Wl,--version-script=criu-plugin/exports.map
$(O)/criu/cxlcr_criu.so: $(O)/cxlcr_criu.so | $(O)/criu
	ln -sf ../cxlcr_criu.so $@
$(O)/tests/criu_plugin_test: tests/criu_plugin_test.c tests/*.h criu-plugin/*.h common/*.h \
		$(PLUGIN_HELPERS:%.c=$(O)/%.o) $(O)/common/record.o $(O)/tracking/since.o $(O)/libcxlcr-common.a | $(O)/tests
	$(CC) $(BASE) -o $@ $< $(PLUGIN_HELPERS:%.c=$(O)/%.o) $(O)/common/record.o $(O)/tracking/since.o \
		$(O)/libcxlcr-common.a -ldl -lpthread
$(O)/criu-plugin $(O)/criu:
	mkdir -p $@

install: install-criu-plugin
install-criu-plugin: $(O)/cxlcr_criu.so
	install -D -m 0644 $< $(DESTDIR)$(CRIU_PLUGIN_DIR)/cxlcr_criu.so

# The binaries look for the plugin there when it is not next to them
# (daemon/paths.c).
$(O)/daemon/paths.o: BASE += -DCXLCR_CRIU_PLUGIN_DIR='"$(CRIU_PLUGIN_DIR)"'

.PHONY: plugin install install-criu-plugin

# rebase/: a checkpoint plus an arena snapshot -> a fork child's image set.
# CRIU's image definitions (installed by `make deps`) are compiled with
# protoc-c into $(O)/rebase/gen at build time: only the images rebase reads
# or writes, and what they import. Generated code gets a relaxed flag set.
CRIU_PROTO_DIR   ?= /usr/local/share/cxlcr/criu-images
REBASE_PROTOS    := rpc opts stats mm vma pagemap fdinfo regfile fown sk-inet sk-opts tcp-stream ns \
                    packet-sock sk-netlink eventfd eventpoll signalfd tun timerfd fsnotify fh \
                    ext-file sk-unix fifo pipe pidfd tty memfd bpfmap-file netdev macvlan sysctl sit pstree \
                    core core-x86 core-arm core-aarch64 core-ppc64 core-s390 core-mips core-loongarch64 \
                    core-riscv64 rlimit timer creds sa siginfo rseq
REBASE_GEN       := $(REBASE_PROTOS:%=$(O)/rebase/gen/%.pb-c.c) \
                    $(O)/rebase/gen/google/protobuf/descriptor.pb-c.c
REBASE_SRC       := rebase/image_io.c rebase/criu_stats.c rebase/mm.c rebase/regfile.c rebase/fork_record.c \
                    rebase/netid.c rebase/rebase.c rebase/files_under.c rebase/relocate.c rebase/proc_self.c \
                    rebase/stopped.c
REBASE_OBJS      := $(REBASE_SRC:%.c=$(O)/%.o) $(REBASE_GEN:.c=.o) $(O)/common/record.o
REBASE_GEN_FLAGS := -std=gnu11 -D_GNU_SOURCE -fPIC -w $(CFLAGS) $(EXTRA_CFLAGS) -I$(O)/rebase/gen

all: $(O)/librebase.a $(O)/cxlcr-rebase $(O)/tests/rebase_test $(O)/tests/snapshot_tool

$(O)/rebase/gen/%.pb-c.c $(O)/rebase/gen/%.pb-c.h: $(CRIU_PROTO_DIR)/%.proto | $(O)/rebase/gen
	protoc-c --proto_path=$(CRIU_PROTO_DIR) --proto_path=/usr/include --c_out=$(O)/rebase/gen $<
$(O)/rebase/gen/google/protobuf/descriptor.pb-c.c $(O)/rebase/gen/google/protobuf/descriptor.pb-c.h &: \
		/usr/include/google/protobuf/descriptor.proto | $(O)/rebase/gen
	protoc-c --proto_path=/usr/include --c_out=$(O)/rebase/gen $<
$(O)/rebase/gen/%.pb-c.o: $(O)/rebase/gen/%.pb-c.c $(REBASE_GEN:.c=.h)
	$(CC) $(REBASE_GEN_FLAGS) -c -o $@ $<
$(O)/rebase/%.o: rebase/%.c rebase/*.h common/*.h $(REBASE_GEN:.c=.h) | $(O)/rebase/gen
	$(CC) $(BASE) -I$(O)/rebase/gen -c -o $@ $<
$(O)/librebase.a: $(REBASE_OBJS)
	ar rcs $@ $^
$(O)/cxlcr-rebase: $(O)/rebase/cli.o $(O)/librebase.a $(O)/libcxlcr-common.a
	$(CC) $(CFLAGS) $(EXTRA_CFLAGS) -o $@ $^ -lprotobuf-c -ldl
$(O)/tests/rebase_test: tests/rebase_test.c tests/*.h rebase/*.h common/*.h $(O)/librebase.a \
		$(O)/libcxlcr-common.a | $(O)/tests
	$(CC) $(BASE) -I$(O)/rebase/gen -o $@ $< $(O)/librebase.a $(O)/libcxlcr-common.a \
		-lprotobuf-c -ldl -lpthread
$(O)/rebase/gen:
	mkdir -p $@
.SECONDARY: $(REBASE_GEN) $(REBASE_GEN:.c=.h)

# The sanitizer builds: ubsan gets everything through `all`; asan the unit test.
sanitize: sanitize-rebase
sanitize-rebase:
	$(MAKE) O=build/asan EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all" \
		build/asan/tests/rebase_test

.PHONY: sanitize-rebase

# The fork API: include/cxlcr/cxlcr.h (the public header, with the wire
# protocol), api/ (the protocol, shared by both ends), lib/ (the client
# library) and daemon/api*.c (the daemons' side). Only cxlcr_api_* leaves
# the libraries: the static one is a single object whose other symbols are
# made local, the shared one has a version script.
LIBCXLCR_SRC := lib/api_client.c $(API_SRC) common/util.c common/seal.c
LIBCXLCR_OBJ := $(LIBCXLCR_SRC:%.c=$(O)/%.o)
PREFIX       ?= /usr/local

all: $(O)/libcxlcr.a $(O)/libcxlcr.so $(O)/tests/api_test

$(O)/api/%.o: api/%.c api/*.h include/cxlcr/*.h common/*.h | $(O)/api
	$(CC) $(BASE) -c -o $@ $<
$(O)/lib/%.o: lib/%.c api/*.h include/cxlcr/*.h | $(O)/lib
	$(CC) $(BASE) -c -o $@ $<
$(O)/daemon/api.o $(O)/daemon/api_token.o $(O)/daemon/cmd_fork.o $(O)/daemon/cxlcrd.o: \
		api/*.h include/cxlcr/*.h
$(O)/libcxlcr.a: $(LIBCXLCR_OBJ)
	$(LD) -r -o $(O)/lib/libcxlcr.o $^
	objcopy -w --keep-global-symbol='cxlcr_api_*' $(O)/lib/libcxlcr.o
	rm -f $@ && ar rcs $@ $(O)/lib/libcxlcr.o
$(O)/libcxlcr.so: $(LIBCXLCR_OBJ) lib/exports.map
	$(CC) -shared $(CFLAGS) $(EXTRA_CFLAGS) -o $@ $(LIBCXLCR_OBJ) -Wl,-z,defs \
		-Wl,--version-script=lib/exports.map -ljansson -lsodium
# The protocol against hostile input, on the objects themselves.
all: $(O)/tests/protocol_test
$(O)/tests/protocol_test: tests/protocol_test.c tests/*.h api/*.h daemon/json.h $(LIBCXLCR_OBJ) $(O)/daemon/json.o | $(O)/tests
	$(CC) $(BASE) -Iinclude -o $@ $< $(LIBCXLCR_OBJ) $(O)/daemon/json.o -ljansson -lsodium
# Every parser facing the network (the control protocol's and the fork
# API's) against truncated, oversized, mutated and random messages.
all: $(O)/tests/ctl_fuzz
$(O)/tests/ctl_fuzz: tests/ctl_fuzz.c tests/*.h api/*.h daemon/rpc_wire.h $(O)/daemon/rpc_wire.o $(CTL_OBJ) \
		$(LIBCXLCR_OBJ) $(O)/libcxlcr-common.a | $(O)/tests
	$(CC) $(BASE) -Iinclude -I$(O)/proto/gen -o $@ $< $(O)/daemon/rpc_wire.o $(CTL_OBJ) $(LIBCXLCR_OBJ) \
		$(O)/libcxlcr-common.a -lprotobuf-c -lsodium -ljansson -ldl -lpthread
$(O)/tests/api_test: tests/api_test.c include/cxlcr/*.h $(O)/libcxlcr.a | $(O)/tests
	$(CC) $(BASE) -Iinclude -o $@ $< $(O)/libcxlcr.a -ljansson -lsodium
$(O)/api $(O)/lib:
	mkdir -p $@

install: install-libcxlcr
install-libcxlcr: $(O)/libcxlcr.a $(O)/libcxlcr.so
	install -D -m 0644 include/cxlcr/cxlcr.h $(DESTDIR)$(PREFIX)/include/cxlcr/cxlcr.h
	install -D -m 0644 $(O)/libcxlcr.a $(DESTDIR)$(PREFIX)/lib/libcxlcr.a
	install -D -m 0755 $(O)/libcxlcr.so $(DESTDIR)$(PREFIX)/lib/libcxlcr.so

# What a machine of a pod runs (docs/running-on-real-machines.md): the
# command line and the daemon, the preload they give services (found
# relative to the binaries, daemon/paths.c), cxlcrd's systemd unit, and
# its configuration file, which an existing one is never replaced by.
SYSCONFDIR       ?= /etc
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
install: install-machine
install-machine: $(O)/cxlcr $(O)/cxlcrd $(O)/cxlcr-memd $(O)/libcxlcr-preload.so scripts/cxlcrd.service.in scripts/cxlcrd.conf
	install -D -m 0755 $(O)/cxlcr $(DESTDIR)$(PREFIX)/bin/cxlcr
	install -D -m 0755 $(O)/cxlcrd $(DESTDIR)$(PREFIX)/bin/cxlcrd
	install -D -m 0755 $(O)/cxlcr-memd $(DESTDIR)$(PREFIX)/bin/cxlcr-memd
	install -D -m 0755 $(O)/libcxlcr-preload.so $(DESTDIR)$(PREFIX)/lib/cxlcr/libcxlcr-preload.so
	mkdir -p $(DESTDIR)$(SYSTEMD_UNIT_DIR)
	sed -e 's|@BINDIR@|$(PREFIX)/bin|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' scripts/cxlcrd.service.in \
		> $(DESTDIR)$(SYSTEMD_UNIT_DIR)/cxlcrd.service
	chmod 0644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/cxlcrd.service
	[ -e $(DESTDIR)$(SYSCONFDIR)/cxlcr/cxlcrd.conf ] || \
		install -D -m 0644 scripts/cxlcrd.conf $(DESTDIR)$(SYSCONFDIR)/cxlcr/cxlcrd.conf

.PHONY: install-libcxlcr install-machine

# The FaaS demo (demos/faas/): its platform side, a client of the fork API.
all: $(O)/demos/faas-scale
# demos/lib/first_answer.c: the first-answer timing it shares with bench/fork.c.
$(O)/demos/faas-scale: demos/faas/faas-scale.c demos/lib/first_answer.c demos/lib/first_answer.h \
		include/cxlcr/*.h $(O)/libcxlcr.a | $(O)/demos
	$(CC) $(BASE) -Iinclude -Idemos/lib -o $@ $< demos/lib/first_answer.c $(O)/libcxlcr.a -ljansson -lsodium -lpthread
$(O)/demos:
	mkdir -p $@

# The panic tombstone's kernel module, kernel/ (docs/recovery.md), built
# against the distribution's kernel headers (linux-headers-amd64, which
# `make deps` installs): those of the running kernel if it has them, else
# the newest installed. Kbuild writes its output next to the sources, so
# they are copied into $(O)/kernel first.
KDIR ?= $(or $(wildcard /lib/modules/$(shell uname -r)/build),$(shell ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n1))
module: $(O)/kernel/cxlcr_tombstone.ko
$(O)/kernel/cxlcr_tombstone.ko: kernel/cxlcr_tombstone.c kernel/Kbuild common/pool_format.h
	@test -n "$(KDIR)" || { echo "make module: no kernel headers (apt-get install linux-headers-amd64)" >&2; exit 1; }
	@mkdir -p $(O)/kernel
	@cp kernel/cxlcr_tombstone.c kernel/Kbuild $(O)/kernel/
	@$(MAKE) --no-print-directory -C $(KDIR) M=$(abspath $(O)/kernel) CXLCR_ROOT=$(CURDIR) modules >$(O)/kernel/build.log 2>&1 || { cat $(O)/kernel/build.log >&2; exit 1; }
.PHONY: module
