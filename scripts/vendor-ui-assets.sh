#!/usr/bin/env bash
# Reproduce trainops/ui/static/vendor/: the JavaScript and CSS the registry browser bundles
# (no CDN: the pages work offline). Fetches pinned npm tarballs with `npm pack`, checks
# each tarball's sha256, and copies the built files and their licenses.
#
#   cytoscape 3.34.4        graph drawing (the lineage graph), MIT
#   cytoscape-dagre 4.0.1   layered (Sugiyama) layout for cytoscape; bundles @dagrejs/dagre (MIT)
#   uplot 1.6.32            the training-curve chart, MIT
#
# Needs node/npm. Run from anywhere; rewrites the vendor directory.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="$here/trainops/ui/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

packages=(
    "cytoscape 3.34.4 0d02363d99d805ce8d91fdecab7b2a8cb91ee280d67f309ce44c161d117b4679"
    "cytoscape-dagre 4.0.1 830f9ad4860db701cb6f899ef3590f5c1bfb4d53d8108894f00b56131907e514"
    "uplot 1.6.32 4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d"
)
cd "$work"
for line in "${packages[@]}"; do
    read -r name version sha <<<"$line"
    npm pack --silent "$name@$version" >/dev/null
    tarball="$name-$version.tgz"
    echo "$sha  $tarball" | sha256sum --check --quiet
    mkdir -p "$name"
    tar xzf "$tarball" -C "$name"
done

rm -rf "$dest"
mkdir -p "$dest"
cp cytoscape/package/dist/cytoscape.min.js "$dest/"
cp cytoscape/package/LICENSE "$dest/cytoscape.LICENSE"
cp cytoscape-dagre/package/dist/cytoscape-dagre.min.js "$dest/"
cp cytoscape-dagre/package/LICENSE "$dest/cytoscape-dagre.LICENSE"
cp uplot/package/dist/uPlot.iife.min.js uplot/package/dist/uPlot.min.css "$dest/"
cp uplot/package/LICENSE "$dest/uPlot.LICENSE"
{
    echo "Vendored by scripts/vendor-ui-assets.sh from the npm registry (npm pack, sha256-checked):"
    for line in "${packages[@]}"; do
        read -r name version sha <<<"$line"
        echo "  $name@$version  sha256:$sha"
    done
    echo "cytoscape-dagre.min.js bundles @dagrejs/dagre (MIT, https://github.com/dagrejs/dagre)."
} >"$dest/SOURCES"
(cd "$dest" && sha256sum -- *.js *.css >SHA256SUMS)
echo "vendored into $dest"
