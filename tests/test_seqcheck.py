"""numapore.inputs.seqcheck on broken copies of the real E. coli reads: each problem is named with
the file, the line and the record; what the tools can use once tidied is tidied, and only then."""

from __future__ import annotations

import gzip
from pathlib import Path

import pysam
import pytest

from numapore.inputs.sheet import InputError
from numapore.inputs import seqcheck
from numapore.inputs.seqcheck import (
    PIECE,
    Parser,
    check_sequences,
    plain_fastq_records,
    stage_sequences,
)


@pytest.fixture(scope="module")
def fasta_text(ecoli_dir) -> str:
    """The 112 real reads as FASTA text."""
    return (ecoli_dir / "reads.fasta").read_text()


@pytest.fixture(scope="module")
def fastq_text(fasta_text) -> str:
    """The same reads as 4-line FASTQ (constant qualities)."""
    out = []
    for record in fasta_text.split(">")[1:]:
        header, *lines = record.split("\n")
        seq = "".join(lines)
        out.append(f"@{header}\n{seq}\n+\n{'5' * len(seq)}\n")
    return "".join(out)


def second_record_line(text: str) -> int:
    """The line number of the second record's header."""
    marker = text[0]
    return text[: text.index("\n" + marker) + 1].count("\n") + 1


def write(path: Path, data: str | bytes) -> Path:
    """Write text or bytes to path; return it."""
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def problem(path: Path, fmt: str, kind: str = "reads") -> str:
    """The message check_sequences raises for path."""
    with pytest.raises(InputError) as err:
        check_sequences(path, kind, fmt)
    return str(err.value)


def test_real_reads_pass_and_are_linked(tmp_path, ecoli_dir, fastq_text):
    check = check_sequences(ecoli_dir / "reads.fasta", "reads", "fasta")
    assert check.records == 112 and not check.needs_copy("reads")
    fastq = write(tmp_path / "r.fastq.gz", gzip.compress(fastq_text.encode()))
    assert check_sequences(fastq, "reads", "fastq.gz").records == 112
    assert "linked" in stage_sequences(fastq, tmp_path / "staged.fastq.gz", "reads", "fastq.gz")
    assert (tmp_path / "staged.fastq.gz").is_symlink()


def test_fastq_cut_mid_sequence(tmp_path, fastq_text):
    cut = fastq_text[: fastq_text.rindex("\n@") + 1 + 60]  # last header + a few bases
    path = write(tmp_path / "cut.fastq", cut)
    assert problem(path, "fastq") == (
        f"reads file {path}, line 446 (record 112): truncated: the last record has no '+' line "
        "and no qualities"
    )


def test_fastq_cut_mid_quality(tmp_path, fastq_text):
    path = write(tmp_path / "cut.fastq", fastq_text[:-100])
    assert "line 448 (record 112): truncated: quality shorter than the sequence" in problem(
        path, "fastq"
    )


def test_quality_shorter_than_sequence(tmp_path, fastq_text):
    lines = fastq_text.split("\n")
    lines[7] = lines[7][:-10]  # record 2's quality
    path = write(tmp_path / "short.fastq", "\n".join(lines))
    assert problem(path, "fastq").endswith(
        "line 8 (record 2): quality shorter than the sequence (2355 < 2365)"
    )


