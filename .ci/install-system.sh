#!/usr/bin/env bash
# Install the Debian packages the test suite needs: PostgreSQL 15 (the integration tests start
# their own server from its binaries) and chromium (the dashboard browser test).
# Idempotent: packages already installed are skipped, and `apt-get update` runs at most once.
set -euo pipefail

packages=(postgresql chromium)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-system: all of ${packages[*]} already installed"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi

echo "install-system: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
