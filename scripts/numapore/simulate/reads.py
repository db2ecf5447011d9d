"""Simulate raw R9.4 nanopore reads (450 bases/s, 4 kHz) with known CpG methylation.

Reads are drawn from a reference FASTA (log-normal lengths, both strands), each CpG of a read is
methylated or not according to a deterministic per-site methylated fraction, and the raw signal
is made from tombo's 6-mer pore model (see numapore.simulate.poremodel): one level per 6-mer, plus
the CpG model's shift for every 5mC, a per-base level jitter, a per-read shift/scale, gamma dwell
times and Gaussian per-sample noise, then digitised like a MinION (8192 levels over ~1445 pA).
tombo's sd (one value, 3.3 pA) is the spread of per-base mean levels, wider than the per-sample
noise of real R9.4 reads (1.7-2.0 pA in ../shared/data/ecoli_r94), so by default per-sample noise
is 0.55 x sd (1.8 pA) and each base's level is jittered by 0.3 x sd (1.0 pA). Dwell per 6-mer is
1 + gamma(shape 2.5) samples with mean sampling_rate / bases_per_second (8.9 at 4 kHz, 450 b/s).

Methylation pattern. The true methylated fraction of the CpG whose C is at forward position p
is f(p) = clip(0.5 + A sin(2 pi p / P + phase), 0, 1) (default A = 0.6, P = 10 kb): about 19% of
sites are fully methylated, 19% unmethylated and the rest partial. Per read, CpGs are chained
into clusters exactly as nanopolish groups them (consecutive CpGs at most 10 bp apart); a read
draws one uniform u per cluster and a CpG is methylated when u < f(p). Because f changes slowly,
the CpGs of a nanopolish group almost always share one state, so a group's truth is well
defined; numapore.methylation.accuracy uses the majority of its CpGs.

Outputs (in the output folder): reads.fastq (true sequence, optionally with basecalling errors),
truth.tsv (read_id, chromosome, position = 0-based forward-strand C of the CpG as in nanopolish
call-methylation's `start`, strand, methylated), single-read FAST5 files (fast5_single/<batch>/),
multi-read FAST5 files (fast5_multi/batch_<n>.fast5), BLOW5 (reads.blow5 and its .idx, written
through numapore.signal.slow5; zlib records and uncompressed signal by default, which nanopolish
0.14 reads), reads.modbam.bam (format modbam: the same molecules as a basecaller, R10.4.1 and
dorado-like, writes them: an unaligned BAM with MM/ML/MN 5mC calls from the truth, noise model in
numapore.simulate.modbam; no signal is made when it is the only read format), and
simulation.json (the parameters).

Determinism: read i uses numpy's default_rng([seed, i]), so outputs are byte-identical for a
given seed whatever the number of processes; batches of reads_per_file reads are the unit of
work and of multi-read files.

Here: the process-pool driver, the text outputs and the command line. The reads are made in
numapore.simulate.read_model (settings, molecules, signal, basecalls), their FAST5 and BLOW5
records in numapore.simulate.signal_files, the pore model in numapore.simulate.poremodel.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pysam

from numapore.signal.slow5 import FAST5_AUX_FIELDS, check_compression, encode_record
from numapore.signal.slow5_files import Slow5Writer
from numapore.simulate.modbam import ModRead, modbam_record
from numapore.simulate.poremodel import CPG_MODEL, STANDARD_MODEL, PoreModel, load_pore_model
from numapore.simulate.read_model import (
    DEFAULT_FORMATS,
    FORMATS,
    SIGNAL_FORMATS,
    Molecule,
    Reference,
    SimConfig,
    SimRead,
    basecalled_read,
    draw_molecule,
    read_fasta,
    simulate_read,
)
from numapore.simulate.signal_files import (
    read_group_attrs,
    single_fast5_name,
    slow5_record,
    write_multi_fast5,
    write_single_fast5,
)
from numapore.simulate.truth import layout, truth_bed

TRUTH_COLUMNS = ("read_id", "chromosome", "position", "strand", "methylated")


# ---------------------------------------------------------------------------- text outputs


def fastq_record(read: SimRead) -> str:
    """Return the FASTQ record (basecalled sequence) of a read."""
    return f"@{read.read_id}\n{read.called}\n+\n{read.quality}\n"


def truth_rows(read: SimRead | Molecule) -> str:
    """Return the truth TSV rows (no header) of a read's CpGs."""
    return "".join(
        f"{read.read_id}\t{read.chromosome}\t{p}\t{read.strand}\t{int(m)}\n"
        for p, m in zip(read.cpg_positions.tolist(), read.methylated.tolist(), strict=True)
    )