def test_gzip_truncated_and_corrupt(tmp_path, fasta_text):
    data = gzip.compress(fasta_text.encode())
    cut = write(tmp_path / "cut.fasta.gz", data[: len(data) // 2])
    assert "the gzip data is truncated (the file was cut short)" in problem(cut, "fasta.gz")
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    bad = write(tmp_path / "bad.fasta.gz", bytes(damaged))
    assert "the gzip data is corrupt" in problem(bad, "fasta.gz")


def test_compression_must_match_the_name(tmp_path, fasta_text):
    hidden = write(tmp_path / "reads.fasta", gzip.compress(fasta_text.encode()))
    assert problem(hidden, "fasta") == (
        f"{hidden}: is gzip-compressed but its name does not end in .gz; rename it to "
        "reads.fasta.gz"
    )
    plain = write(tmp_path / "reads.fasta.gz", fasta_text)
    assert problem(plain, "fasta.gz") == (
        f"{plain}: its name ends in .gz but it is not gzip-compressed; remove the .gz suffix"
    )


def test_rna_alphabet_is_refused(tmp_path, fasta_text):
    path = write(tmp_path / "rna.fasta", fasta_text.replace("T", "U"))
    assert problem(path, "fasta") == (
        f"reads file {path}, line 2 (record 1): RNA alphabet (U): nanopolish calls CpG "
        "methylation on DNA reads"
    )


def test_header_without_a_name(tmp_path, fasta_text):
    line = second_record_line(fasta_text)
    text = fasta_text.split("\n")
    text[line - 1] = "> " + text[line - 1][1:].split(maxsplit=1)[-1]
    path = write(tmp_path / "noname.fasta", "\n".join(text))
    assert problem(path, "fasta").endswith(f"line {line} (record 2): header without a name")


def test_very_long_names(tmp_path, fasta_text, ecoli_dir):
    read = write(tmp_path / "long.fasta", ">" + "r" * 300 + fasta_text[fasta_text.index("\n") :])
    assert problem(read, "fasta").endswith(
        "line 1 (record 1): name longer than 254 characters (BAM files hold read names of up to "
        "254 characters)"
    )
    genome = (ecoli_dir / "region.fa").read_text().split("\n", 1)[1]
    contig = write(tmp_path / "long.fa", ">" + "c" * (PIECE + 5000) + "\n" + genome)
    assert problem(contig, "fasta", "reference").endswith(
        "line 1 (record 1): name longer than 255 characters (minimap2's index keeps names of "
        "up to 255 characters)"
    )
    # minimap2's limit exactly: 255 characters pass, 256 do not
    write(contig, ">" + "c" * 255 + "\n" + genome)
    assert check_sequences(contig, "reference", "fasta").records == 1
    write(contig, ">" + "c" * 256 + "\n" + genome)
    assert "name longer than 255 characters" in problem(contig, "fasta", "reference")
    # a long description is no problem
    described = write(tmp_path / "described.fa", ">tig " + "d" * (3 * PIECE) + "\n" + genome)
    assert check_sequences(described, "reference", "fasta").records == 1


def test_empty_sequences_are_counted(tmp_path, fastq_text, ecoli_dir):
    """Records with an empty sequence: all counted, the first named, in the user's file."""
    records = fastq_text.split("\n")
    for record in (3, 10, 50):  # empty the sequence and quality lines of three records
        records[4 * record + 1] = records[4 * record + 3] = ""
    reads = write(tmp_path / "zero.fastq", "\n".join(records))
    name = records[12][1:]
    assert problem(reads, "fastq") == (
        f"reads file {reads}: 3 records have an empty sequence (the first: read '{name}', "
        "record 4, line 13); a read without bases cannot be aligned or called: remove them"
    )
    genome = (ecoli_dir / "region.fa").read_text()
    after = genome.count("\n") + 1
    for text, where in [
        (">empty\n" + genome, "record 1, line 1"),  # first, last (no line end), between
        (genome + ">empty", f"record 2, line {after}"),
        (genome + ">empty\n>next\nACGT\n", f"record 2, line {after}"),
    ]:
        reference = write(tmp_path / "ref.fa", text)
        assert problem(reference, "fasta", "reference") == (
            f"reference file {reference}: 1 record has an empty sequence (contig 'empty', "
            f"{where}); samtools faidx cannot index an empty contig: remove it"
        )


def test_tidied_copy_for_lowercase_cr_and_blank_lines(tmp_path, fasta_text, fastq_text):
    """Lowercase bases, CR-only line ends and a leading blank line: a copy the tools read as
    the original reads (pysam), uppercased; quality and names unchanged."""
    # names and qualities must survive: lowercase only the sequences
    records = fastq_text.split("\n")
    for i in range(1, len(records), 4):
        records[i] = records[i].lower()
    messy = "\r" + "\r".join(records)
    path = write(tmp_path / "messy.fastq", messy)
    check = check_sequences(path, "reads", "fastq")
    assert check.lowercase and check.cr_line_ends and check.blank_lines
    staged = tmp_path / "staged.fastq"
    said = stage_sequences(path, staged, "reads", "fastq")
    assert said == (
        f"{path}: 112 records, copied with lowercase bases uppercased, CR line ends made LF, "
        "blank lines removed"
    )
    assert staged.read_text() == fastq_text
    with pysam.FastxFile(str(staged)) as handle:
        assert sum(1 for _ in handle) == 112
    # a reference keeps its case (soft-masking; nanopolish reads it) but gets LF line ends
    ref = write(tmp_path / "ref.fa", fasta_text.lower().replace("\n", "\r\n"))
    check = check_sequences(ref, "reference", "fasta")
    assert check.needs_copy("reference") and check.cr_line_ends
    lower = write(tmp_path / "lower.fa", fasta_text.lower())
    assert not check_sequences(lower, "reference", "fasta").needs_copy("reference")


# Short reads: a plain 4-line FASTQ is checked a block at a time (plain_fastq_records); anything
# else goes to the parser. Both must give the same answer on every file.
PLAIN = "@r1/1 c\nACGTN\n+\n@IIII\n@r2/1\nGGCA\n+r2\nIIII\n@r3\nT\n+\n5\n"
VARIANTS = {
    "plain": (PLAIN, 3),
    "lowercase bases": (PLAIN.replace("GGCA", "ggca"), None),
    "CRLF": (PLAIN.replace("\n", "\r\n"), None),
    "blank line": (PLAIN + "\n", None),
    "header without a name": (PLAIN.replace("@r2/1", "@ r2"), None),
    "name too long": (PLAIN.replace("@r3", "@" + "x" * 300), None),
    "sequence over two lines": (PLAIN.replace("ACGTN\n+\n@IIII", "ACG\nTN\n+\n@IIII"), None),
    "no final line end": (PLAIN[:-1], None),
    "truncated": (PLAIN + "@r4\nACGT\n", None),
    "zero-length read": (PLAIN + "@r4\n\n+\n\n", None),
    "RNA": (PLAIN.replace("GGCA", "GGUA"), None),
    "short quality": (PLAIN.replace("+r2\nIIII", "+r2\nIII"), None),
}


def parser_answer(path: Path) -> tuple:
    """What the line parser alone says of a FASTQ: its check, or its message."""
    parser = Parser(path, "reads", "fastq")
    try:
        for _ in parser.pieces():
            pass
    except InputError as err:
        return ("refused", str(err))
    return ("accepted", parser.check)


@pytest.mark.parametrize("case", VARIANTS)
def test_plain_fastq_path_agrees_with_the_parser(tmp_path, case):
    text, plain = VARIANTS[case]
    for path in (write(tmp_path / "r.fastq", text), write(tmp_path / "r.fastq.gz", text)):
        path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
        assert plain_fastq_records(path, "reads") == plain
        try:
            answer = ("accepted", check_sequences(path, "reads", "fastq"))
        except InputError as err:
            answer = ("refused", str(err))
        assert answer == parser_answer(path)
    assert (parser_answer(tmp_path / "r.fastq")[0] == "refused") == (
        case
        in (
            "header without a name",
            "name too long",
            "truncated",
            "RNA",
            "short quality",
            "zero-length read",
        )
    )


def test_plain_fastq_path_over_blocks(tmp_path, monkeypatch):
    # Records cut across block boundaries, and a problem in a later block: the parser's word.
    monkeypatch.setattr(seqcheck, "FAST_BLOCK", 7)
    path = write(tmp_path / "r.fastq", PLAIN * 40)
    assert plain_fastq_records(path, "reads") == 120
    write(path, PLAIN * 30 + PLAIN.replace("GGCA", "GGXA"))
    assert plain_fastq_records(path, "reads") is None
    assert "line 366 (record 92): 'X' is not a nucleotide code" in problem(path, "fastq")
