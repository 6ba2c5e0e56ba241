// Package deploy holds the checks for the deployment files under deploy/: the compose
// stack (deploy/compose), the Kubernetes manifests (deploy/k8s) and the observability
// files (deploy/observability). Its tests run in `make test` (go test ./deploy/...); the
// external validators (promtool, kubeconform) run in `make lint-deploy` (deploy/lint.sh).
// README.md beside this file says how each topology is run.
package deploy
