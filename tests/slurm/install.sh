#!/usr/bin/env bash
# Installs Debian's slurm-wlm and munge for the throwaway test cluster when
# running as root; elsewhere the SLURM tests skip and say why.
set -euo pipefail
if command -v slurmctld >/dev/null && command -v munged >/dev/null; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "not root: SLURM tests will be skipped (needs slurm-wlm and munge installed)" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq slurm-wlm munge >/dev/null
