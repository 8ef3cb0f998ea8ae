#!/usr/bin/env bash
# Install the Debian packages the test suite uses, when they are missing and we may install them.
# `system_deps.sh ocr` installs only the OCR engine uploads of scans and images need (`make run`).
set -euo pipefail
need=()
# The OCR engine of scanned PDF pages and images (apps/documents/ocr.py) and its English model.
command -v tesseract >/dev/null 2>&1 || need+=(tesseract-ocr tesseract-ocr-eng)
[ "${1:-}" = ocr ] || {
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v objdump >/dev/null 2>&1 || need+=(binutils)
command -v qemu-x86_64 >/dev/null 2>&1 || need+=(qemu-user)
command -v caddy >/dev/null 2>&1 || need+=(caddy)
}
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null 2>&1; then
  echo "missing Debian packages: ${need[*]} (install them as root: apt-get install ${need[*]})" >&2
  exit 0
fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
echo "installing Debian packages: ${need[*]}"
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian's caddy package enables and starts a system-wide Caddy on port 80; the tests run their own.
if [[ " ${need[*]} " == *" caddy "* ]] && [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now caddy.service >/dev/null 2>&1 || true
fi
