#!/usr/bin/env bash
# cosign, built from its Go module, for the interop test tests/signing/test_cosign.py
# (`cosign verify-attestation --key` on trainops' SLSA provenance in the Distribution
# registry). cosign is packaged neither for Debian nor on PyPI. The Go caches are the ones
# the Kubernetes builds use (${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}), so modules
# shared with them are downloaded and compiled once; one package at a time (-p=1) at the
# lowest priority, so the build takes only idle CPU. Prints the binary's path.
# Measured here: see the README (Signed releases and provenance).
set -euo pipefail
version="${COSIGN_VERSION:-v2.6.1}"
cache="${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}"
out="$cache/bin/cosign-$version"
if [ -x "$out" ]; then
    echo "$out"
    exit 0
fi
command -v go >/dev/null || { echo "build-cosign.sh: needs Go (the Go toolchain, go >= 1.24)" >&2; exit 1; }
mkdir -p "$cache/bin"
export GOPATH="$cache/go" GOMODCACHE="$cache/go/pkg/mod" GOCACHE="$cache/go/build" GOFLAGS=-p=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" nice -n 19 go install "github.com/sigstore/cosign/v2/cmd/cosign@$version"
mv "$tmp/cosign" "$out"
echo "$out"
