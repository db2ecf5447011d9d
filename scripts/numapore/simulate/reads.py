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

Why one ~700-line module: the read model (sequence, methylation, signal) and its three writers
(FASTQ + truth, FAST5 single/multi, BLOW5) share SimRead and SimConfig, and the process-pool
driver runs them together; the pore model is apart (numapore.simulate.poremodel).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import multiprocessing as mp
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pysam

from numapore.base.textfiles import open_maybe_gzip
from numapore.simulate.modbam import ModCallModel, ModRead, cpg_calls, mm_tag, modbam_record
from numapore.simulate.truth import TruthSettings, apply, layout, truth_bed
from numapore.simulate.poremodel import (
    CPG_MODEL,
    STANDARD_MODEL,
    PoreModel,
    encode,
    load_pore_model,
)

FORMATS = ("fastq", "truth", "single", "multi", "blow5", "modbam", "regions")
SIGNAL_FORMATS = ("fastq", "single", "multi", "blow5")  # the R9.4 read model's outputs
DEFAULT_FORMATS = ("fastq", "truth", "single", "multi")
TRUTH_COLUMNS = ("read_id", "chromosome", "position", "strand", "methylated")
CLUSTER_GAP = 10  # nanopolish call-methylation joins CpGs at most this far apart into one group
_COMPLEMENT = bytes.maketrans(b"ACGTNacgtn", b"TGCANtgcan")
_BASE_BYTES = np.frombuffer(b"ACGT", dtype=np.uint8)


@dataclass(frozen=True)
class SimConfig:
    """All parameters of a simulation; the defaults mimic an R9.4 MinION run at 450 bases/s."""

    n_reads: int = 1000
    seed: int = 1
    mean_length: float = 5000.0
    sd_length: float = 3000.0
    min_length: int = 500
    max_length: int = 100_000
    region: tuple[str, int, int] | None = None  # draw reads only inside this window
    meth_amplitude: float = 0.6
    meth_period: float = 10_000.0
    meth_phase: float = 0.0
    bases_per_second: float = 450.0
    sampling_rate: float = 4000.0
    dwell_shape: float = 2.5  # gamma shape of (dwell - 1 sample)
    noise_scale: float = 0.55  # per-sample noise sd = noise_scale x model sd (0.55 -> ~1.8 pA)
    level_jitter: float = 0.3  # per-base level offset sd = level_jitter x model sd
    read_shift_sd: float = 2.0  # pA, per-read offset of all levels
    read_scale_sd: float = 0.03  # per-read relative scale of all levels
    digitisation: float = 8192.0
    range_pa: float = 1444.86
    error_rate: float = 0.0  # FASTQ only: substitutions, insertions, deletions in equal parts
    reads_per_file: int = 1000
    formats: tuple[str, ...] = field(default=DEFAULT_FORMATS)
    blow5_record_compression: str = "zlib"  # none | zlib | zstd
    blow5_signal_compression: str = "none"  # none | svb-zd (nanopolish 0.14 reads only none)
    # modbam: the basecaller's 5mC calls (numapore.simulate.modbam.ModCallModel)
    mod_sharpness: float = ModCallModel.sharpness
    mod_missing: float = ModCallModel.missing
    mod_mode: str = ModCallModel.mode
    mod_codes: str = ModCallModel.codes
    # known differential methylation (numapore.simulate.truth): regions laid out from
    # truth_seed, where this sample's group differs (group_differs) or its haplotypes do
    truth_seed: int = 0
    group_regions: int = 0
    asm_regions: int = 0
    truth_length: int = 1000
    truth_difference: float = 0.6
    group_differs: bool = False
    haplotagged: float = 0.0  # share of reads with HP/PS tags (modbam)

    @property
    def haplotypes(self) -> bool:
        """Whether molecules come from two haplotypes (drawn, and tagged on some reads)."""
        return self.asm_regions > 0 or self.haplotagged > 0

    def truth_settings(self, ref: Reference) -> TruthSettings:
        """What the truth regions' layout depends on: its settings and the reads' window."""
        window = self.region or (ref.names[0], 0, int(ref.lengths[0]))
        if self.region is not None:
            window = (window[0], window[1], min(window[2], len(ref.seqs[window[0]])))
        return TruthSettings(
            self.truth_seed,
            self.group_regions,
            self.asm_regions,
            self.truth_length,
            self.truth_difference,
            window,
        )

    def mod_model(self) -> ModCallModel:
        """The noise model of the modBAM reads' calls."""
        return ModCallModel(self.mod_sharpness, self.mod_missing, self.mod_mode, self.mod_codes)

    def run_id(self) -> str:
        """Return a 40-hex run id derived from the seed (as MinKNOW's run_id looks)."""
        return hashlib.sha1(f"numapore-sim-{self.seed}".encode()).hexdigest()


