// SPDX-License-Identifier: GPL-2.0-only
// make monitoring: rules/kvmstats.alerts.yml (jsonnet -S).
'# Generated from the kvmstats mixin (monitoring/mixin.libsonnet) by make\n' +
'# monitoring: edit the mixin, not this file.\n' +
std.manifestYamlDoc((import 'mixin.libsonnet').prometheusAlerts, indent_array_in_object=true, quote_keys=false)
