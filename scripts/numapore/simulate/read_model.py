"""The simulated reads themselves: the simulation's settings (SimConfig), the reference and its
CpGs, the molecules drawn from it (origin, strand, methylation truth), and what is made of a
molecule: an R9.4 raw-signal read (SimRead: sequence, basecalls, digitised signal) or a
basecaller's read with its 5mC calls (numapore.simulate.modbam). The model is described in
numapore.simulate.reads, which runs it and writes the outputs.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from numapore.base.textfiles import open_maybe_gzip
from numapore.simulate.modbam import ModCallModel, ModRead, cpg_calls, mm_tag
from numapore.simulate.poremodel import PoreModel, encode
from numapore.simulate.truth import TruthSettings, apply, layout

FORMATS = ("fastq", "truth", "single", "multi", "blow5", "modbam", "regions")
SIGNAL_FORMATS = ("fastq", "single", "multi", "blow5")  # the R9.4 read model's outputs
DEFAULT_FORMATS = ("fastq", "truth", "single", "multi")
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
