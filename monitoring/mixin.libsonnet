// SPDX-License-Identifier: GPL-2.0-only
//
// The kvmstats monitoring mixin: recording rules, alerts and a Grafana
// dashboard for `kvmstats export`, in the form of the community's mixins
// (node-exporter-mixin, kubernetes-mixin): _config, prometheusRules,
// prometheusAlerts, grafanaDashboards.  monitoring/README.md says how to
// use it; `make monitoring` renders it into rules/, dashboards/ and
// tests/.
(import 'config.libsonnet') +
(import 'rules/rules.libsonnet') +
(import 'alerts/alerts.libsonnet') +
(import 'dashboards/dashboards.libsonnet')
