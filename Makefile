# tailwarden: one entry point. `make` builds, `make check` installs what the
# tests need and runs them, `make bench` prints the benchmark tables.
# Outputs go to .output/ (and ./tailwarden); V=1 shows the commands.

OUTPUT := .output
CLANG ?= clang
BPFTOOL ?= $(shell command -v bpftool || echo /usr/sbin/bpftool)
CC ?= cc
ARCH := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
# The kernel's types for the BPF programs: checked in (as libbpf-tools do),
# so the tree builds where the build machine's kernel has no BTF; CO-RE
# relocates every field access to the kernel that loads them. `make
# vmlinux` regenerates it from the running kernel's BTF.
VMLINUX_H := bpf/vmlinux/$(ARCH)/vmlinux.h

CFLAGS ?= -O2 -g
# Includes name their folder ("bpf/sensor_abi.h", "sensing/hist.h") from the
# top; .output holds the skeletons. -MMD -MP: each object depends on the
# headers it includes (.output/**/*.d), and a removed header breaks nothing.
CFLAGS += -std=gnu11 -Wall -Wextra -Werror -I. -I$(OUTPUT) -MMD -MP
LDLIBS := -lbpf -lelf $(shell pkg-config --libs zlib 2>/dev/null || echo -lz) -ljson-c -lm -lcpupower -linih -lsystemd -lmicrohttpd -lpthread
ifeq ($(SANITIZE),1)
CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=undefined
endif

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

SENSING := sensing/hist.c sensing/cgroup.c sensing/cgroupfs.c sensing/idtab.c sensing/bpf_util.c sensing/sensor.c \
	sensing/diagnosis.c sensing/contention.c sensing/contention_load.c sensing/reap.c
CONTROLLER := controller/run.c controller/manager.c controller/manager_report.c controller/decisions.c controller/sensors.c controller/top.c controller/output.c \
	controller/restore.c controller/check.c controller/daemon.c controller/feed.c controller/service.c \
	controller/recording.c controller/record.c controller/replay.c \
	controller/report.c controller/expo.c controller/status.c controller/metrics.c controller/affinity.c
KNOBS := knobs/record.c knobs/knob.c knobs/beneath.c knobs/subtree.c knobs/freq.c knobs/slice.c knobs/state.c knobs/state_file.c knobs/iosched.c knobs/unit.c
POLICIES := policies/action.c policies/engine.c policies/policy.c policies/config.c policies/ini.c policies/value.c
COMMON := common/log.c common/fileio.c
# One static library per layer, linked against the flow (controller first),
# so a program pulls in only the objects it calls: the policy and engine
# tests link without BPF, bpftool or kernel BTF.
LIBS := $(OUTPUT)/libcontroller.a $(OUTPUT)/libknobs.a $(OUTPUT)/libpolicies.a $(OUTPUT)/libsensing.a $(OUTPUT)/libcommon.a
objs = $(patsubst %.c,$(OUTPUT)/%.o,$(1))
# What a unit test links when it needs less than every layer.
TEST_LIBS_policy := $(OUTPUT)/controller/check.o $(OUTPUT)/libpolicies.a $(OUTPUT)/libcommon.a
TEST_LIBS_engine := $(OUTPUT)/libpolicies.a $(OUTPUT)/sensing/diagnosis.o $(OUTPUT)/sensing/hist.o $(OUTPUT)/libcommon.a
TEST_LIBS_diagnosis := $(OUTPUT)/sensing/diagnosis.o $(OUTPUT)/sensing/hist.o $(OUTPUT)/libcommon.a
TEST_LIBS_hist := $(OUTPUT)/sensing/hist.o
TEST_LIBS_expo := $(OUTPUT)/controller/expo.o $(OUTPUT)/controller/report.o $(OUTPUT)/libpolicies.a $(OUTPUT)/sensing/hist.o $(OUTPUT)/libcommon.a
test_libs = $(or $(TEST_LIBS_$(1)),$(LIBS))
UNIT_TESTS := $(patsubst tests/unit/%.c,$(OUTPUT)/tests/%,$(wildcard tests/unit/test_*.c))
TEST_TOOLS := $(OUTPUT)/tests/loadgen $(OUTPUT)/tests/syscall_loop $(OUTPUT)/tests/knobtool
BENCH_TOOLS := $(OUTPUT)/tests/onoff $(OUTPUT)/tests/floor.bpf.o $(OUTPUT)/tests/floor_switch.bpf.o \
	$(OUTPUT)/tests/pieces.bpf.o $(OUTPUT)/tests/percgroup.bpf.o $(OUTPUT)/tests/percgroup_lsm.bpf.o \
	$(OUTPUT)/tests/progstats $(OUTPUT)/tests/progstats.bpf.o

