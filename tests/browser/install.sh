#!/usr/bin/env bash
# Installs Debian's chromium, which the HTML report tests use headless to render report.html,
# when running as root; elsewhere those tests skip and say why.
set -euo pipefail
if command -v chromium >/dev/null; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "not root: HTML report browser tests will be skipped (needs chromium installed)" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
