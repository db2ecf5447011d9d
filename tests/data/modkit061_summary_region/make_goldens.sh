#!/usr/bin/env bash
# MODKIT=/path/to/modkit ./make_goldens.sh: writes expected/ again with modkit 0.6.1 (README.md).
set -euo pipefail
cd "$(dirname "$0")"
MODKIT=${MODKIT:?give MODKIT=/path/to/modkit}
BAM=../../../../shared/data/modkit_pileup/inputs/CG_5mC_20230207_1700_6A_PAG66026_3c0abf27_oligo_741_adapters_modcalls_0th_sort_10_reads.bam
THRESHOLDS=(--filter-threshold C:0.7 --filter-threshold A:0.8)
"$MODKIT" --version > expected/modkit_version
"$MODKIT" modbam summary "$BAM" --region oligo_741_adapters:0-10 --include-bed region_0_10.bed \
    "${THRESHOLDS[@]}" --tsv -t 4 --suppress-progress > expected/summary_0_10_include_bed.tsv
"$MODKIT" modbam summary "$BAM" --region oligo_741_adapters:9-10 --include-bed region_9_10.bed \
    "${THRESHOLDS[@]}" -t 4 --suppress-progress > expected/summary_9_10_include_bed.txt
"$MODKIT" modbam summary "$BAM" --region oligo_741_adapters:0-10 --include-bed region_0_10.bed \
    --no-sampling -t 4 --suppress-progress > expected/summary_0_10_include_bed_estimated.txt
"$MODKIT" extract calls "$BAM" expected/extract_calls_0_10.tsv --region oligo_741_adapters:0-10 \
    "${THRESHOLDS[@]}" -t 4 --suppress-progress --force
gzip -9nf expected/extract_calls_0_10.tsv
