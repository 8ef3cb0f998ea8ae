#!/usr/bin/env bash
# Reproduce static/vendor/d3-force/ (the graph page's neighbourhood drawing, #51) from npm: the
# pinned packages' tarballs, each checked against the integrity (SHA-512) npm's registry publishes
# for that version (written here, so a tarball that changed fails), then their built UMD files and
# licences. `make run` never runs this: the files are committed. `--check` rebuilds in a temporary
# directory and compares with the committed files instead of writing them.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=static/vendor/d3-force
PACKAGES=(
  "d3-dispatch 3.0.1 sha512-rzUyPU/S7rwUflMyLc1ETDeBj0NRuHKKAcvukozwhshr6g6c5d8zh4c2gQjY2bZ0dXeGLWc1PF174P2tVvKhfg=="
  "d3-quadtree 3.0.1 sha512-04xDrxQTDTCFwP5H6hRhsRcb9xxv2RzkcsygFzmkSIOJy3PeRJP7sNk3VRIbKXcog561P9oU0/rVH6vDROAgUw=="
  "d3-timer 3.0.1 sha512-ndfJ/JxxMd3nw31uyKoY2naivF+r29V+Lc0svZxe1JvvIRmi8hUsrMvdOwgS1o6uBHmiz91geQ0ylPP0aj1VUA=="
  "d3-force 3.0.0 sha512-zxV/SsA+U4yte8051P4ECydjD/S+qeYtnaIyAs9tgHCqfguma/aAQDjo85A9Z6EKhBirHRJHXIgJUlffT4wdLg=="
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
built="$tmp/built"
mkdir -p "$built"
for entry in "${PACKAGES[@]}"; do
  read -r name version integrity <<<"$entry"
  tarball=$(cd "$tmp" && npm pack --silent "$name@$version")
  got="sha512-$(openssl dgst -sha512 -binary "$tmp/$tarball" | base64 -w0)"
  if [ "$got" != "$integrity" ]; then
    echo "vendor_d3_force: $name@$version: integrity $got, expected $integrity" >&2
    exit 1
  fi
  mkdir -p "$tmp/$name"
  tar -xzf "$tmp/$tarball" -C "$tmp/$name"
  cp "$tmp/$name/package/dist/$name.min.js" "$built/$name.min.js"
  cp "$tmp/$name/package/LICENSE" "$built/LICENSE.$name"
  echo "$name@$version $integrity" >>"$built/VERSIONS"
done
if [ "${1:-}" = "--check" ]; then
  diff -r "$built" "$OUT" --exclude=README.md && echo "vendor_d3_force: $OUT matches npm's pinned packages"
  exit
fi
mkdir -p "$OUT"
cp "$built"/* "$OUT/"
echo "vendor_d3_force: wrote $OUT"