@dataclass
class SimRead:
    """One simulated read: its origin, sequences, truth and digitised signal."""

    index: int
    read_id: str
    chromosome: str
    start: int
    end: int
    strand: str
    sequence: str  # true read sequence, 5'->3' as sequenced
    called: str  # basecalled sequence (sequence with simulated errors)
    quality: str
    cpg_positions: np.ndarray  # forward-strand C positions of the CpGs inside the read
    methylated: np.ndarray  # bool per CpG
    signal: np.ndarray  # int16 raw
    offset: float
    digitisation: float
    range_pa: float
    sampling_rate: float
    channel: int
    start_mux: int
    start_time: int
    median_before: float


class Reference:
    """Reference sequences (upper-case bytes) with their CpG positions."""

    def __init__(self, sequences: dict[str, bytes]) -> None:
        """Index the sequences and their forward-strand CpG C positions."""
        self.names = list(sequences)
        self.seqs = sequences
        self.cpgs = {n: find_cpgs(s) for n, s in sequences.items()}
        self.lengths = np.array([len(sequences[n]) for n in self.names], dtype=np.int64)


def read_fasta(path: Path) -> dict[str, bytes]:
    """Read a (optionally gzipped) FASTA into {name: upper-case sequence bytes}."""
    seqs: dict[str, list[bytes]] = {}
    name = None
    with open_maybe_gzip(path, "rb") as fh:
        for line in fh:
            line = line.strip()
            if line.startswith(b">"):
                name = line[1:].split()[0].decode()
                seqs[name] = []
            elif name is not None and line:
                seqs[name].append(line.upper())
    if not seqs:
        raise ValueError(f"{path}: no FASTA records")
    return {n: b"".join(parts) for n, parts in seqs.items()}


def find_cpgs(seq: bytes) -> np.ndarray:
    """Return the 0-based positions of the C of every CG in an upper-case sequence."""
    a = np.frombuffer(seq, dtype=np.uint8)
    return np.flatnonzero((a[:-1] == ord("C")) & (a[1:] == ord("G"))).astype(np.int64)


def methylation_fraction(
    positions: np.ndarray, amplitude: float = 0.6, period: float = 10_000.0, phase: float = 0.0
) -> np.ndarray:
    """Return the true methylated fraction of the CpGs at these forward C positions."""
    x = 0.5 + amplitude * np.sin(
        2 * np.pi * np.asarray(positions, dtype=np.float64) / period + phase
    )
    return np.clip(x, 0.0, 1.0)


def reverse_complement(seq: bytes) -> bytes:
    """Return the reverse complement of a DNA byte string."""
    return seq.translate(_COMPLEMENT)[::-1]


def _read_length(rng: np.random.Generator, cfg: SimConfig, limit: int) -> int:
    """Draw a log-normal read length with the configured mean/sd within [min, max, limit]."""
    sigma2 = np.log1p((cfg.sd_length / cfg.mean_length) ** 2)
    mu = np.log(cfg.mean_length) - sigma2 / 2
    hi = min(cfg.max_length, limit)
    lo = min(cfg.min_length, hi)
    for _ in range(100):  # redraw rather than clip so there is no pile-up at the bounds
        n = int(rng.lognormal(mu, np.sqrt(sigma2)))
        if lo <= n <= hi:
            return n
    return int(np.clip(n, lo, hi))


def _dwells(rng: np.random.Generator, cfg: SimConfig, n: int) -> np.ndarray:
    """Return integer samples per 6-mer (>= 1): 1 + gamma, mean sampling_rate/bases_per_second."""
    mean = cfg.sampling_rate / cfg.bases_per_second
    d = 1.0 + rng.gamma(cfg.dwell_shape, (mean - 1.0) / cfg.dwell_shape, n)
    # Floor of the running sum keeps the total unbiased and every count >= 1.
    edges = np.floor(np.concatenate(([0.0], np.cumsum(d)))).astype(np.int64)
    return np.diff(edges)


