#!/usr/bin/env bash
# lint.sh: validate every file under deploy/ with real validators (`make lint-deploy`,
# part of `make test` and `make lint`). Installs what is missing:
#   promtool     Debian's prometheus package: check rules, unit-test rules, check config
#   haproxy      Debian's haproxy package: haproxy -c on the compose load balancer
#   kubeconform  go install through the module proxy; its Kubernetes JSON schemas are
#                generated here (deploy/tools/k8sschema) from the official OpenAPI
#                document in the k8s.io/kubernetes module, since the public schema
#                registry cannot be reached (deploy/README.md says why)
#   go test      ./deploy/...: strict parse of compose.yaml and its references, the
#                dashboard JSON and the rules' metric names, the manifests' wiring
# Tools and schemas are cached under $SVC_TOOLS_DIR (default .data/tools).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
KUBECONFORM_VERSION=${KUBECONFORM_VERSION:-v0.8.0}
# Kubernetes version whose API the manifests are checked against (the k8s.io/kubernetes
# module version that carries api/openapi-spec/swagger.json).
K8S_VERSION=${K8S_VERSION:-1.37.2}
tools=${SVC_TOOLS_DIR:-$root/.data/tools}
case "$tools" in /*) ;; *) tools=$root/$tools ;; esac
mkdir -p "$tools/bin"

log() { echo "lint-deploy: $*" >&2; }

apt_install() {
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${_apt_updated:-}" ]; then $sudo apt-get update -qq; _apt_updated=1; fi
  # policy-rc.d may refuse to start the packaged daemons; nothing here needs them.
  $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v promtool >/dev/null 2>&1 || { log "installing promtool (Debian package prometheus)"; apt_install prometheus; }
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || { log "installing haproxy (Debian package)"; apt_install haproxy; }
haproxy_bin=$(command -v haproxy || echo /usr/sbin/haproxy)

# Module commands run in an empty directory, outside this repository's module, so that
# go.mod and go.sum are left alone.
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT

# `go install` leaves no version in the binary (kubeconform -v says "development"):
# the version is in the file name.
kubeconform=$tools/bin/kubeconform-$KUBECONFORM_VERSION
if [ ! -x "$kubeconform" ]; then
  log "installing kubeconform ${KUBECONFORM_VERSION} (go install)"
  (cd "$scratch" && GOBIN="$scratch/bin" "$GO" install "github.com/yannh/kubeconform/cmd/kubeconform@${KUBECONFORM_VERSION}")
  mv "$scratch/bin/kubeconform" "$kubeconform"
fi

schemas=$tools/k8s-schemas/v$K8S_VERSION
if [ ! -s "$schemas/deployment-apps-v1.json" ]; then
  log "generating Kubernetes $K8S_VERSION JSON schemas"
  moddir=$(cd "$scratch" && "$GO" mod download -json "k8s.io/kubernetes@v$K8S_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  [ -f "$moddir/api/openapi-spec/swagger.json" ] || { log "no swagger.json in k8s.io/kubernetes@v$K8S_VERSION"; exit 1; }
  rm -rf "$schemas.tmp"
  "$GO" run ./deploy/tools/k8sschema -in "$moddir/api/openapi-spec/swagger.json" -out "$schemas.tmp"
  rm -rf "$schemas" && mv "$schemas.tmp" "$schemas"
fi

status=0
run() { echo "+ $*"; "$@" || status=1; }

echo "== Prometheus rules and configuration (promtool $(promtool --version 2>&1 | sed -n 's/^promtool, version \([^ ]*\).*/\1/p'))"
run promtool check rules deploy/observability/alerts.yml
run promtool test rules deploy/observability/alerts_test.yml
run promtool check config deploy/observability/prometheus.yml

echo "== Kubernetes manifests (kubeconform ${KUBECONFORM_VERSION}, Kubernetes ${K8S_VERSION} schemas, strict)"
run "$kubeconform" -strict -summary -kubernetes-version "$K8S_VERSION" \
  -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
  -skip Kustomization deploy/k8s

echo "== Load balancer (haproxy -c; unresolved compose hostnames are expected here)"
echo "+ haproxy -c -f deploy/compose/haproxy/haproxy.cfg"
if out=$("$haproxy_bin" -c -f deploy/compose/haproxy/haproxy.cfg 2>&1); then
  other=$(printf '%s\n' "$out" | grep -E 'WARNING|ALERT' | grep -v 'could not resolve address' || true)
  if [ -n "$other" ]; then printf '%s\n' "$other"; status=1; else echo "haproxy.cfg: valid"; fi
else
  printf '%s\n' "$out"; status=1
fi

echo "== Compose stack, dashboard, rule metrics, manifest wiring (go test ./deploy/...)"
run "$GO" test -count=1 ./deploy/...

if [ "$status" -ne 0 ]; then log "FAILED"; exit 1; fi
log "all deploy/ checks passed"
