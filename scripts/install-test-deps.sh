#!/usr/bin/env bash
# Install the system packages trainops' test suite needs (Debian 12 / Ubuntu 24.04).
# Run as root: `scripts/as-root scripts/install-test-deps.sh` (sudo only when not root).  Idempotent: re-running is a no-op
# apart from `apt-get update`.  Python packages come from `pip install -e '.[dev]'`.
#
# What each package is for:
#   podman, conmon, runc      container engine + its Docker-compatible API (tests use runc:
#                             crun rejects hybrid cgroup hosts; podman's Depends would pick crun)
#   golang-github-containers-common  /etc/containers/policy.json, seccomp.json, defaults
#   golang-github-containers-image   /etc/containers/registries.conf (skopeo/podman need it)
#   netavark                  podman's network backend (its Depends is a virtual package)
#   catatonit                 init for `podman run --init` (a Recommends, skipped otherwise)
#   skopeo, umoci             independent readers of registries and OCI layouts
#   docker-registry           CNCF Distribution, the OCI registry the tests run
#   busybox-static            static /bin/busybox: base image built FROM scratch, no pulls
#   git                       bare repositories as real remotes
#   prometheus                canary analysis against a real Prometheus (and promtool for PromQL checks)
#   prometheus-alertmanager   the SLO alert loop: burn-rate alerts delivered to `trainops alerts serve`
#   chromium                  the real browser the registry browser's tests drive through
#                             Playwright (executable_path=/usr/bin/chromium; never `playwright install`)
#   slurmctld slurmd slurm-client munge  a one-node Slurm cluster (trainops_testing/slurm_cluster.py)
#   openssh-server openssh-client        sshd on loopback: the Slurm login host of the tests
#   zstd                      reads the prebuilt cluster components' archives (scripts/kube_components.py)
#   redis-server              Argo CD's cache (its repo-server and application-controller) in
#                             the gray-release tests on the simulated cluster (tests/argo/)
# Not needed: fuse-overlayfs/slirp4netns/uidmap (tests run as root with the vfs driver and
# host networking; see trainops_testing/services.py for the containers.conf they use).
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "install-test-deps.sh: must run as root (try: scripts/as-root $0)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive

apt-get update

packages=(
    podman conmon runc
    golang-github-containers-common golang-github-containers-image
    skopeo umoci docker-registry busybox-static git
    python3 python3-venv python3-pip curl time openssl
    zstd
    prometheus prometheus-alertmanager
    chromium
    slurmctld slurmd slurm-client munge openssh-server openssh-client
    redis-server
    # a real PKCS#11 token (SoftHSM) for release.signing.pkcs11 (tests/signing/test_pkcs11.py)
    softhsm2
)
# Optional or differently named across releases: take what this release has.
for optional in netavark catatonit; do
    if apt-cache show "$optional" >/dev/null 2>&1; then
        packages+=("$optional")
    fi
done
if ! apt-cache show netavark >/dev/null 2>&1; then
    packages+=(containernetworking-plugins)  # older releases: CNI instead of netavark
fi

apt-get install -y --no-install-recommends "${packages[@]}"

# The simulated Kubernetes cluster of the cluster tests (trainops_testing/kube_cluster.py: etcd, the
# Kubernetes control plane, kwok, Volcano, JobSet, Kueue, LeaderWorkerSet, Argo CD, Argo
# Rollouts, KServe) and cosign (tests/signing/test_cosign.py), at the versions pinned in
# scripts/kube-versions.env, into ${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}/bin: from
# the cache, else the prebuilt archives of $TRAINOPS_KUBE_PREBUILT, else a source build, each
# binary checked against scripts/kube-sums.txt (scripts/kube_components.py). A component still
# missing fails this script; TRAINOPS_SKIP_KUBE=1 is the only way on without them (the cluster
# tests then skip, saying so).
kube=0
if [ "${TRAINOPS_SKIP_KUBE:-}" = 1 ]; then
    echo "install-test-deps.sh: TRAINOPS_SKIP_KUBE=1: not installing the cluster components (their tests skip)" >&2
else
    python3 "$(dirname "$0")/kube_components.py" || kube=1
fi

# The Debian package may start a registry on :5000 where an init system runs; the tests
# start their own on free ports and do not need it.
missing=0
for binary in podman conmon runc skopeo umoci docker-registry busybox git prometheus promtool chromium slurmctld slurmd sbatch munged sshd ssh; do
    if ! command -v "$binary" >/dev/null 2>&1; then
        echo "install-test-deps.sh: $binary still missing after install" >&2
        missing=1
    fi
done
if [ ! -f /etc/containers/policy.json ]; then
    echo "install-test-deps.sh: /etc/containers/policy.json missing" >&2
    missing=1
fi
[ "$kube" -eq 0 ] || echo "install-test-deps.sh: cluster components missing (see above)" >&2
exit $(( missing | kube ))
