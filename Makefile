# SPDX-License-Identifier: GPL-2.0-only
#
# kvmstats: the module, the library, the tool and the test platform.
#
#   make module [KVER=<release>] [KDIR=<dir>]
#                                  build kvmstats.ko -> build/module/<release>/kvmstats.ko
#   make check  [KERNELS=...]      the test suite, in QEMU, on every kernel of tests/kernels
#   make lint                      checkpatch, sparse and W=1 on every kernel, format check
#   make check-secureboot          Secure Boot and lockdown, end to end, on Debian 12's
#                                  signed chain (tests/secureboot/check)
#
# Kbuild (next to this file) describes the module; this Makefile is only the
# front door and is not used by DKMS.

KVER ?= $(shell uname -r)
BUILD := $(CURDIR)/build
MODDIR := $(BUILD)/module/$(KVER)

.PHONY: all module module-clean clean

all: module

# Each kernel gets its own copy of the module tree, so builds for several
# kernels never share objects.  Without KDIR, the build happens where
# KVER's headers are: on this machine for Debian 12's kernels, in a chroot
# of the kernel's own suite for the others (scripts/kernel), which is
# fetched or made first if needed.  With KDIR, against that tree here.
# C= and W= are passed on to Kbuild, and KVMSTATS_DEBUG=y (a debug build:
# the read_delay_ms and freezes knobs, for tests/suite/83-revert).
module:
	@scripts/build-module $(KVER) $(MODDIR) $(KDIR) -- $(if $(C),C=$(C)) $(if $(W),W=$(W)) \
		$(if $(KVMSTATS_DEBUG),KVMSTATS_DEBUG=$(KVMSTATS_DEBUG))

module-clean:
	rm -rf $(MODDIR)

clean:
	rm -rf $(BUILD)

# ---------------------------------------------------------------------------
# libkvmstats and the kvmstats tool (issue 4).  Userspace only: DKMS never
# builds these (it uses Kbuild), and `make module` does not depend on them.
#
#   make lib           build/lib/libkvmstats.{so*,a} and libkvmstats.pc
#   make tool          build/tool/kvmstats (libkvmstats linked in; the HTTP
#                      server needs libmicrohttpd, GnuTLS, libyaml, zlib,
#                      libcrypt and libsystemd: apt-get install
#                      libmicrohttpd-dev libgnutls28-dev libyaml-dev
#                      zlib1g-dev libcrypt-dev libsystemd-dev)
#   make tool-static   build/tool-static/kvmstats (static, without the HTTP
#                      server: src/tool/static/http.c stands in for it)
#   make unit          build and run the library/tool unit tests on this host
# ---------------------------------------------------------------------------
USER_CC ?= cc
USER_CFLAGS ?= -Wall -Wextra -O2
# The release, from VERSION and nowhere else: the library's
# kvmstats_version(), the tool's --version and libkvmstats.pc get it here
# (the library refuses to build if libkvmstats.h's version macros differ).
RELEASE := $(shell cat $(CURDIR)/VERSION)
RELEASE_PARTS := $(subst ., ,$(RELEASE))
RELEASE_CPPFLAGS := -DKVMSTATS_RELEASE='"$(RELEASE)"' \
	-DKVMSTATS_RELEASE_MAJOR=$(word 1,$(RELEASE_PARTS)) \
	-DKVMSTATS_RELEASE_MINOR=$(word 2,$(RELEASE_PARTS)) \
	-DKVMSTATS_RELEASE_PATCH=$(word 3,$(RELEASE_PARTS))
