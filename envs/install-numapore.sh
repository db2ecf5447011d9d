#!/usr/bin/env bash
# Snakemake's post-deploy script of every env whose rules import numapore (envs/NAME.post-deploy.sh
# links here): installs the package of the checkout the run uses (NUMAPORE_SOURCE, set by
# workflow/rules/common.smk) into the new env, without dependencies (the env file lists them).
# Its compiled parts are built when the host has a C compiler and the headers; otherwise the
# package's Python paths run (the same bytes, slower): `numapore compiled` says which.
set -euo pipefail
: "${NUMAPORE_SOURCE:?numapore: NUMAPORE_SOURCE is not set (the workflow sets it; run through snakemake)}"
NUMAPORE_COMPILED=optional python -m pip install --quiet --no-deps "$NUMAPORE_SOURCE"
numapore compiled
