#!/bin/sh
# Regenerates expected/ from cases.tsv with a modkit 0.6.1 binary, run from this folder:
#   MODKIT=/path/to/modkit ./make_goldens.sh
# (--threads 4 and --suppress-progress are added; they change no byte of the output).
set -eu
cd "$(dirname "$0")"
"${MODKIT:?set MODKIT to a modkit 0.6.1 binary}" --version | grep -qx 'modkit 0.6.1'
awk -F '\t' 'NR > 1 { print $2 "\t" $5 }' cases.tsv | while IFS="$(printf '\t')" read -r expected command; do
    set -- $command  # modkit pileup BAM OUT.bed OPTIONS...
    bam=$3
    shift 4
    bed=${expected%.gz}  # a .gz golden: modkit's file gzipped (gzip -9n)
    "$MODKIT" pileup "$bam" "$bed" "$@" --threads 4 --suppress-progress
    if [ "$bed" != "$expected" ]; then gzip -9nf "$bed"; fi
done
