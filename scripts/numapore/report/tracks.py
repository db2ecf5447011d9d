"""The run's bigWig tracks for a genome browser: one IGV session per reference (its FASTA and
every track of its samples, paths relative to the session so the results folder can move), and
the report's page listing a sample's tracks with what each holds."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import quoteattr

import pybigtools

from numapore.base.atomic import atomic_output
from numapore.report.provenance import write_html, write_json

# A track's file name: <sample>.<aligner>.<motif>.<part>.<codes>.bw (numapore.workflow.layout).
PARTS = {"all": "all reads", "hp1": "haplotype 1", "hp2": "haplotype 2"}


def relative(path: str | os.PathLike, start: str | os.PathLike) -> str:
    """path as seen from the folder start (IGV resolves a session's paths from its folder);
    links are kept (the reference is a link in results/references/ to the user's file)."""
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(start))).as_posix()


def write_igv_session(
    reference: str | os.PathLike, tracks: Sequence[str | os.PathLike], output: str | os.PathLike
) -> None:
    """An IGV session (File > Open Session, or `igv session.xml`) showing the reference and the
    tracks, written atomically. Negative values (minus-strand, on request) keep IGV's default
    scale, which spans below zero."""
    folder = Path(output).parent
    resources = "".join(
        f"        <Resource path={quoteattr(relative(t, folder))}/>\n" for t in tracks
    )
    text = (
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        f'<Session genome={quoteattr(relative(reference, folder))} locus="All" version="8">\n'
        f"    <Resources>\n{resources}    </Resources>\n"
        "</Session>\n"
    )
    with atomic_output(output) as tmp:
        tmp.write_text(text)


def track_summary(path: str | os.PathLike) -> tuple[int, float, float]:
    """A track's intervals and their lowest and highest value, from the summary its header
    keeps (no pass over its records): tobigwig writes one interval per position, so the
    bases covered are its intervals."""
    with pybigtools.open(str(path)) as track:
        summary = track.info()["summary"]
    return int(summary["basesCovered"]), summary["min"], summary["max"]


def track_facts(path: str | os.PathLike) -> dict:
    """What a track holds: its name's parts, its intervals and their range of values."""
    sample, aligner, motif, part, codes = Path(path).name.removesuffix(".bw").split(".")
    count, low, high = track_summary(path)
    values = [round(low, 6), round(high, 6)] if count else None
    return {
        "file": Path(path).name,
        "motif": motif,
        "reads": PARTS[part],
        "codes": codes.replace("_", ","),
        "intervals": count,
        "values": values,
    }


def tracks_page(
    sample: str,
    tracks: Sequence[str | os.PathLike],
    session: str | os.PathLike,
    output: str | os.PathLike,
    data: str | os.PathLike,
) -> None:
    """The report's page of a sample's tracks: a row per bigWig (its reads, codes, intervals and
    values) and how to open them in IGV; the same facts as JSON beside it."""
    facts = [track_facts(t) for t in tracks]
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(cell))}</td>"
            for cell in (
                f"results/{sample}/tracks/{f['file']}",
                f["motif"],
                f["reads"],
                f["codes"],
                f["intervals"],
                "no value" if f["values"] is None else f"{f['values'][0]} to {f['values'][1]}",
            )
        )
        + "</tr>"
        for f in facts
    )
    session_path = f"results/tracks/{Path(session).name}"
    body = (
        "<p>bigWig tracks of the bedMethyl (the values <code>modkit bedmethyl tobigwig</code> "
        "writes: percent modified per position, minus-strand values negative when "
        "<code>tracks.negative_strand_values</code> is on).</p>"
        "<table><tr><th>file</th><th>motif</th><th>reads</th><th>codes</th><th>intervals</th>"
        f"<th>values</th></tr>{rows}</table>"
        f"<p>Open them in IGV with <b>File &gt; Open Session</b>: "
        f"<code>{html.escape(session_path)}</code> (the reference and every sample's tracks; "
        f"or from a shell: <code>igv {html.escape(session_path)}</code>).</p>"
    )
    write_html(f"{sample}: tracks", body, Path(output))
    write_json({"sample": sample, "session": session_path, "tracks": facts}, data)
