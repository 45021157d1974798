// SPDX-License-Identifier: GPL-2.0-only
// make monitoring: dashboards/*.json (jsonnet -m dashboards).
(import 'mixin.libsonnet').grafanaDashboards