# ---------------------------------------------------------------------------- driver

_WORKER: dict[str, Any] = {}


def _init_worker(ref: Reference, model: PoreModel, cfg: SimConfig, out: str) -> None:
    """Keep the reference, model, config and output folder in a worker process."""
    _WORKER.update(ref=ref, model=model, cfg=cfg, out=Path(out))


@dataclass
class Batch:
    """What one batch of reads gives the main process to write (FAST5 files are written by the
    worker)."""

    reads: int
    fastq: str
    truth: str
    blow5: list[tuple[str, bytes]]  # (read_id, encoded record)
    samples: int
    modbam: list[ModRead]


def _run_batch(batch: int) -> Batch:
    """Simulate one batch of reads and write its FAST5 files; return the other outputs."""
    ref, model, cfg, out = _WORKER["ref"], _WORKER["model"], _WORKER["cfg"], _WORKER["out"]
    lo = batch * cfg.reads_per_file
    hi = min(cfg.n_reads, lo + cfg.reads_per_file)
    signal = bool(set(SIGNAL_FORMATS) & set(cfg.formats))
    reads = [simulate_read(ref, model, cfg, i) for i in range(lo, hi)] if signal else []
    basecalled = (
        [basecalled_read(ref, cfg, i) for i in range(lo, hi)] if "modbam" in cfg.formats else []
    )
    if "single" in cfg.formats:
        d = out / "fast5_single" / str(batch)
        d.mkdir(parents=True, exist_ok=True)
        for r in reads:
            write_single_fast5(d / single_fast5_name(r), r, cfg)
    if "multi" in cfg.formats:
        write_multi_fast5(out / "fast5_multi" / f"batch_{batch}.fast5", reads, cfg)
    fastq = "".join(fastq_record(r) for r in reads) if "fastq" in cfg.formats else ""
    # Both read models draw the same molecules: either gives the truth.
    molecules = (
        reads
        or [mol for _, mol in basecalled]
        or [draw_molecule(np.random.default_rng([cfg.seed, i]), ref, cfg) for i in range(lo, hi)]
    )
    truth = "".join(truth_rows(r) for r in molecules) if "truth" in cfg.formats else ""
    blobs = []
    if "blow5" in cfg.formats:
        # Encode (compress) here, in parallel; the main process only appends the bytes.
        blobs = [
            (
                r.read_id,
                encode_record(
                    slow5_record(r),
                    FAST5_AUX_FIELDS,
                    "blow5",
                    cfg.blow5_record_compression,
                    cfg.blow5_signal_compression,
                ),
            )
            for r in reads
        ]
    return Batch(
        reads=hi - lo,
        fastq=fastq,
        truth=truth,
        blow5=blobs,
        samples=int(sum(r.signal.size for r in reads)),
        modbam=[read for read, _ in basecalled],
    )


def modbam_header(cfg: SimConfig, reference: Path) -> dict[str, Any]:
    """The unaligned modBAM's header: no references, a @PG line naming the simulation."""
    command = (
        f"numapore simulate --reference {reference} --seed {cfg.seed} --reads {cfg.n_reads} "
        f"--error-rate {cfg.error_rate} --mod-sharpness {cfg.mod_sharpness} "
        f"--mod-missing {cfg.mod_missing} --mod-mode {cfg.mod_mode} --mod-codes {cfg.mod_codes}"
    )
    program = {"ID": "numapore-simulate", "PN": "numapore simulate", "CL": command}
    return {"HD": {"VN": "1.6", "SO": "unknown"}, "PG": [program]}


