// Package k8stest checks the Kubernetes manifests in deploy/k8s: every YAML file decodes strictly
// into the real k8s.io/api types (an unknown or misspelled field is an error), and the Jobs hold
// what a pdq conversion across many pods needs (an Indexed Job whose pods run --part from
// JOB_COMPLETION_INDEX and PDQ_PARTS, per-index retries, a ReadWriteMany volume, non-root pods,
// memory requests that cover --max-memory, a merge Job with the same convert options).
//
// It is a module of its own so that the main module does not depend on k8s.io/api: run it with
// `make test-deploy`.
package k8stest
