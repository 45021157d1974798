# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=sh
#
# Deliberate faults for the shell tests, as tests/lib/fault.h for C: true
# when fault $1 is named in KVMSTATS_FAULTS (commas or spaces between
# names), and says so on a TAP diagnostic line.  tests/README.md lists them.

test_fault()
{
	case " $(echo "${KVMSTATS_FAULTS:-}" | tr ',' ' ') " in
	*" $1 "*)
		echo "# fault $1 injected (KVMSTATS_FAULTS)"
		return 0
		;;
	esac
	return 1
}