USER_CPPFLAGS := -Iinclude -Iinclude/uapi $(RELEASE_CPPFLAGS)
# Where make install puts things (DESTDIR, if set, is prepended to each;
# libkvmstats.pc gets them without it).  LIBDIR is Debian's multiarch one,
# lib/x86_64-linux-gnu, where the compiler knows the triplet (gcc and clang
# on Debian do), else lib.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
INCLUDEDIR ?= $(PREFIX)/include
MULTIARCH ?= $(shell $(USER_CC) -print-multiarch 2> /dev/null)
LIBDIR ?= $(PREFIX)/lib$(if $(MULTIARCH),/$(MULTIARCH))
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR ?= $(PREFIX)/share/man
# Run after installing the shared library into the system (no DESTDIR).
LDCONFIG ?= ldconfig
# The soname changes only with an incompatible ABI (never so far); symbols
# carry versions from src/lib/libkvmstats.map.
LIB_SONAME := libkvmstats.so.1
LIB_REALNAME := libkvmstats.so.1.$(word 2,$(RELEASE_PARTS)).$(word 3,$(RELEASE_PARTS))
LIB_MAP := src/lib/libkvmstats.map

LIB_SRCS := src/lib/libkvmstats.c
LIB_HDRS := include/libkvmstats.h include/uapi/linux/kvmstats.h
TOOL_SRCS := $(wildcard src/tool/*.c)
TOOL_HDRS := $(wildcard src/tool/*.h)
# export --listen: http.c and webconfig.c, and the libraries they use.
TOOL_HTTP_SRCS := src/tool/http.c src/tool/webconfig.c
TOOL_STATIC_SRCS := $(filter-out $(TOOL_HTTP_SRCS),$(TOOL_SRCS)) src/tool/static/http.c
HTTP_LIBS ?= -lmicrohttpd -lgnutls -lyaml -lz -lcrypt -lsystemd -pthread
UNIT_SRCS := $(wildcard tests/unit/*.c)

LIB_OUT := $(BUILD)/lib
TOOL_OUT := $(BUILD)/tool
TOOL_STATIC_OUT := $(BUILD)/tool-static
UNIT_OUT := $(BUILD)/unit

.PHONY: lib tool tool-static unit abi-check abi-baseline

lib: $(LIB_OUT)/libkvmstats.a $(LIB_OUT)/$(LIB_SONAME) $(LIB_OUT)/libkvmstats.pc

$(LIB_OUT)/libkvmstats.o: $(LIB_SRCS) $(LIB_HDRS) VERSION
	@mkdir -p $(@D)
	$(USER_CC) $(USER_CPPFLAGS) $(USER_CFLAGS) -fPIC -c -o $@ $<

$(LIB_OUT)/libkvmstats.a: $(LIB_OUT)/libkvmstats.o
	rm -f $@ && ar rcs $@ $^

$(LIB_OUT)/$(LIB_SONAME): $(LIB_OUT)/libkvmstats.o $(LIB_MAP)
	rm -f $(LIB_OUT)/libkvmstats.so.1.*
	$(USER_CC) -shared -Wl,-soname,$(LIB_SONAME) -Wl,--version-script,$(LIB_MAP) \
		-Wl,--no-undefined -o $(LIB_OUT)/$(LIB_REALNAME) $< -lm
	ln -sf $(LIB_REALNAME) $@
	ln -sf $(LIB_SONAME) $(LIB_OUT)/libkvmstats.so

# The paths make install uses, under $${prefix} where they are below it.
# Remade whenever they change (FORCE; the file is only replaced if it does).
pc_rel = $(patsubst $(PREFIX)/%,$${prefix}/%,$(patsubst $(PREFIX),$${prefix},$(1)))

$(LIB_OUT)/libkvmstats.pc: src/lib/libkvmstats.pc.in Makefile VERSION FORCE
	@mkdir -p $(@D)
	@sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(call pc_rel,$(LIBDIR))|g' \
		-e 's|@INCLUDEDIR@|$(call pc_rel,$(INCLUDEDIR))|g' \
		-e 's|@VERSION@|$(RELEASE)|g' $< > $@.tmp
	@if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi

.PHONY: FORCE
FORCE:

# The ABI of libkvmstats.so.1 against the baseline in src/lib/libkvmstats.abi
# (libabigail's abidiff, Debian's abigail-tools), on a -g build of its own
# so that types are seen.  make lint runs abi-check; after an intended,
# compatible change (new functions in a new version node, see
# libkvmstats.map) refresh the baseline with make abi-baseline and commit it.
ABI_OUT := $(BUILD)/abi
ABI_BASELINE := src/lib/libkvmstats.abi

$(ABI_OUT)/$(LIB_SONAME): $(LIB_SRCS) $(LIB_HDRS) $(LIB_MAP) VERSION
	@mkdir -p $(@D)
	$(USER_CC) $(USER_CPPFLAGS) -O2 -g -fPIC -shared -Wl,-soname,$(LIB_SONAME) \
		-Wl,--version-script,$(LIB_MAP) -o $@ $(LIB_SRCS) -lm

abi-check: $(ABI_OUT)/$(LIB_SONAME)
	@command -v abidiff > /dev/null || { echo "kvmstats: abi-check needs abidiff (apt-get install abigail-tools)" >&2; exit 1; }
	@missing=$$(grep -oE '\bkvmstats_[a-z0-9_]+\((const |struct |enum |unsigned |int|void|pid_t|uint64_t|size_t|double)' \
			include/libkvmstats.h | sed 's/(.*//' | sort -u | \
		while read -r f; do nm -D --defined-only $< | grep -q " $$f@@LIBKVMSTATS_" || echo $$f; done); \
	if [ -n "$$missing" ]; then \
		echo "kvmstats: declared in libkvmstats.h but not exported with a version (add to $(LIB_MAP)):" $$missing >&2; \
		exit 1; \
	fi
	@rc=0; abidiff --headers-dir2 include $(ABI_BASELINE) $< || rc=$$?; \
	if [ $$rc -ne 0 ]; then \
		echo "kvmstats: the ABI of $(LIB_SONAME) differs from $(ABI_BASELINE) (abidiff status $$rc)" >&2; \
		echo "kvmstats: an incompatible change needs a new soname; a compatible one a new baseline (make abi-baseline)" >&2; \
		exit 1; \
	fi
	@echo "kvmstats: ABI of $(LIB_SONAME) matches $(ABI_BASELINE)"

abi-baseline: $(ABI_OUT)/$(LIB_SONAME)
	abidw --headers-dir include --no-corpus-path --no-comp-dir-path --out-file $(ABI_BASELINE) $<

tool: $(TOOL_OUT)/kvmstats

$(TOOL_OUT)/kvmstats: $(TOOL_SRCS) $(TOOL_HDRS) $(LIB_OUT)/libkvmstats.a VERSION
	@mkdir -p $(@D)
	$(USER_CC) $(USER_CPPFLAGS) $(USER_CFLAGS) -pthread -o $@ $(TOOL_SRCS) $(LIB_OUT)/libkvmstats.a -lm $(HTTP_LIBS)

tool-static: $(TOOL_STATIC_OUT)/kvmstats

$(TOOL_STATIC_OUT)/kvmstats: $(TOOL_STATIC_SRCS) $(TOOL_HDRS) $(LIB_SRCS) $(LIB_HDRS) VERSION
	@mkdir -p $(@D)
	$(USER_CC) -static $(USER_CPPFLAGS) $(USER_CFLAGS) -o $@ $(TOOL_STATIC_SRCS) $(LIB_SRCS) -lm

# The unit tests link the library and the tool's rendering, escaping and
# identity code (not main); --wrap=ioctl lets them stand in for
# /dev/kvmstats (a fake device).
UNIT_TOOL_SRCS := src/tool/render.c src/tool/escape.c src/tool/identity.c
unit: $(UNIT_OUT)/libkvmstats-test
	$(UNIT_OUT)/libkvmstats-test $(UNIT_OUT)

$(UNIT_OUT)/libkvmstats-test: $(UNIT_SRCS) tests/lib/json_check.h $(LIB_OUT)/libkvmstats.a $(UNIT_TOOL_SRCS) $(TOOL_HDRS)
	@mkdir -p $(@D)
	$(USER_CC) $(USER_CPPFLAGS) -Isrc/tool -Itests/lib $(USER_CFLAGS) -Wl,--wrap=ioctl -o $@ $(UNIT_SRCS) $(UNIT_TOOL_SRCS) $(LIB_OUT)/libkvmstats.a -lm -pthread

# ---------------------------------------------------------------------------
# make install: the library (shared and static), its headers, libkvmstats.pc,
# the tool and the man pages, under PREFIX (default /usr/local) and the
# directories above, each prefixed with DESTDIR for staging.
#
#   make install [PREFIX=/usr] [DESTDIR=dir] [LIBDIR=...]
#   make install-lib   only the library, headers, .pc, libkvmstats(3), kvmstats(4)
#   make install-tool  only the tool and kvmstats(1)
#   make install-system  what makes it a service, for a PREFIX=/usr install
#                      (not part of install): the udev rule, the kvmstats
#                      group (sysusers.d), the exporter's systemd units and
#                      /etc/default file (ExecStart points at BINDIR), and
#                      the Prometheus rules and Grafana dashboard as
#                      examples; the packages install the same
#   make uninstall     remove what install and install-system put there
# ---------------------------------------------------------------------------
INSTALL ?= install
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UDEVRULESDIR ?= /usr/lib/udev/rules.d
SYSUSERSDIR ?= /usr/lib/sysusers.d
SYSTEMDUNITDIR ?= /usr/lib/systemd/system
EXAMPLESDIR ?= $(PREFIX)/share/doc/kvmstats/examples

.PHONY: install install-lib install-tool install-system uninstall

install: install-lib install-tool

install-lib: lib
	$(INSTALL) -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) \
		$(DESTDIR)$(INCLUDEDIR)/linux $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man4
	$(INSTALL) -m 0644 $(LIB_OUT)/$(LIB_REALNAME) $(LIB_OUT)/libkvmstats.a $(DESTDIR)$(LIBDIR)/
	ln -sf $(LIB_REALNAME) $(DESTDIR)$(LIBDIR)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libkvmstats.so
	$(INSTALL) -m 0644 $(LIB_OUT)/libkvmstats.pc $(DESTDIR)$(PKGCONFIGDIR)/
	$(INSTALL) -m 0644 include/libkvmstats.h $(DESTDIR)$(INCLUDEDIR)/
	$(INSTALL) -m 0644 include/uapi/linux/kvmstats.h $(DESTDIR)$(INCLUDEDIR)/linux/
	$(INSTALL) -m 0644 man/libkvmstats.3 $(DESTDIR)$(MANDIR)/man3/
	$(INSTALL) -m 0644 man/kvmstats.4 $(DESTDIR)$(MANDIR)/man4/
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ]; then $(LDCONFIG); fi

