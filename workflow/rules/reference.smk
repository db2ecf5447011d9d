# Reference preparation: one folder per reference under results/references/, so that no index is
# ever written beside the user's own files.


rule prepare_reference:
    input:
        lambda wc: REFERENCES[wc.ref],
    output:
        fasta=layout.reference_fasta(),
        fai=f"{layout.reference_fasta()}.fai",
    log:
        "results/logs/prepare_reference/{ref}.log",
    benchmark:
        "results/benchmarks/prepare_reference/{ref}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/prepare_reference.py"


# One index per minimap2 preset (its k-mer and window sizes are the index's): map-ont for
# nanopore reads, sr for short reads (the input kinds table's minimap2_index).
rule minimap2_index:
    input:
        layout.reference_fasta(),
    output:
        layout.reference_index_prefix(aligner="minimap2") + ".{preset}.mmi",
    log:
        "results/logs/minimap2_index/{ref}.{preset}.log",
    benchmark:
        "results/benchmarks/minimap2_index/{ref}.{preset}.tsv"
    conda:
        "../../envs/minimap2.yaml"
    # minimap2 indexes with at most 3 threads; half the cores at most, so that on a small host
    # the sample's nanopolish index (one thread) runs beside it.
    threads: max(1, min(3, RUN_CORES // 2))
    # Written under a hidden name and renamed: complete or absent (no shadow folder, which
    # costs a second Snakemake process per job).
    params:
        tmp=hidden_temp,
    shell:
        "minimap2 -x {wildcards.preset} -t {threads} -d {params.tmp} {input} 2> {log}"
        " && mv {params.tmp} {output}"


rule bwa_index:
    input:
        layout.reference_fasta(),
    output:
        multiext(layout.reference_index_prefix(aligner="bwa"), *ALIGNERS["bwa"].index_suffixes),
    log:
        "results/logs/bwa_index/{ref}.log",
    benchmark:
        "results/benchmarks/bwa_index/{ref}.tsv"
    conda:
        "../../envs/bwa.yaml"
    # Written under a hidden prefix, each file renamed once all are written: complete or absent
    # (no shadow folder, which costs a second Snakemake process per job).
    params:
        prefix=subpath(output[0], strip_suffix=".amb"),
        tmp=hidden_index_prefix(".amb"),
        suffixes=" ".join(ALIGNERS["bwa"].index_suffixes),
    shell:
        "bwa index -p {params.tmp} {input} 2> {log}"
        " && for s in {params.suffixes}; do mv {params.tmp}$s {params.prefix}$s; done"


rule bowtie2_index:
    input:
        layout.reference_fasta(),
    output:
        multiext(
            layout.reference_index_prefix(aligner="bowtie2"), *ALIGNERS["bowtie2"].index_suffixes
        ),
    log:
        "results/logs/bowtie2_index/{ref}.log",
    benchmark:
        "results/benchmarks/bowtie2_index/{ref}.tsv"
    conda:
        "../../envs/bowtie2.yaml"
    threads: RUN_CORES
    # As bwa_index: a hidden prefix, each file renamed once all are written.
    params:
        prefix=subpath(output[0], strip_suffix=".1.bt2"),
        tmp=hidden_index_prefix(".1.bt2"),
        suffixes=" ".join(ALIGNERS["bowtie2"].index_suffixes),
    shell:
        "bowtie2-build --threads {threads} {input} {params.tmp} > {log} 2>&1"
        " && for s in {params.suffixes}; do mv {params.tmp}$s {params.prefix}$s; done"


# SNAP's index is a folder (Genome, GenomeIndex, GenomeIndexHash, OverflowTable); chromosome
# names end at the first space, as samtools faidx and the other aligners cut them.
rule snap_index:
    input:
        layout.reference_fasta(),
    output:
        expand(
            layout.reference_index_prefix(aligner="snap") + "{suffix}",
            suffix=ALIGNERS["snap"].index_suffixes,
            allow_missing=True,
        ),
    log:
        "results/logs/snap_index/{ref}.log",
    benchmark:
        "results/benchmarks/snap_index/{ref}.tsv"
    conda:
        "../../envs/snap.yaml"
    threads: RUN_CORES
    # Written into a hidden folder, its files renamed into place once all are written.
    params:
        folder=subpath(output[0], parent=True),
        tmp=lambda wc, output: str(temp_name(Path(output[0]).parent)),
    shell:
        "snap-aligner index {input} {params.tmp} -t{threads} > {log} 2>&1"
        " && mkdir -p {params.folder} && mv {params.tmp}/* {params.folder}/ && rmdir {params.tmp}"
