#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu machine for paravg: apt packages (TTS engines for the demo
# corpus, sox, libsndfile) and a virtualenv .venv with the pinned Python dependencies.
# Idempotent: a second run only checks. Usage: bash tools/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
    flite espeak-ng festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts festlex-cmu
    sox libsndfile1
)
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

apt_install() {
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@"
}

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then missing+=(python3-venv); fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing apt packages: ${missing[*]}"
    $SUDO apt-get update -qq
    apt_install "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    python3 -m venv .venv
fi
# torch==2.13.0 is pinned: a bare `torch` would pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q -e ".[dev,lhotse]" 2>&1 | grep -v "^WARNING: Location" || true
# paravg's executors (executor/: paravg-slurm, paravg-warm): a regular install, since Snakemake does not find
# executor plugins installed in editable mode.
.venv/bin/python -m pip install -q --no-deps --force-reinstall ./executor 2>&1 \
    | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import paravg, torch, kaldiio, kaldi_native_fbank, snakemake, \
snakemake_executor_plugin_paravg_slurm, snakemake_executor_plugin_paravg_warm" \
    || { echo "setup: the virtualenv is incomplete" >&2; exit 1; }
echo "setup: ready (.venv/bin/snakemake, .venv/bin/pytest)"
