/* SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note */
/*
 * /dev/ksg_test: what the suite needs from inside the test guest's kernel
 * to put kvmstats in situations a process cannot make on its own.  Test
 * guest only; see ksg_test.c.
 *
 * KSG_TEST_IMPOSTOR	returns a new O_RDWR fd of an anonymous-inode file
 *			named "kvm-vm", like KVM's VM files, whose private
 *			data is a poisoned pointer: kvmstats must never take
 *			it for a VM file (and never dereference it).
 * KSG_TEST_HOLD_EXIT	(arg: a tgid, 0 to disarm) the next time that
 *			process's thread-group leader exits, hold it at the
 *			entry of exit_files(): after exit_mm() dropped its
 *			address space, before its file table goes.  It spins
 *			there until KSG_TEST_RELEASE or for at most 3 s.
 * KSG_TEST_HELD	returns 1 while a leader is held, else 0.
 * KSG_TEST_RELEASE	lets it go on.
 */
#ifndef _KSG_TEST_H
#define _KSG_TEST_H

#include <linux/ioctl.h>

#define KSG_TEST_DEVICE		"/dev/ksg_test"

#define KSG_TEST_IMPOSTOR	_IO(0xBF, 0x01)
#define KSG_TEST_HOLD_EXIT	_IO(0xBF, 0x02)
#define KSG_TEST_HELD		_IO(0xBF, 0x03)
#define KSG_TEST_RELEASE	_IO(0xBF, 0x04)

#endif /* _KSG_TEST_H */