def simulate(
    reference: Path,
    out: Path,
    cfg: SimConfig,
    processes: int = 1,
    model: PoreModel | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Simulate cfg.n_reads reads from a reference FASTA into folder `out`; return a summary."""
    bad = set(cfg.formats) - set(FORMATS)
    if bad:
        raise ValueError(f"unknown output formats {sorted(bad)}; choose from {FORMATS}")
    if "blow5" in cfg.formats:
        check_compression(cfg.blow5_record_compression, cfg.blow5_signal_compression)
    cfg.mod_model().check()
    ref = Reference(read_fasta(reference))
    if cfg.region is not None and cfg.region[0] not in ref.seqs:
        raise ValueError(f"region chromosome {cfg.region[0]!r} is not in {reference}")
    model = model or load_pore_model()
    out.mkdir(parents=True, exist_ok=True)
    if "multi" in cfg.formats:
        (out / "fast5_multi").mkdir(exist_ok=True)
    (out / "simulation.json").write_text(
        json.dumps({"reference": str(reference), **asdict(cfg)}, indent=2) + "\n"
    )
    if "regions" in cfg.formats:
        regions = layout(cfg.truth_settings(ref))
        (out / "regions.bed").write_text(truth_bed(regions, cfg.group_differs))
    n_batches = -(-cfg.n_reads // cfg.reads_per_file)
    t0 = last = time.monotonic()
    done = samples = 0
    with contextlib.ExitStack() as stack:
        fq = tr = blow5 = modbam = None
        if "fastq" in cfg.formats:
            fq = stack.enter_context(open(out / "reads.fastq", "w"))
        if "truth" in cfg.formats:
            tr = stack.enter_context(open(out / "truth.tsv", "w"))
            tr.write("\t".join(TRUTH_COLUMNS) + "\n")
        if "blow5" in cfg.formats:
            blow5 = stack.enter_context(
                Slow5Writer(
                    out / "reads.blow5",
                    "blow5",
                    cfg.blow5_record_compression,
                    cfg.blow5_signal_compression,
                    FAST5_AUX_FIELDS,
                )
            )
            blow5.add_read_group(read_group_attrs(cfg))
        if "modbam" in cfg.formats:
            modbam = stack.enter_context(
                pysam.AlignmentFile(
                    str(out / "reads.modbam.bam"), "wb", header=modbam_header(cfg, reference)
                )
            )
        for batch in _batches(ref, model, cfg, out, processes, n_batches):
            if fq:
                fq.write(batch.fastq)
            if tr:
                tr.write(batch.truth)
            if blow5 is not None:
                for read_id, blob in batch.blow5:
                    blow5.write_encoded(read_id, blob)
            for read in batch.modbam:
                modbam.write(modbam_record(read, modbam.header))
            done += batch.reads
            samples += batch.samples
            now = time.monotonic()
            if progress and (now - last > 2.0 or done == cfg.n_reads):
                last = now
                rate = done / max(now - t0, 1e-9)
                print(f"simulate: {done}/{cfg.n_reads} reads, {rate:.0f} reads/s", file=sys.stderr)
    seconds = time.monotonic() - t0
    return {"reads": done, "samples": samples, "seconds": seconds, "reads_per_s": done / seconds}


def _batches(
    ref: Reference, model: PoreModel, cfg: SimConfig, out: Path, processes: int, n: int
) -> Iterator[Batch]:
    """Yield batch results in batch order, from a process pool when processes > 1."""
    if processes <= 1 or n <= 1:
        _init_worker(ref, model, cfg, str(out))
        yield from map(_run_batch, range(n))
        return
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    ctx = mp.get_context(method)
    with ctx.Pool(processes, _init_worker, (ref, model, cfg, str(out))) as pool:
        yield from pool.imap(_run_batch, range(n))


def parse_region(text: str) -> tuple[str, int, int]:
    """Parse 'chrom:start-end' (0-based, end exclusive) into a tuple."""
    name, _, span = text.rpartition(":")
    lo, _, hi = span.partition("-")
    if not name or not lo or not hi:
        raise argparse.ArgumentTypeError(f"region must look like chrom:start-end, not {text!r}")
    return name, int(lo.replace(",", "")), int(hi.replace(",", ""))


def main(argv: list[str] | None = None, prog: str = "numapore simulate") -> int:
    """Command-line entry point: numapore simulate --reference REF --out DIR."""
    d = SimConfig()
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument("--reference", type=Path, required=True, help="FASTA (.gz allowed)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--reads", type=int, default=d.n_reads, help="number of reads")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--processes", type=int, default=1, help="worker processes")
    p.add_argument("--mean-length", type=float, default=d.mean_length)
    p.add_argument("--sd-length", type=float, default=d.sd_length)
    p.add_argument("--min-length", type=int, default=d.min_length)
    p.add_argument("--max-length", type=int, default=d.max_length)
    p.add_argument("--region", type=parse_region, help="chrom:start-end, reads only inside")
    p.add_argument("--meth-amplitude", type=float, default=d.meth_amplitude)
    p.add_argument("--meth-period", type=float, default=d.meth_period)
    p.add_argument("--meth-phase", type=float, default=d.meth_phase)
    p.add_argument("--bases-per-second", type=float, default=d.bases_per_second)
    p.add_argument("--sampling-rate", type=float, default=d.sampling_rate)
    p.add_argument("--dwell-shape", type=float, default=d.dwell_shape)
    p.add_argument("--noise-scale", type=float, default=d.noise_scale)
    p.add_argument("--level-jitter", type=float, default=d.level_jitter)
    p.add_argument("--read-shift-sd", type=float, default=d.read_shift_sd)
    p.add_argument("--read-scale-sd", type=float, default=d.read_scale_sd)
    p.add_argument("--error-rate", type=float, default=d.error_rate, help="FASTQ error rate")
    p.add_argument("--reads-per-file", type=int, default=d.reads_per_file)
    p.add_argument(
        "--mod-sharpness", type=float, default=d.mod_sharpness, help="modbam: sd of call log-odds"
    )
    p.add_argument(
        "--mod-missing", type=float, default=d.mod_missing, help="modbam: missing-call rate (?)"
    )
    p.add_argument(
        "--mod-mode", default=d.mod_mode, choices=["?", "."], help="modbam: C+m? or C+m."
    )
    p.add_argument("--mod-codes", default=d.mod_codes, help="modbam: m (5mC) or hm (+5hmC)")
    p.add_argument("--truth-seed", type=int, default=d.truth_seed, help="truth regions' layout")
    p.add_argument("--group-regions", type=int, default=d.group_regions, help="DMRs (truth)")
    p.add_argument(
        "--asm-regions", type=int, default=d.asm_regions, help="allele-specific regions (truth)"
    )
    p.add_argument("--truth-length", type=int, default=d.truth_length, help="bases per region")
    p.add_argument(
        "--truth-difference", type=float, default=d.truth_difference, help="level difference"
    )
    p.add_argument(
        "--group-differs", action="store_true", help="this sample's group differs in the DMRs"
    )
    p.add_argument(
        "--haplotagged", type=float, default=d.haplotagged, help="share of reads with HP/PS"
    )
    p.add_argument(
        "--formats",
        default=",".join(DEFAULT_FORMATS),
        help=f"comma-separated subset of {','.join(FORMATS)}",
    )
    p.add_argument(
        "--blow5-record-compression", default=d.blow5_record_compression, help="none|zlib|zstd"
    )
    p.add_argument(
        "--blow5-signal-compression",
        default=d.blow5_signal_compression,
        help="none|svb-zd (nanopolish 0.14 needs none)",
    )
    p.add_argument("--standard-model", type=Path, default=STANDARD_MODEL)
    p.add_argument("--cpg-model", type=Path, default=CPG_MODEL)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    a = p.parse_args(argv)
    cfg = SimConfig(
        n_reads=a.reads,
        seed=a.seed,
        mean_length=a.mean_length,
        sd_length=a.sd_length,
        min_length=a.min_length,
        max_length=a.max_length,
        region=a.region,
        meth_amplitude=a.meth_amplitude,
        meth_period=a.meth_period,
        meth_phase=a.meth_phase,
        bases_per_second=a.bases_per_second,
        sampling_rate=a.sampling_rate,
        dwell_shape=a.dwell_shape,
        noise_scale=a.noise_scale,
        level_jitter=a.level_jitter,
        read_shift_sd=a.read_shift_sd,
        read_scale_sd=a.read_scale_sd,
        error_rate=a.error_rate,
        reads_per_file=a.reads_per_file,
        formats=tuple(f for f in a.formats.split(",") if f),
        blow5_record_compression=a.blow5_record_compression,
        blow5_signal_compression=a.blow5_signal_compression,
        mod_sharpness=a.mod_sharpness,
        mod_missing=a.mod_missing,
        mod_mode=a.mod_mode,
        mod_codes=a.mod_codes,
        truth_seed=a.truth_seed,
        group_regions=a.group_regions,
        asm_regions=a.asm_regions,
        truth_length=a.truth_length,
        truth_difference=a.truth_difference,
        group_differs=a.group_differs,
        haplotagged=a.haplotagged,
    )
    model = load_pore_model(a.standard_model, a.cpg_model)
    try:
        summary = simulate(a.reference, a.out, cfg, a.processes, model, progress=not a.quiet)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"numapore.simulate: error: {e}", file=sys.stderr)
        return 1
    if not a.quiet:
        print(
            f"simulate: wrote {summary['reads']} reads ({summary['samples']} samples) in "
            f"{summary['seconds']:.1f} s, {summary['reads_per_s']:.0f} reads/s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
