#!/usr/bin/env bash
# Remakes the golden files of `modkit bedmethyl merge` (modkit 0.6.1) beside this script, from
# the bedMethyl files of the modkit 0.6.1 pileup suite (../shared/data/modkit061_pileup; paths in
# cases.tsv are relative to it). modkit reads bgzipped, tabix-indexed files: each input is
# copied so into a scratch folder first. Usage: make_golden.sh /path/to/modkit
set -euo pipefail
modkit=${1:?usage: make_golden.sh /path/to/modkit (0.6.1)}
here=$(cd "$(dirname "$0")" && pwd)
suite=$(cd "$here/../../../../../shared/data/modkit061_pileup" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$modkit" --version
tail -n +2 "$here/cases.tsv" | while IFS=$'\t' read -r case inputs sizes; do
  staged=()
  for input in $inputs; do
    copy="$scratch/$case.$(basename "$input").gz"
    bgzip -c "$suite/$input" > "$copy"
    tabix -p bed "$copy"
    staged+=("$copy")
  done
  "$modkit" bedmethyl merge "${staged[@]}" -g "$suite/$sizes" -o "$scratch/$case.bed" --header \
    --threads 2 --force
  gzip -9n -c "$scratch/$case.bed" > "$here/$case.bed.gz"
  echo "$case: $(wc -l < "$scratch/$case.bed") lines"
done