.PHONY: all vmlinux clean check check-layers contrib unit integration deps bench bench-tools demo soak tests install uninstall fuzz fuzz-short vm-check vm-check-quick vm-image
.DELETE_ON_ERROR:
.SECONDARY:

all: tailwarden

$(OUTPUT) $(OUTPUT)/common $(OUTPUT)/sensing $(OUTPUT)/controller $(OUTPUT)/policies $(OUTPUT)/knobs $(OUTPUT)/tests:
	$(Q)mkdir -p $@

vmlinux:
	@test -r $(VMLINUX_BTF) || { echo "error: $(VMLINUX_BTF) missing: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y is required)" >&2; exit 1; }
	$(call msg,GEN,$(VMLINUX_H))
	$(Q)mkdir -p $(dir $(VMLINUX_H))
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $(VMLINUX_H).tmp && mv $(VMLINUX_H).tmp $(VMLINUX_H)

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) $(VMLINUX_H) | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I. -I$(dir $(VMLINUX_H)) -c $< -o $@

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

$(OUTPUT)/sensing/sensor.o: $(OUTPUT)/sensor.skel.h
$(OUTPUT)/sensing/contention.o $(OUTPUT)/sensing/contention_load.o: $(OUTPUT)/contention.skel.h

$(OUTPUT)/%.o: %.c | $(OUTPUT)/common $(OUTPUT)/sensing $(OUTPUT)/controller $(OUTPUT)/policies $(OUTPUT)/knobs
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(OUTPUT)/libcommon.a: $(call objs,$(COMMON))
$(OUTPUT)/libsensing.a: $(call objs,$(SENSING))
$(OUTPUT)/libknobs.a: $(call objs,$(KNOBS))
$(OUTPUT)/libpolicies.a: $(call objs,$(POLICIES))
$(OUTPUT)/libcontroller.a: $(call objs,$(CONTROLLER))
$(OUTPUT)/lib%.a:
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