install-tool: tool
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	$(INSTALL) -m 0755 $(TOOL_OUT)/kvmstats $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 0644 man/kvmstats.1 $(DESTDIR)$(MANDIR)/man1/

install-system:
	$(INSTALL) -d $(DESTDIR)$(UDEVRULESDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSCONFDIR)/default \
		$(DESTDIR)$(EXAMPLESDIR)/monitoring $(DESTDIR)$(EXAMPLESDIR)/modules-load.d
	$(INSTALL) -m 0644 packaging/udev/60-kvmstats.rules $(DESTDIR)$(UDEVRULESDIR)/
	$(INSTALL) -m 0644 packaging/sysusers.d/kvmstats.conf $(DESTDIR)$(SYSUSERSDIR)/
	sed -e 's|/usr/bin/kvmstats|$(BINDIR)/kvmstats|' \
		-e 's|/etc/default/|$(SYSCONFDIR)/default/|' \
		packaging/systemd/kvmstats-exporter.service \
		> $(DESTDIR)$(SYSTEMDUNITDIR)/kvmstats-exporter.service
	chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/kvmstats-exporter.service
	$(INSTALL) -m 0644 packaging/systemd/kvmstats-exporter.socket $(DESTDIR)$(SYSTEMDUNITDIR)/
	$(INSTALL) -m 0644 packaging/systemd/kvmstats-exporter.default \
		$(DESTDIR)$(SYSCONFDIR)/default/kvmstats-exporter
	$(INSTALL) -m 0644 packaging/modules-load.d/kvmstats.conf \
		$(DESTDIR)$(EXAMPLESDIR)/modules-load.d/
	$(INSTALL) -m 0644 monitoring/rules/kvmstats.rules.yml \
		monitoring/rules/kvmstats.alerts.yml \
		monitoring/dashboards/kvmstats.json monitoring/README.md \
		$(DESTDIR)$(EXAMPLESDIR)/monitoring/

