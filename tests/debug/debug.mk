# SPDX-License-Identifier: GPL-2.0-only
#
# The debug-kernel run (issue 7), included by the top-level Makefile.
#
#   make check-debug        build (or reuse) a 6.12 KASAN/KFENCE/lockdep/
#                           DEBUG_LIST/DEBUG_OBJECTS kernel from Debian's
#                           linux-source-6.12 (cached in build/debug-kernel/),
#                           build kvmstats against it and run the whole suite
#   make check-debug-long   the same with KVMSTATS_LONG=1
#   make debug-kernel       only build the kernel (nice 19)

.PHONY: check-debug check-debug-long debug-kernel

check-debug:
	tests/debug/check-debug

check-debug-long:
	tests/debug/check-debug --long

debug-kernel:
	tests/debug/build-kernel
