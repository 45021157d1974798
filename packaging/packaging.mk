# SPDX-License-Identifier: GPL-2.0-only
#
# Packaging and first run (issue 6).  Included from the top-level Makefile.
#
#   make dkms-tree DKMS_DEST=DIR   copy the DKMS tree (module sources only) to DIR
#   make dkms-install              register the tree with DKMS (as root) and build
#                                  and install it for every kernel with headers
#   make dkms-uninstall            remove every DKMS build and the tree again
#   make deb                       Debian packages -> build/deb/*.deb
#   make deb-dkms                  only kvmstats-dkms (arch: all) -> build/deb/
#   make deb-arm64                 the tool's and library's packages for arm64,
#                                  cross-built (packaging/deb-cross) -> build/deb/
#   make demo                      boot the 6.12 guest, run sample VMs, show the tool
#                                  (DEMO_KERNEL=arm64-6.12: Debian's arm64 6.12)
#   make demo-shell                the same guest, left at a shell
#
# The version lives in VERSION and nowhere else: dkms.conf gets it here,
# debian/changelog must agree (make deb checks), MODULE_VERSION can take it
# from the same file in the DKMS tree.

KVMSTATS_VERSION := $(shell cat $(CURDIR)/VERSION)

# Exactly what DKMS needs to build kvmstats.ko: no tests, library or tool.
DKMS_FILES := Kbuild VERSION $(wildcard src/*.c src/*.h) include/uapi/linux/kvmstats.h \
	LICENSE LICENSES/GPL-2.0 LICENSES/Linux-syscall-note
DKMS_SRC := /usr/src/kvmstats-$(KVMSTATS_VERSION)
DKMS_DEST ?= $(BUILD)/dkms/kvmstats-$(KVMSTATS_VERSION)
# The vendor module as a soft dependency (see the file): the package
# installs it in /usr/lib/modprobe.d, dkms-install in /etc/modprobe.d.
DKMS_MODPROBE_CONF ?= /etc/modprobe.d/kvmstats.conf

# Kernels dkms-install builds for: every one with headers, unless given.
DKMS_KERNELS ?= $(notdir $(wildcard /lib/modules/*))

.PHONY: dkms-tree dkms-install dkms-uninstall deb deb-dkms deb-arm64 deb-clean demo demo-shell demo-payload

dkms-tree:
	@rm -rf $(DKMS_DEST)
	@mkdir -p $(DKMS_DEST)
	@tar -cf - $(DKMS_FILES) | tar -xf - -C $(DKMS_DEST)
	@sed 's/#MODULE_VERSION#/$(KVMSTATS_VERSION)/' dkms.conf > $(DKMS_DEST)/dkms.conf
	@echo "kvmstats: DKMS tree in $(DKMS_DEST)"

# dkms install only compiles, copies to /lib/modules/<kver>/updates/dkms and
# runs depmod; it loads nothing (we never pass --modprobe-on-install).
dkms-install:
	@[ "$$(id -u)" -eq 0 ] || { echo "kvmstats: dkms-install needs root" >&2; exit 1; }
	@command -v dkms > /dev/null || { echo "kvmstats: install dkms first (apt-get install dkms)" >&2; exit 1; }
	@if dkms status -m kvmstats -v $(KVMSTATS_VERSION) | grep -q .; then \
		echo "kvmstats: kvmstats/$(KVMSTATS_VERSION) is already registered; make dkms-uninstall first" >&2; \
		exit 1; \
	fi
	$(MAKE) --no-print-directory dkms-tree DKMS_DEST=$(DKMS_SRC)
	install -D -m 0644 packaging/modprobe.d/kvmstats.conf $(DKMS_MODPROBE_CONF)
	dkms add -m kvmstats -v $(KVMSTATS_VERSION)
	@for k in $(DKMS_KERNELS); do \
		if [ ! -e /lib/modules/$$k/build/Makefile ]; then \
			echo "kvmstats: skipping $$k: no headers (apt-get install linux-headers-$$k)"; \
			continue; \
		fi; \
		rc=0; dkms install -m kvmstats -v $(KVMSTATS_VERSION) -k $$k || rc=$$?; \
		case $$rc in \
		0)	;; \
		77)	echo "kvmstats: skipped $$k (see the reason above)" ;; \
		*)	echo "kvmstats: dkms install for $$k failed ($$rc)" >&2; exit $$rc ;; \
		esac; \
	done
	@dkms status -m kvmstats

dkms-uninstall:
	@[ "$$(id -u)" -eq 0 ] || { echo "kvmstats: dkms-uninstall needs root" >&2; exit 1; }
	@if dkms status -m kvmstats -v $(KVMSTATS_VERSION) | grep -q .; then \
		dkms remove -m kvmstats -v $(KVMSTATS_VERSION) --all; \
	fi
	rm -rf $(DKMS_SRC) $(DKMS_MODPROBE_CONF)

# ---------------------------------------------------------------------------
# Debian packages, built out of tree: the working tree's tracked and new
# (not ignored) files (outside git: everything but build/) are copied to build/deb/kvmstats-<version>/ and
# dpkg-buildpackage runs there, so build/deb/ receives the .debs and the
# git tree stays clean.
DEB_DIR := $(BUILD)/deb
DEB_SRC := $(DEB_DIR)/kvmstats-$(KVMSTATS_VERSION)

# DEB_PARTS: -b all packages, -A only the architecture-independent one.
DEB_PARTS ?= -b

deb-dkms:
	@$(MAKE) --no-print-directory deb DEB_PARTS=-A

deb-arm64:
	@packaging/deb-cross arm64

deb:
	@command -v dpkg-buildpackage > /dev/null && command -v dh_dkms > /dev/null || { \
		echo "kvmstats: make deb needs: apt-get install dpkg-dev debhelper dh-dkms" >&2; exit 1; }
	@changelog=$$(dpkg-parsechangelog -S Version); \
	if [ "$${changelog%%-*}" != "$(KVMSTATS_VERSION)" ]; then \
		echo "kvmstats: debian/changelog says $$changelog but VERSION says $(KVMSTATS_VERSION)" >&2; \
		exit 1; \
	fi
	rm -rf $(DEB_SRC)
	mkdir -p $(DEB_SRC)
	if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then \
		git ls-files -z --cached --others --exclude-standard | \
			xargs -0 sh -c 'for f; do [ -e "$$f" ] && printf "%s\0" "$$f"; done' sh | \
			tar --null -T - -cf - | tar -xf - -C $(DEB_SRC); \
	else \
		tar --exclude=./build -cf - . | tar -xf - -C $(DEB_SRC); \
	fi
	cd $(DEB_SRC) && nice dpkg-buildpackage -us -uc $(DEB_PARTS)
	@ls -1 $(DEB_DIR)/*.deb

deb-clean:
	rm -rf $(DEB_DIR)

# ---------------------------------------------------------------------------
# make demo: the 6.12 guest of the test harness (tests/qemu/run-guest) with
# the module, the static tool, tests/demo/samplevm and, when the host has
# Debian's QEMU, a nested QEMU booting SeaBIOS.  DEMO_KERNEL=arm64-6.12
# boots Debian's arm64 6.12 instead, with the module, the tool and samplevm
# cross-built (and no nested QEMU).  See tests/demo/README.md.
DEMO_KERNEL ?= 6.12
DEMO_OUT := $(BUILD)/demo
DEMO_PAYLOAD := $(DEMO_OUT)/payload

demo-payload:
	@KERNELS=$(DEMO_KERNEL) tests/qemu/deps check
	@rel=$$(tests/kernels $(DEMO_KERNEL)) && \
		$(MAKE) --no-print-directory module KVER=$$rel && \
		arch=$$(scripts/kernel arch $$rel) && \
		if [ "$$arch" = amd64 ]; then $(MAKE) --no-print-directory tool-static; fi && \
		tests/demo/mkpayload --arch $$arch $(DEMO_PAYLOAD)

demo: demo-payload
	@tests/demo/run $(DEMO_KERNEL) $(DEMO_PAYLOAD) $(DEMO_OUT)

demo-shell: demo-payload
	@tests/demo/run --shell $(DEMO_KERNEL) $(DEMO_PAYLOAD) $(DEMO_OUT)