uninstall:
	rm -f $(DESTDIR)$(UDEVRULESDIR)/60-kvmstats.rules $(DESTDIR)$(SYSUSERSDIR)/kvmstats.conf \
		$(DESTDIR)$(SYSTEMDUNITDIR)/kvmstats-exporter.service \
		$(DESTDIR)$(SYSTEMDUNITDIR)/kvmstats-exporter.socket \
		$(DESTDIR)$(SYSCONFDIR)/default/kvmstats-exporter
	rm -rf $(DESTDIR)$(EXAMPLESDIR)
	rm -f $(DESTDIR)$(LIBDIR)/$(LIB_REALNAME) $(DESTDIR)$(LIBDIR)/$(LIB_SONAME) \
		$(DESTDIR)$(LIBDIR)/libkvmstats.so $(DESTDIR)$(LIBDIR)/libkvmstats.a \
		$(DESTDIR)$(PKGCONFIGDIR)/libkvmstats.pc $(DESTDIR)$(INCLUDEDIR)/libkvmstats.h \
		$(DESTDIR)$(INCLUDEDIR)/linux/kvmstats.h $(DESTDIR)$(MANDIR)/man3/libkvmstats.3 \
		$(DESTDIR)$(MANDIR)/man4/kvmstats.4 $(DESTDIR)$(BINDIR)/kvmstats \
		$(DESTDIR)$(MANDIR)/man1/kvmstats.1
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ]; then $(LDCONFIG); fi

