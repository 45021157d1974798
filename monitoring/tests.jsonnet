// SPDX-License-Identifier: GPL-2.0-only
// make monitoring: tests/kvmstats.rules.test.yml (jsonnet -S).
'# Generated from monitoring/tests/kvmstats.rules.test.jsonnet by make\n' +
'# monitoring: edit that, not this file.  promtool test rules runs it as it\n' +
'# is (rule files relative to this directory).\n' +
std.manifestYamlDoc(import 'tests/kvmstats.rules.test.jsonnet', indent_array_in_object=true, quote_keys=false)
