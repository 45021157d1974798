# SPDX-License-Identifier: GPL-2.0-only
#
# kvmstats: the module, the library, the tool and the test platform.
#
#   make module [KVER=<release>]   build kvmstats.ko -> build/module/<release>/kvmstats.ko
#   make check  [KERNELS=...]      the test suite, in QEMU, on Debian's 6.1 and 6.12
#   make lint                      checkpatch, sparse and W=1 on both kernels, format check
#
# Kbuild (next to this file) describes the module; this Makefile is only the
# front door and is not used by DKMS.

KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build
BUILD := $(CURDIR)/build
MODDIR := $(BUILD)/module/$(KVER)

MODULE_SOURCES := Kbuild $(wildcard src/*.c src/*.h) include/uapi/linux/kvmstats.h

.PHONY: all module module-clean clean

all: module

# Each kernel gets its own copy of the module tree, so builds for several
# kernels never share objects.
module:
	@if [ ! -e "$(KDIR)/Makefile" ]; then \
		echo "kvmstats: no kernel headers for $(KVER) at $(KDIR)." >&2; \
		echo "kvmstats: install them with: apt-get install linux-headers-$(KVER)" >&2; \
		exit 1; \
	fi
	@mkdir -p $(MODDIR)
	@tar -cf - $(MODULE_SOURCES) | tar -xf - -C $(MODDIR)
	$(MAKE) -C $(KDIR) M=$(MODDIR) modules
	@echo "kvmstats: built $(MODDIR)/kvmstats.ko"

module-clean:
	rm -rf $(MODDIR)

clean:
	rm -rf $(BUILD)