# ---------------------------------------------------------------------------
# Packaging: DKMS, Debian packages, make demo (issue 6); see packaging/packaging.mk.
# ---------------------------------------------------------------------------
include $(CURDIR)/packaging/packaging.mk

# ---------------------------------------------------------------------------
# The test platform (issue 3): QEMU guests, lint, CI.  See tests/qemu/README.md.
#
#   make deps                       install what check and lint need (as root)
#   make check  [KERNELS=6.1,6.12]  the suite in QEMU on each kernel (amd64 and
#                                   arm64; KERNELS=amd64 or arm64 for one), TAP 13,
#                                   ending in "N passed, N failed, N skipped"
#   make check-long                 the same with KVMSTATS_LONG=1, longer timeouts
#   make check-shell [KERNEL=6.12] [CONFIG=default]
#                                   boot the test guest and get a shell in it
#   make check-monitoring           promtool check/test the rules, check the
#                                   dashboard against the exporter (host)
#   make monitoring                 render the jsonnet mixin (monitoring/) into
#                                   its checked-in rules, alerts, dashboard and
#                                   rule tests (jsonnet)
#   make check-selftest [KERNEL=6.12]
#                                   prove the harness fails when it must (hangs,
#                                   WARNs, panics, missing token, not ok, a job
#                                   past its limit); make check runs it too
#   make check-arm64-guests         the arm64 kernels with KVM alone: boot, the
#                                   harness and 05-guest, no kvmstats (a quick look
#                                   at the arm64 guests; make check runs it all)
#   make check-fresh                what a fresh Debian 12 machine makes of HEAD:
#                                   a scratch mmdebstrap root (build/fresh/root), the
#                                   install step and make check on 6.12 and arm64-6.12
#                                   (05-guest, 70-tool) inside it (as root;
#                                   tests/qemu/fresh, TAP lines; FRESH_ARGS=--keep)
#   make check-fresh-full           the same root, and in it only what a new user
#                                   types: make check, the whole matrix (hours)
#   make lint                       checkpatch, sparse + W=1 builds, clang-format,
#                                   shellcheck
#   make format                     clang-format -i the userspace C that lint checks
# ---------------------------------------------------------------------------
KERNEL ?= 6.12
CONFIG ?= default

.PHONY: deps check check-long check-shell check-selftest check-monitoring check-fresh check-fresh-full monitoring lint format

deps:
	tests/qemu/deps all