tailwarden: $(OUTPUT)/controller/main.o $(LIBS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

.SECONDEXPANSION:
$(OUTPUT)/tests/test_%: tests/unit/test_%.c $$(call test_libs,$$*) | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $< $(call test_libs,$*) $(LDLIBS) -lcmocka -o $@

# The knob tool the integration tests drive (tests/integration/test_knobs.py).
$(OUTPUT)/tests/knobtool: tests/tools/knobtool.c $(LIBS) | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $< $(LIBS) $(LDLIBS) -o $@

$(OUTPUT)/tests/%: tests/%.c | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $< -lm -o $@

$(OUTPUT)/tests/syscall_loop: tests/bench/syscall_loop.c | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $< -lm -o $@

# The benchmark's floor: empty programs on the request sensor's tracepoints.
$(OUTPUT)/tests/%.bpf.o: tests/bench/%.bpf.c $(VMLINUX_H) | $(OUTPUT)/tests
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(dir $(VMLINUX_H)) -c $< -o $@

# The same programs on and off within one load (see tests/bench/onoff.c).
$(OUTPUT)/tests/onoff: tests/bench/onoff.c $(LIBS) | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $< $(LIBS) $(LDLIBS) -o $@

# The kernel's BPF run statistics per program and CPU (tests/bench/progstats.c).
$(OUTPUT)/tests/progstats: tests/bench/progstats.c | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $< $(LDLIBS) -o $@

tests: tailwarden $(UNIT_TESTS) $(TEST_TOOLS)

# Debian packages for building and for the real servers and clients the
# tests drive; installed only when missing.
PACKAGES := clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev libjson-c-dev \
	libcmocka-dev libcpupower-dev libinih-dev libsystemd-dev libmicrohttpd-dev libclang-rt-dev pkg-config make python3 nginx-light redis-server redis-tools \
	memcached wrk stress-ng fio gnuplot-nox prometheus bash-completion groff-base man-db \
	systemd dbus-user-session qemu-system-x86 qemu-utils debootstrap
deps:
	$(Q)scripts/install-deps $(PACKAGES)

unit: $(UNIT_TESTS)
	$(Q)for t in $(UNIT_TESTS); do $$t || exit 1; done

integration: tailwarden $(TEST_TOOLS)
	$(Q)tests/integration/run
	$(Q)tests/integration/test_knobs
	$(Q)tests/integration/test_control.py
	$(Q)tests/integration/test_contention.py
	$(Q)tests/integration/test_faults.py
	$(Q)tests/integration/test_install.py
	$(Q)tests/integration/test_systemd.py
	$(Q)tests/integration/test_observe.py
	$(Q)tests/integration/test_replay.py
	$(Q)tests/integration/test_iosched.py

# Includes run with the flow (bpf -> sensing -> policies -> controller).
check-layers:
	$(Q)scripts/check-layers

# contrib/: the Prometheus scrape config and alert rules (promtool comes
# with the prometheus package), the rules' unit tests, and the Grafana
# dashboard's JSON and metric names (tests/check_contrib.py). Quick: no
# build, no root.
contrib:
	$(Q)promtool check config contrib/prometheus/prometheus.yml
	$(Q)promtool check rules contrib/prometheus/tailwarden.rules.yml
	$(Q)promtool test rules contrib/prometheus/tailwarden.rules.test.yml
	$(Q)tests/check_contrib.py

check: deps
	$(Q)$(MAKE) --no-print-directory check-layers
	$(Q)python3 tests/check_docs.py
	$(Q)$(MAKE) --no-print-directory contrib
	$(Q)$(MAKE) --no-print-directory tests
	$(Q)$(MAKE) --no-print-directory unit
	$(Q)$(MAKE) --no-print-directory fuzz-short
	$(Q)$(MAKE) --no-print-directory integration
	$(Q)$(MAKE) --no-print-directory vm-check-quick

# Guest VMs (tests/vm, docs/vm.md): Debian's stock kernels, bookworm 6.1
# and trixie 6.12, with systemd as PID 1 on pure cgroup v2, in qemu without
# a network device. The image is built once from Debian packages and cached
# in TW_VM_CACHE (default /var/cache/tailwarden-vm). VM_KERNELS="trixie" boots
# only that one; VM_ARGS adds options of tests/vm/run (-v, --timeout S).
VM_KERNELS ?= bookworm trixie
vm_run = tests/vm/run --no-make --keep-going $(foreach k,$(VM_KERNELS),--kernel $(k)) $(VM_ARGS)

vm-image:
	$(Q)tests/vm/build-image

vm-check: deps
	$(Q)$(MAKE) --no-print-directory tailwarden $(TEST_TOOLS)
	$(Q)$(vm_run)

vm-check-quick: deps
	$(Q)$(MAKE) --no-print-directory tailwarden $(TEST_TOOLS)
	$(Q)$(vm_run) --quick

bench: deps
	$(Q)$(MAKE) --no-print-directory bench-tools
	$(Q)tests/bench/run
	$(Q)tests/bench/colocation.py

# What the benchmarks run, built (tests/vm/percgroup-probe needs them too).
bench-tools: tailwarden $(TEST_TOOLS) $(BENCH_TOOLS)

# Not in make check: 10 minutes of cgroups created and removed 20 times a
# second under traffic; RSS and map occupancy must stay flat.
soak: deps
	$(Q)$(MAKE) --no-print-directory tailwarden $(TEST_TOOLS)
	$(Q)tests/soak/soak.py

demo: deps
	$(Q)$(MAKE) --no-print-directory tailwarden $(TEST_TOOLS)
	$(Q)scripts/demo $(if $(filter 1 yes,$(DRYRUN)),--dry-run)

# libFuzzer over the policy and config parser, and over the state-file
# loader (clang's sanitizer runtime: libclang-rt-dev). `make fuzz
# FUZZ_SECONDS=600` for a real run of each; fuzz-short is the 20 s one for
# `make check`. New inputs go to .output/fuzz/corpus*, crashes to
# .output/fuzz/crash-*.
FUZZ_SECONDS ?= 600
FUZZ_SRCS := tests/fuzz/fuzz_policy.c policies/policy.c policies/config.c policies/ini.c policies/value.c \
	common/log.c
$(OUTPUT)/fuzz/fuzz_policy: $(FUZZ_SRCS) $(wildcard policies/*.h common/*.h) tests/fuzz/check.h
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(OUTPUT)/fuzz/corpus
	$(Q)$(CLANG) -g -O1 -std=gnu11 -Wall -Wextra -Werror -I. \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(FUZZ_SRCS) -linih -lm -o $@

FUZZ_STATE_SRCS := tests/fuzz/fuzz_state.c $(KNOBS) policies/action.c policies/value.c common/log.c common/fileio.c
$(OUTPUT)/fuzz/fuzz_state: $(FUZZ_STATE_SRCS) $(wildcard knobs/*.h policies/*.h common/*.h) tests/fuzz/check.h
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(OUTPUT)/fuzz/corpus-state
	$(Q)$(CLANG) -g -O1 -std=gnu11 -Wall -Wextra -Werror -I. -I$(OUTPUT) \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(FUZZ_STATE_SRCS) -ljson-c -lsystemd -lcpupower -lm -o $@

fuzz: $(OUTPUT)/fuzz/fuzz_policy $(OUTPUT)/fuzz/fuzz_state
	$(Q)cp policies/example.policy $(OUTPUT)/fuzz/corpus/example.policy
	$(Q)cp policies/tailwarden.conf.example $(OUTPUT)/fuzz/corpus/tailwarden.conf
	$(Q)$(OUTPUT)/fuzz/fuzz_policy -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 \
		-print_final_stats=1 -dict=tests/fuzz/policy.dict -artifact_prefix=$(OUTPUT)/fuzz/ \
		$(OUTPUT)/fuzz/corpus tests/fuzz/corpus
	$(Q)$(OUTPUT)/fuzz/fuzz_state -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 \
		-print_final_stats=1 -dict=tests/fuzz/state.dict -artifact_prefix=$(OUTPUT)/fuzz/ \
		$(OUTPUT)/fuzz/corpus-state tests/fuzz/corpus-state

fuzz-short:
	$(Q)$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=20

# make install / make uninstall, with PREFIX and DESTDIR as usual. The
# config goes to /etc/tailwarden only where none is there yet (an
# administrator's file is never overwritten, and uninstall removes it only
# when it is still the shipped one); the example policy goes to the docs,
# not into policies.d, where it would be enforced.
PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/tailwarden
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
MANPAGES := man/tailwarden.8 man/tailwarden.policy.5 man/tailwarden.conf.5
CONTRIB := $(wildcard contrib/prometheus/* contrib/grafana/*)

install: tailwarden
	install -D -m 0755 tailwarden $(DESTDIR)$(SBINDIR)/tailwarden
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed 's|/usr/local/sbin/|$(SBINDIR)/|g; s|/usr/local/share/doc/tailwarden|$(DOCDIR)|g' \
		systemd/tailwarden.service > $(DESTDIR)$(UNITDIR)/tailwarden.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/tailwarden.service
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/tailwarden/policies.d
	test -e $(DESTDIR)$(SYSCONFDIR)/tailwarden/tailwarden.conf || \
		install -m 0644 policies/tailwarden.conf.example $(DESTDIR)$(SYSCONFDIR)/tailwarden/tailwarden.conf
	install -D -m 0644 man/tailwarden.8 $(DESTDIR)$(MANDIR)/man8/tailwarden.8
	install -D -m 0644 man/tailwarden.policy.5 $(DESTDIR)$(MANDIR)/man5/tailwarden.policy.5
	install -D -m 0644 man/tailwarden.conf.5 $(DESTDIR)$(MANDIR)/man5/tailwarden.conf.5
	install -D -m 0644 contrib/bash-completion/tailwarden $(DESTDIR)$(COMPLETIONDIR)/tailwarden
	install -d -m 0755 $(DESTDIR)$(DOCDIR)/examples
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/
	install -d -m 0755 $(DESTDIR)$(DOCDIR)/docs
	install -m 0644 $(wildcard docs/*.md) $(DESTDIR)$(DOCDIR)/docs/
	install -m 0644 policies/example.policy policies/tailwarden.conf.example $(DESTDIR)$(DOCDIR)/examples/
	$(if $(CONTRIB),install -m 0644 $(CONTRIB) $(DESTDIR)$(DOCDIR)/examples/)

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/tailwarden $(DESTDIR)$(UNITDIR)/tailwarden.service \
		$(DESTDIR)$(MANDIR)/man8/tailwarden.8 $(DESTDIR)$(MANDIR)/man5/tailwarden.policy.5 \
		$(DESTDIR)$(MANDIR)/man5/tailwarden.conf.5 $(DESTDIR)$(COMPLETIONDIR)/tailwarden
	rm -rf $(DESTDIR)$(DOCDIR)
	! cmp -s policies/tailwarden.conf.example $(DESTDIR)$(SYSCONFDIR)/tailwarden/tailwarden.conf || \
		rm -f $(DESTDIR)$(SYSCONFDIR)/tailwarden/tailwarden.conf
	-rmdir $(DESTDIR)$(SYSCONFDIR)/tailwarden/policies.d $(DESTDIR)$(SYSCONFDIR)/tailwarden 2>/dev/null

clean:
	$(call msg,CLEAN)
	$(Q)rm -rf $(OUTPUT) tailwarden

# Header dependencies written by -MMD.
-include $(shell find $(OUTPUT) -name '*.d' 2>/dev/null)