def _basecall(rng: np.random.Generator, codes: np.ndarray, rate: float) -> np.ndarray:
    """Return the codes with substitutions, deletions and insertions at a total rate."""
    return basecall_errors(rng, codes, rate)[0]


def basecall_errors(
    rng: np.random.Generator, codes: np.ndarray, rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """Return the codes with substitutions, deletions and insertions at a total rate, and where
    each true base went in them (-1: deleted; a substituted base keeps its place)."""
    if rate <= 0:
        return codes, np.arange(codes.size)
    r = rng.random(codes.size)
    third = rate / 3
    out = codes.copy()
    sub = r < third
    out[sub] = (out[sub] + rng.integers(1, 4, int(sub.sum()))) % 4
    copies = np.ones(codes.size, dtype=np.int64)
    copies[(r >= third) & (r < 2 * third)] = 0  # deletion
    ins = (r >= 2 * third) & (r < rate)
    copies[ins] = 2  # the base plus one random inserted base after it
    rep = np.repeat(out, copies)
    ends = np.cumsum(copies)
    rep[ends[ins] - 1] = rng.integers(0, 4, int(ins.sum()))
    origin = np.where(copies > 0, ends - copies, -1)
    return rep, origin


def _choose_origin(
    rng: np.random.Generator, ref: Reference, cfg: SimConfig
) -> tuple[str, int, int]:
    """Pick chromosome, start and end of a read (uniform over bases, or inside cfg.region)."""
    if cfg.region is not None:
        name, lo, hi = cfg.region
        hi = min(hi, len(ref.seqs[name]))
    else:
        name = ref.names[int(rng.choice(len(ref.names), p=ref.lengths / ref.lengths.sum()))]
        lo, hi = 0, len(ref.seqs[name])
    length = _read_length(rng, cfg, hi - lo)
    start = lo + int(rng.integers(0, hi - lo - length + 1))
    return name, start, start + length


@dataclass
class Molecule:
    """A read's molecule: origin, true bases and CpG methylation (what every read model shares)."""

    read_id: str
    chromosome: str
    start: int
    end: int
    strand: str
    codes: np.ndarray  # true bases 5'->3' as sequenced, 0-3 (ACGT)
    cpg_positions: np.ndarray  # forward-strand C positions of the CpGs inside the read
    methylated: np.ndarray  # bool per CpG
    read_c: np.ndarray  # per CpG, the index in codes of the read's own C of it
    haplotype: int = 0  # 1 or 2 when the sample has haplotypes (cfg.haplotypes), else 0
    tagged: bool = False  # the read carries HP/PS tags


def draw_molecule(rng: np.random.Generator, ref: Reference, cfg: SimConfig) -> Molecule:
    """Draw a read's molecule: id, origin, strand, bases and the methylation of its CpGs."""
    read_id = str(uuid.UUID(bytes=rng.bytes(16), version=4))
    chrom, start, end = _choose_origin(rng, ref, cfg)
    strand = "+" if rng.random() < 0.5 else "-"
    fwd = ref.seqs[chrom][start:end]
    seq = fwd if strand == "+" else reverse_complement(fwd)
    codes = encode(seq)
    bad = codes > 3
    if bad.any():  # N and IUPAC codes: the molecule has some real base there
        codes[bad] = rng.integers(0, 4, int(bad.sum()))

    # CpGs wholly inside the read; one uniform per nanopolish-style cluster.
    cpgs = ref.cpgs[chrom]
    sites = cpgs[np.searchsorted(cpgs, start) : np.searchsorted(cpgs, end - 1)]
    cluster = np.concatenate(([0], np.cumsum(np.diff(sites) > CLUSTER_GAP))).astype(np.int64)
    u = rng.random(int(cluster[-1]) + 1 if sites.size else 0)
    frac = methylation_fraction(sites, cfg.meth_amplitude, cfg.meth_period, cfg.meth_phase)
    haplotype, tagged = 0, False
    if cfg.haplotypes:  # drawn only then: samples without keep their reads byte for byte
        haplotype = 1 + int(rng.random() < 0.5)
        tagged = bool(rng.random() < cfg.haplotagged)
    regions = layout(cfg.truth_settings(ref))
    if regions:
        frac = apply(regions, chrom, sites, frac, haplotype, cfg.group_differs)
    meth = u[cluster] < frac if sites.size else np.zeros(0, dtype=bool)
    # The read's own C of each CpG: forward C for '+', the C opposite the forward G for '-'.
    mpos = sites - start if strand == "+" else end - 2 - sites
    return Molecule(read_id, chrom, start, end, strand, codes, sites, meth, mpos, haplotype, tagged)


def simulate_read(ref: Reference, model: PoreModel, cfg: SimConfig, index: int) -> SimRead:
    """Simulate read number `index`; the result depends only on (cfg, index)."""
    rng = np.random.default_rng([cfg.seed, index])
    mol = draw_molecule(rng, ref, cfg)
    codes = mol.codes
    mask = np.zeros(codes.size, dtype=bool)
    mask[mol.read_c[mol.methylated]] = True

    # Run metadata first and basecall errors last, so FASTQ error settings leave the signal alone.
    channel, mux = int(rng.integers(1, 513)), int(rng.integers(1, 5))
    start_time = int(index * 40_000 + rng.integers(0, 4000))
    median_before = float(np.round(rng.normal(225.0, 10.0), 6))
    signal, offset = _signal(rng, model, cfg, codes, mask)
    called = _basecall(rng, codes, cfg.error_rate)
    qual = int(min(40, round(-10 * np.log10(max(cfg.error_rate, 1e-4)))))
    return SimRead(
        index=index,
        read_id=mol.read_id,
        chromosome=mol.chromosome,
        start=mol.start,
        end=mol.end,
        strand=mol.strand,
        sequence=_BASE_BYTES[codes].tobytes().decode(),
        called=_BASE_BYTES[called].tobytes().decode(),
        quality=chr(33 + qual) * called.size,
        cpg_positions=mol.cpg_positions,
        methylated=mol.methylated,
        signal=signal,
        offset=offset,
        digitisation=cfg.digitisation,
        range_pa=cfg.range_pa,
        sampling_rate=cfg.sampling_rate,
        channel=channel,
        start_mux=mux,
        start_time=start_time,
        median_before=median_before,
    )


def _signal(
    rng: np.random.Generator, model: PoreModel, cfg: SimConfig, codes: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, float]:
    """Return the digitised raw signal (int16) of a read and its channel offset."""
    idx = model.kmer_indices(codes)
    levels = model.levels_for(codes, mask, idx)
    sd = model.sd[idx]
    levels += rng.standard_normal(idx.size) * (cfg.level_jitter * sd)
    scale = 1.0 + cfg.read_scale_sd * rng.standard_normal()
    shift = cfg.read_shift_sd * rng.standard_normal()
    counts = _dwells(rng, cfg, idx.size)
    offset = float(rng.integers(0, 31))
    # ONT convention: pA = (raw + offset) * range / digitisation; work in raw units from here.
    per_pa = cfg.digitisation / cfg.range_pa
    raw = np.repeat((levels * scale + shift) * per_pa - offset, counts)
    noise = rng.standard_normal(raw.size, dtype=np.float32)
    if np.all(sd == sd[0]):  # tombo's sd is one constant: skip a second repeat
        noise *= np.float32(cfg.noise_scale * sd[0] * per_pa)
    else:
        noise *= np.repeat((cfg.noise_scale * per_pa) * sd, counts).astype(np.float32)
    raw += noise
    np.rint(raw, out=raw)
    return np.clip(raw, -32768, 32767).astype(np.int16), offset


def basecalled_read(ref: Reference, cfg: SimConfig, index: int) -> tuple[ModRead, Molecule]:
    """Read number `index` as a basecaller (R10.4.1, dorado-like) writes it: the molecule of
    the signal read of that index (same id, origin and methylation), its basecalls with errors
    at cfg.error_rate and its 5mC calls at the CpGs of the basecalls (cfg.mod_model())."""
    rng = np.random.default_rng([cfg.seed, index])
    mol = draw_molecule(rng, ref, cfg)
    called, origin = basecall_errors(rng, mol.codes, cfg.error_rate)
    methylated_at = np.zeros(called.size, dtype=bool)
    where = origin[mol.read_c[mol.methylated]]
    methylated_at[where[where >= 0]] = True
    model = cfg.mod_model()
    sites, ml, ml_h = cpg_calls(rng, called, methylated_at, model)
    qual = int(min(40, round(-10 * np.log10(max(cfg.error_rate, 1e-4)))))
    read = ModRead(
        read_id=mol.read_id,
        sequence=_BASE_BYTES[called].tobytes().decode(),
        quality=chr(33 + qual) * called.size,
        mm=mm_tag(called, sites, model.mode, model.codes),
        ml=ml,
        ml_h=ml_h,
        call_positions=sites,
        call_truth=methylated_at[sites],
        haplotype=mol.haplotype if mol.tagged else 0,
        phase_set=cfg.truth_settings(ref).window[1] + 1,
    )
    return read, mol


# ---------------------------------------------------------------------------- FAST5 writing


_SCALAR = h5py.h5s.create(h5py.h5s.SCALAR)
_VLEN_ASCII = h5py.string_dtype("ascii")


def _num_attr(obj: h5py.Group, name: str, value: np.generic) -> None:
    """Write a scalar numeric attribute (low-level API: ~2x faster than obj.attrs[...])."""
    arr = np.asarray(value)
    attr = h5py.h5a.create(obj.id, name.encode(), h5py.h5t.py_create(arr.dtype), _SCALAR)
    attr.write(arr)


def _str_attr(obj: h5py.Group, name: str, value: str, variable: bool) -> None:
    """Write an ASCII string attribute: variable-length, or fixed-length null-terminated."""
    data = value.encode("ascii")
    if variable:
        tid = h5py.h5t.py_create(_VLEN_ASCII, logical=True)
        arr = np.array(data, dtype=_VLEN_ASCII)
    else:
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(len(data) + 1)
        tid.set_strpad(h5py.h5t.STR_NULLTERM)
        arr = np.array(data, dtype=f"S{len(data) + 1}")
    h5py.h5a.create(obj.id, name.encode(), tid, _SCALAR).write(arr)


def _tracking(cfg: SimConfig) -> dict[str, str]:
    """Return tracking_id attributes in the style of a 2016 MinKNOW R9.4 run."""
    run_id = cfg.run_id()
    return {
        "asic_id": "0",
        "asic_temp": "30.0",
        "device_id": "MNSIM",
        "exp_script_name": "numapore/simulate",
        "exp_script_purpose": "sequencing_run",
        "exp_start_time": "1481657610",
        "flow_cell_id": "SIM000",
        "heatsink_temp": "34.0",
        "hostname": "numapore-sim",
        "protocol_run_id": str(uuid.UUID(run_id[:32])),
        "run_id": run_id,
        "version": "1.1.21",
    }


def _context() -> dict[str, str]:
    """Return context_tags attributes of a genomic DNA run at 4 kHz."""
    return {
        "experiment_kit": "genomic_dna",
        "filename": "numapore_sim",
        "sample_frequency": "4000",
        "user_filename_input": "numapore_sim",
    }


def _write_meta(
    grp: h5py.Group,
    read: SimRead,
    cfg: SimConfig,
    variable: bool,
    shared: h5py.Group | None = None,
) -> None:
    """Write channel_id, context_tags and tracking_id under grp (the last two linked to shared)."""
    ch = grp.create_group("channel_id")
    _str_attr(ch, "channel_number", str(read.channel), variable)
    _num_attr(ch, "digitisation", np.float64(read.digitisation))
    _num_attr(ch, "offset", np.float64(read.offset))
    _num_attr(ch, "range", np.float64(read.range_pa))
    _num_attr(ch, "sampling_rate", np.float64(read.sampling_rate))
    if shared is not None:
        # As MinKNOW does in multi-read files: one copy of the run's groups, hard-linked.
        grp["context_tags"] = shared["context_tags"]
        grp["tracking_id"] = shared["tracking_id"]
        return
    for name, attrs in (("context_tags", _context()), ("tracking_id", _tracking(cfg))):
        g = grp.create_group(name)
        for k, v in attrs.items():
            _str_attr(g, k, v, variable)


def _write_raw_attrs(grp: h5py.Group, read: SimRead, multi: bool) -> None:
    """Write the read attributes (duration, read_id, ...) that ONT puts on the raw read group."""
    _num_attr(grp, "duration", np.uint32(read.signal.size))
    _num_attr(grp, "median_before", np.float64(read.median_before))
    _str_attr(grp, "read_id", read.read_id, variable=False)
    # Integer widths as in real files: single-read (MinKNOW 1.x) vs multi-read (2.x).
    _num_attr(grp, "read_number", np.int32(read.index) if multi else np.uint32(read.index))
    _num_attr(grp, "start_mux", np.uint8(read.start_mux) if multi else np.int32(read.start_mux))
    _num_attr(grp, "start_time", np.uint64(read.start_time))


def single_fast5_name(read: SimRead) -> str:
    """Return the MinKNOW-style file name of a single-read FAST5."""
    return f"numapore_sim_ch{read.channel}_read{read.index}_strand.fast5"


def write_single_fast5(path: Path, read: SimRead, cfg: SimConfig) -> None:
    """Write one read as a single-read FAST5 (file_version 0.6 layout, gzip signal)."""
    with h5py.File(path, "w") as f:
        _num_attr(f, "file_version", np.float64(0.6))
        rg = f.create_group(f"Raw/Reads/Read_{read.index}")
        _write_raw_attrs(rg, read, multi=False)
        rg.create_dataset(
            "Signal",
            data=read.signal,
            compression="gzip",
            compression_opts=1,
            chunks=(min(read.signal.size, 20000),),
        )
        _write_meta(f.create_group("UniqueGlobalKey"), read, cfg, variable=True)


def write_multi_fast5(path: Path, reads: list[SimRead], cfg: SimConfig) -> None:
    """Write reads as one multi-read FAST5 (file_version 2.2: read_<id>/Raw/Signal, ...)."""
    with h5py.File(path, "w") as f:
        _str_attr(f, "file_type", "multi-read", variable=False)
        _str_attr(f, "file_version", "2.2", variable=False)
        first = None
        for read in reads:
            g = f.create_group(f"read_{read.read_id}")
            _str_attr(g, "run_id", cfg.run_id(), variable=False)
            _str_attr(g, "pore_type", "not_set", variable=False)
            raw = g.create_group("Raw")
            _write_raw_attrs(raw, read, multi=True)
            raw.create_dataset(
                "Signal",
                data=read.signal,
                compression="gzip",
                compression_opts=1,
                chunks=(max(read.signal.size, 1),),
            )
            _write_meta(g, read, cfg, variable=False, shared=first)
            if first is None:
                first = g


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


def _slow5() -> Any:
    """Return the numapore.signal.slow5 module (BLOW5 writer, written separately) or raise."""
    try:
        from numapore.signal import slow5
    except ImportError as e:
        raise RuntimeError("BLOW5 output needs numapore.signal.slow5, which is missing") from e
    for name in ("Record", "Slow5Writer", "encode_record", "FAST5_AUX_FIELDS", "check_compression"):
        if not hasattr(slow5, name):
            raise RuntimeError(f"numapore.signal.slow5 lacks {name}: cannot write BLOW5")
    return slow5


def slow5_record(read: SimRead) -> Any:
    """Return a read as a numapore.signal.slow5.Record with the aux fields slow5tools writes."""
    return _slow5().Record(
        read_id=read.read_id,
        read_group=0,
        digitisation=read.digitisation,
        offset=read.offset,
        range=read.range_pa,
        sampling_rate=read.sampling_rate,
        signal=read.signal,
        aux={
            "start_time": read.start_time,
            "read_number": read.index,
            "start_mux": read.start_mux,
            "median_before": read.median_before,
            "channel_number": str(read.channel),
        },
    )


def read_group_attrs(cfg: SimConfig) -> dict[str, str]:
    """Return the BLOW5 read-group header attributes (as slow5tools takes them from FAST5)."""
    return {
        "file_type": "multi-read",
        "file_version": "2.2",
        "pore_type": "not_set",
        **_tracking(cfg),
        **_context(),
    }


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
        slow5 = _slow5()
        blobs = [
            (
                r.read_id,
                slow5.encode_record(
                    slow5_record(r),
                    slow5.FAST5_AUX_FIELDS,
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
        _slow5().check_compression(cfg.blow5_record_compression, cfg.blow5_signal_compression)
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
            slow5 = _slow5()
            blow5 = stack.enter_context(
                slow5.Slow5Writer(
                    out / "reads.blow5",
                    "blow5",
                    cfg.blow5_record_compression,
                    cfg.blow5_signal_compression,
                    slow5.FAST5_AUX_FIELDS,
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