check:
	tests/qemu/check

check-long:
	tests/qemu/check --long

# The monitoring mixin alone (make check runs it as tests/host/55-monitoring).
check-monitoring:
	monitoring/check

# The mixin's generated files (check says when they are not current).
monitoring:
	monitoring/generate

check-shell:
	tests/qemu/deps check
	rel=$$(tests/kernels $(KERNEL)) && \
	$(MAKE) --no-print-directory module KVER=$$rel && \
	tests/qemu/payload $(BUILD)/shell/payload && \
	tests/qemu/run-guest --kernel $$rel --config $(CONFIG) \
		--payload $(BUILD)/shell/payload --out $(BUILD)/shell/$$rel-$(CONFIG) --shell

check-selftest:
	tests/qemu/deps check
	KERNEL=$(KERNEL) tests/qemu/selftest/run

# kvmstats under UEFI Secure Boot and lockdown on Debian 12's 6.1 and 6.12:
# a Debian 12 disk with shim, GRUB, the signed kernel and the module DKMS
# built and signed, booted in OVMF's Secure Boot firmware with the DKMS key
# enrolled and without it (tests/secureboot/check; KERNELS=6.1 for one).
check-secureboot:
	tests/secureboot/check

check-arm64-guests:
	KERNELS=arm64 KVMSTATS_MODULE=none KVMSTATS_TESTS=05-guest \
		KVMSTATS_CHECK_OUT=$(BUILD)/check-arm64 tests/qemu/check

# The tree's HEAD on a fresh machine: nothing of this one's state (tests/qemu/fresh).
check-fresh:
	tests/qemu/fresh $(FRESH_ARGS)

check-fresh-full:
	tests/qemu/fresh --full $(FRESH_ARGS)

lint:
	tests/qemu/lint

format:
	tests/qemu/lint --fix-format

# ---------------------------------------------------------------------------
# Benchmark (issue 5): bench/kvmstats-bench.c in a QEMU guest, then
# docs/performance.md and docs/performance.svg (gnuplot-nox, installed if
# missing).  Prints figures; never fails on timing.
#
#   make bench [BENCH_KERNEL=6.12|6.1|<release>]
#   make bench-build                build/bench/kvmstats-bench only
#   make bench-http                 the exporter's HTTP server under hostile
#                                   clients, beside node_exporter (host only)
#   make bench-series               series, bytes and CPU a scrape and Prometheus'
#                                   head series at 100 x 8, defaults and every
#                                   series (host and guest)
#   make bench-attach               a VM's first stats file against a further
#                                   one at 50 to 50,000 VMAs in the VMM, and
#                                   how fast VMs are given back (guest)
# ---------------------------------------------------------------------------
BENCH_KERNEL ?= 6.12

.PHONY: bench bench-build bench-http bench-attach bench-series

bench:
	BENCH_KERNEL_SEL=$(BENCH_KERNEL) bench/run $(BENCH_KERNEL)

bench-build: $(BUILD)/bench/kvmstats-bench

# The exporter under silent and slow clients, beside node_exporter, on this
# host (bench/http-bench): a section of docs/performance.md.
bench-http:
	bench/http-bench --docs docs/performance.md

# The exporter's series budget at 100 VMs x 8 vCPUs, defaults against every
# series, on this host and in a guest (bench/series-budget; make bench runs
# it too): a section of docs/performance.md.  Boots a guest.
bench-series:
	bench/series-budget --kernel $(BENCH_KERNEL) --docs docs/performance.md

# What a VM's first stats file costs its VMM, and how fast VMs are given
# back (bench/attach-cost): make bench runs it too, in its own guest.
bench-attach:
	bench/attach-cost $(BENCH_KERNEL)

$(BUILD)/bench/kvmstats-bench: bench/kvmstats-bench.c include/uapi/linux/kvmstats.h
	@mkdir -p $(@D)
	gcc -static -O2 -Wall -Wextra -D_GNU_SOURCE -o $@ $<

# The debug kernel run (issue 7): make check-debug, see tests/debug/debug.mk.
include $(CURDIR)/tests/debug/debug.mk
