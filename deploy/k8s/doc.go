// Package k8s holds toolgate's Kubernetes deployment as kustomize: base is an
// example Deployment with an unmodified app container, the toolgate sidecar
// and the iptables init container; overlays/clickhouse adds a single-node
// ClickHouse for small clusters; overlays/external-clickhouse points the
// sidecar at a ClickHouse that already runs. docs/deploy.md walks through it.
//
// The package has no Go API. Its test builds every overlay in process with
// kustomize, decodes every object strictly into the Kubernetes API types,
// and checks what the deployment depends on: which container holds NET_ADMIN,
// the uid the iptables rules exclude, the probes, the trust-store variables,
// and the sidecar's configuration, loaded from a copy of the volumes laid
// out the way the kubelet lays them out.
package k8s
