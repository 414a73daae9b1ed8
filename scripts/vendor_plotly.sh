#!/usr/bin/env bash
# Vendor plotly.js's basic bundle (npm: plotly.js-basic-dist-min; scatter, bar and pie, the only trace types the
# console draws) into dashboards/vendor/, with its MIT license beside it. The one vendored third-party file: the
# console serves it itself (dashboards/views/assets.py), so neither the package nor an adopting project needs the
# 63 MB plotly Python package, a CDN or a static files setting.
# The pinned version is fetched from the npm registry with npm (which checks the registry's sha512 of the
# tarball) and the script inside is checked against PINNED_SHA256. To upgrade: set VERSION, run with SHA256=""
# in the environment to see the new file's sum, read plotly.js's changelog, pin the sum, run again, commit the files.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=4.1.1
PINNED_SHA256=99784e3abfb07b142a15e521a439e6d9addceadb3f79553fd24c72774f0649ba
SHA256=${SHA256-$PINNED_SHA256}
PACKAGE=plotly.js-basic-dist-min
DEST=dashboards/vendor

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npm pack --silent --pack-destination "$tmp" "$PACKAGE@$VERSION" >/dev/null
tar -xzf "$tmp/$PACKAGE-$VERSION.tgz" -C "$tmp"
script="$tmp/package/plotly-basic.min.js"
actual=$(sha256sum "$script" | cut -d' ' -f1)
if [ "$actual" != "$SHA256" ]; then
    echo "vendor_plotly: $PACKAGE $VERSION's plotly-basic.min.js has sha256 $actual, not the pinned $SHA256" >&2
    exit 1
fi
# The view reads the version from this banner, so the file and its URL cannot disagree.
head -c 200 "$script" | grep -q "plotly.js (basic - minified) v$VERSION\$" || {
    echo "vendor_plotly: the script's banner does not name v$VERSION" >&2
    exit 1
}
mkdir -p "$DEST"
cp "$script" "$DEST/plotly-basic.min.js"
cp "$tmp/package/LICENSE" "$DEST/plotly.js-LICENSE.txt"
echo "vendored $PACKAGE $VERSION into $DEST ($(wc -c <"$DEST/plotly-basic.min.js") bytes, sha256 $actual)"
