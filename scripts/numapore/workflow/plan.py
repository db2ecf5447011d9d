"""The run's plan: built once from the config, the sample sheet, the host file and the run's
cores, before any job. It holds every decision of the run (the samples, the host with the
command line's overrides, the I/O mode, both tunings, the pileup's options, the DMR contrasts,
the cohort tables, the comparison's cells) and checks every setting, raising one InputError
line for the first that cannot run (numapore.workflow.build makes it). The workflow's
common.smk only asks it; a test can build it without Snakemake."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numapore.compare.cells import compared_sample, measured_steps
from numapore.execution.aligners import ALIGNERS
from numapore.execution.hosts import HostConfig
from numapore.inputs.kinds import DEFAULT_KIND, KINDS
from numapore.inputs.sheet import Sample
from numapore.methylation.cohort import Filters
from numapore.methylation.dmr import Contrast
from numapore.methylation.motifs import MOTIFS
from numapore.workflow import layout


@dataclass
class RunPlan:
    """What a run does, decided once (see the module's docstring). notes: (level, line) to say
    in the run's first lines, in order ('info' or 'warning')."""

    config: dict[str, Any]
    samples: dict[str, Sample]
    groups: dict[str, list[str]]
    host_file: str
    host: HostConfig
    file_host: HostConfig
    cores: int
    tuning_name: str = ""
    tune: dict[str, Any] | None = None
    tune_pileup: dict[str, Any] | None = None
    contrasts: dict[str, Contrast] = field(default_factory=dict)
    compare_cells: list[str] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    # What the run's processes hand on to its jobs' (a cluster job parses the workflow again):
    # set in the environment by the workflow, never by the plan's making (a test's process
    # builds plans too).
    environment: dict[str, str] = field(default_factory=dict)

    # ---- settings read everywhere

    @property
    def aligner(self) -> str:
        """The run's aligner (config aligner)."""
        return self.config["aligner"]

    @property
    def io_mode(self) -> str:
        """The host's I/O mode, with the command line's io_mode (a tuning may choose another)."""
        return self.host.io_mode

    @property
    def references(self) -> dict[str, Path]:
        """The run's references by name."""
        return {s.reference_name: s.reference for s in self.samples.values()}

    def shard_ids(self, step: str, n: int | None = None) -> list[str]:
        """Shard names '1-of-N' .. 'N-of-N' of a step scattered into N pieces (config
        scatter:, unless given)."""
        n = n or self.config["scatter"][step]
        return [f"{i}-of-{n}" for i in range(1, n + 1)]

    @property
    def one_call_shard(self) -> bool:
        """Methylation calling not scattered: nanopolish's job writes the sample's call table
        itself (a merge after it would only link it); its shard is '1-of-1'."""
        return self.config["scatter"]["methylation"] == 1

    @property
    def one_align_shard(self) -> bool:
        """The alignment not scattered: the align job makes and finishes the sample's BAM."""
        return self.config["scatter"]["alignment"] == 1

    def job_shard(self, step: str) -> str:
        """The shard in the names of a step's job logs: '1-of-1' when the step is not
        scattered (its one job names itself as a scattered run's shards do), else the
        wildcard."""
        return "{shard}" if self.config["scatter"][step] > 1 else "1-of-1"

    @property
    def staging_streams(self) -> bool:
        """Whether a modBAM sample's staged reads stream into its one align job through a
        named pipe (a scattered alignment splits a file of them first)."""
        return self.one_align_shard

    @property
    def accounting_motif(self) -> str:
        """The motif whose calls the read accounting and the report count: the first."""
        return self.config["methylation"]["motifs"][0]

    def sample_motifs(self, sample: Sample) -> list[str]:
        """The motifs a sample has a bedMethyl of: nanopolish's (methylation.motifs) for a
        signal sample, the pileup's (pileup.motif) for one piling up its reads' own calls."""
        if sample.input_kind.runs("call_methylation"):
            return list(self.config["methylation"]["motifs"])
        return [self.config["pileup"]["motif"]] if sample.input_kind.runs("pileup") else []

    def scored(self, name: str) -> bool:
        """Whether a sample's calls are scored against a simulated truth: a simulated sample
        whose calls cover CpG."""
        if name not in self.config["simulate"]:
            return False
        if self.samples[name].input_kind.runs("call_methylation"):
            return "cpg" in self.config["methylation"]["motifs"]
        return self.config["pileup"]["motif"] == "cpg"

    def minimap2_preset(self, sample: Sample) -> str:
        """minimap2's -x for a sample, index and alignment alike."""
        return sample.input_kind.minimap2_preset(self.config)

    def marks_duplicates(self, name: str) -> bool:
        """Whether the sample's BAM gets its duplicates marked: kinds that mark them (short),
        when config short_reads.mark_duplicates asks for it."""
        kind = self.samples[name].input_kind
        return kind.marks_duplicates and self.config["short_reads"]["mark_duplicates"]

    def bwa_batch(self, name: str) -> int:
        """bwa mem's -K for the sample (0: its kind reads no batches)."""
        return self.samples[name].input_kind.batch(self.config)

    def aligner_index_files(self, name: str, aligner: str) -> list[str]:
        """Every file of the aligner's index for the sample's reference."""
        sample = self.samples[name]
        prefix = layout.reference_index_prefix(sample.reference_name, aligner)
        return ALIGNERS[aligner].index_files(prefix, self.minimap2_preset(sample))

    # ---- wildcard patterns

    def names_where(self, keep) -> str:
        """A wildcard pattern matching the names of the samples keep(sample) is true of; one
        matching nothing when there is none."""
        names = [re.escape(s.name) for s in self.samples.values() if keep(s)]
        return "|".join(names) if names else "(?!)"

    def wildcard_patterns(self) -> dict[str, str]:
        """The wildcards' patterns (sample names as the sheet schema allows them)."""
        presets = sorted({k.minimap2_preset(self.config) for k in KINDS.values()})
        return {
            "sample": r"[A-Za-z0-9][A-Za-z0-9_-]*",
            "aligner": "|".join(ALIGNERS),
            "ref": r"[A-Za-z0-9._-]+",
            "shard": r"\d+-of-\d+",
            "fmt": r"fast[aq](\.gz)?",
            "signal": "fast5|blow5",
            "cell": r"[a-z0-9.-]+",
            "part": "all|hp1|hp2",
            "codes": r"[A-Za-z0-9]+(_[A-Za-z0-9]+)*",
            "motif": "|".join([*MOTIFS, "any"]),
            "preset": "|".join(map(re.escape, presets)),
        }

    def samples_running(self, step: str) -> str:
        """A pattern of the samples whose input kind runs a step (raw_signal, call_methylation,
        pileup)."""
        return self.names_where(lambda s: s.input_kind.runs(step))

    def samples_with_signal_format(self, signal_format: str) -> str:
        """A pattern of the samples whose raw signal is in a format (fast5, pod5, blow5)."""
        return self.names_where(lambda s: s.signal_format == signal_format)

    def simulated_of_kind(self, kind: str) -> str:
        """A pattern of the simulated samples (config simulate:) of an input kind."""
        return self.names_where(lambda s: s.name in self.config["simulate"] and s.kind == kind)

    def samples_with_phased_vcf(self) -> str:
        """A pattern of the samples with a phased VCF (rule haplotag)."""
        return self.names_where(lambda s: bool(s.phased_vcf))

    def host_overrides(self, *names: str) -> dict[str, dict[str, str]]:
        """A rule's params: the command line's settings over the host file among names
        ('io_mode', 'strategy.alignment', 'strategy.methylation'), as {'overrides': ...};
        nothing without any, so that such a run has the params (and reruns) of one before."""
        chosen = {k: v for k, v in self.host.overrides.items() if k in names}
        return {"overrides": chosen} if chosen else {}

    def dmr_memory_bound(self) -> float | None:
        """The memory bound (GiB) of each DSS job (config dmr.max_memory_gb; None: none)."""
        return self.config["dmr"].get("max_memory_gb") or None

    def dmr_test_resources(self) -> dict[str, int]:
        """Rule dmr_test's resources: mem_mib of the bound (GiB), for a cluster's scheduler (none
        without one)."""
        bound = self.dmr_memory_bound()
        return {"mem_mib": math.ceil(bound * 1024)} if bound else {}

    def contrast_pattern(self) -> str:
        """A wildcard pattern matching the contrasts' names."""
        return "|".join(re.escape(n) for n in self.contrasts) or "(?!)"

    # ---- the cohort tables

    def cohort_samples(self, ref: str, motif: str) -> list[str]:
        """The samples of a cohort table: every sample on the reference with a bedMethyl of
        the motif, in the run's order."""
        return [
            s.name
            for s in self.samples.values()
            if s.reference_name == ref and motif in self.sample_motifs(s)
        ]

    def track_codes(self) -> list[str]:
        """The tracks' code sets (config tracks.mod_codes) as their files name them: 'h_m'."""
        return [entry.replace(",", "_") for entry in self.config["tracks"]["mod_codes"]]

    def sample_tracks(self, name: str) -> list[str]:
        """A sample's bigWig tracks: per motif and code set; per haplotype too with
        pileup.phased (samples whose reads carry their tags)."""
        sample = self.samples[name]
        phased = self.config["pileup"]["phased"] and sample.input_kind.stages_tagged_reads
        return [
            layout.track(name, self.aligner, motif, part, codes)
            for motif in self.sample_motifs(sample)
            for part in ["all", *(["hp1", "hp2"] if phased else [])]
            for codes in self.track_codes()
        ]

    def tracks(self) -> list[str]:
        """Every bigWig track of the run."""
        return [track for name in self.samples for track in self.sample_tracks(name)]

    def reference_tracks(self, ref: str) -> list[str]:
        """The tracks of the samples aligned to reference ref (its IGV session shows them)."""
        return [
            track
            for name, sample in self.samples.items()
            if sample.reference_name == ref
            for track in self.sample_tracks(name)
        ]

    def igv_sessions(self) -> list[str]:
        """An IGV session per reference that has tracks."""
        return [layout.igv_session(ref) for ref in self.references if self.reference_tracks(ref)]

    def cohort_filters(self, ref: str, motif: str) -> Filters:
        """The sites a cohort table keeps (config cohort:), min_samples `all` as its samples'
        count."""
        settings = self.config["cohort"]
        given = settings["min_samples"]
        count = len(self.cohort_samples(ref, motif)) if given == "all" else int(given)
        return Filters(count, int(settings["min_sample_coverage"]))

    def cohorts(self) -> list[tuple[str, str]]:
        """The (reference, motif) of each cohort table: those shared by two samples or more."""
        motifs = dict.fromkeys(m for s in self.samples.values() for m in self.sample_motifs(s))
        return [
            (ref, motif)
            for ref in self.references
            for motif in motifs
            if len(self.cohort_samples(ref, motif)) >= 2
        ]

    def cohort_tables(self) -> list[str]:
        """The cohort tables of the run (their indexes)."""
        return [layout.cohort_table(r, self.aligner, m, ".tbi") for r, m in self.cohorts()]

    # ---- statistics over region sets (config regions:)

    def region_sets(self) -> dict[str, str]:
        """The region sets: name -> BED file (config regions:)."""
        return dict(self.config["regions"])

    def region_samples(self, motif: str) -> list[str]:
        """The samples with a bedMethyl of the motif, in the run's order."""
        return [s.name for s in self.samples.values() if motif in self.sample_motifs(s)]

    def region_haplotypes(self, name: str) -> list[str]:
        """A sample's haplotypes with a bedMethyl of their own (pileup.phased): hp1, hp2."""
        phased = self.config["pileup"]["phased"]
        return (
            ["hp1", "hp2"] if phased and self.samples[name].input_kind.stages_tagged_reads else []
        )

    def region_groups(self, motif: str) -> dict[str, list[str]]:
        """The groups with rows in the region tables: their samples with a bedMethyl of the
        motif, when those share one reference."""
        with_motif = set(self.region_samples(motif))
        groups = {}
        for group, members in self.groups.items():
            kept = [m for m in members if m in with_motif]
            if kept and len({self.samples[m].reference_name for m in kept}) == 1:
                groups[group] = kept
        return groups

    def region_motifs(self) -> list[str]:
        """The motifs some sample has a bedMethyl of: one pair of region tables each."""
        return list(dict.fromkeys(m for s in self.samples.values() for m in self.sample_motifs(s)))

    def region_tables(self) -> list[str]:
        """Every region set's tables (stats, entropy) and report files, per motif."""
        return [
            path
            for name in self.region_sets()
            for motif in self.region_motifs()
            for path in (
                layout.region_table(name, self.aligner, motif, "stats"),
                layout.region_table(name, self.aligner, motif, "entropy"),
                layout.region_report(name, self.aligner, motif, ".html"),
                layout.region_report(name, self.aligner, motif, ".png"),
            )
        ]

    def region_set_pattern(self) -> str:
        """A wildcard pattern matching the region sets' names."""
        return "|".join(re.escape(n) for n in self.region_sets()) or "(?!)"

    # ---- the QC of the calls

    def calls_qc_runs(self) -> list[tuple[str, str]]:
        """The (sample, motif) of each QC of the calls (config calls_qc): every pileup of a
        modBAM, a modbam or hifi sample's own calls or a signal sample's modBAM of a motif."""
        if not self.config.get("calls_qc", True):
            return []
        return [(s.name, m) for s in self.samples.values() for m in self.sample_motifs(s)]

    # ---- the comparison

    def compare_sample(self) -> Sample:
        """The sample the comparison benchmarks (InputError naming what is wrong with it)."""
        return compared_sample(self.config["compare"], self.samples)

    def compare_steps(self) -> list[str]:
        """The steps the comparison measures: those of compare.steps the compared sample's kind
        runs."""
        name = self.config["compare"]["sample"] or next(iter(self.samples), "")
        kind = self.samples[name].kind if name in self.samples else DEFAULT_KIND
        return measured_steps(self.config["compare"]["steps"], kind)
