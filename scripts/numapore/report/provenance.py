"""The provenance page of one sample's run (host file, the strategy of each step, every process's
command line and NUMA policy, tool versions), and the small HTML and JSON writers the report's
pages share. Apart from the figures: a provenance job imports no plotting or table library."""

from __future__ import annotations

import html
import json
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from numapore.base.atomic import atomic_output
from numapore.compare.tune_pileup import label
from numapore.execution.versions import tool_versions


def write_json(data: Mapping[str, Any], output: str | os.PathLike) -> None:
    """Write a figure's source data as JSON, atomically."""
    with atomic_output(output) as tmp:
        tmp.write_text(json.dumps(data, indent=1) + "\n")


def write_html(title: str, body: str, output: Path) -> None:
    """A small self-contained HTML page (the report shows it in a frame), written atomically."""
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;font-size:13px} table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}"
        "pre{white-space:pre-wrap;background:#f6f6f6;padding:4px;margin:0}"
        f"</style></head><body><h2>{html.escape(title)}</h2>{body}</body></html>\n"
    )
    with atomic_output(output) as tmp:
        tmp.write_text(page)


def provenance_page(
    name: str,
    host_file: str | os.PathLike,
    records: Mapping[str, Sequence[str | os.PathLike]],
    output: Path,
    data: Path,
    overrides: Mapping[str, str] | None = None,
    pileup_tuning: str | os.PathLike | None = None,
) -> None:
    """Provenance of one sample's run: the host file and the settings given on the command
    line over it (overrides: --config io_mode=, strategy=), per step (records: step -> its
    jobs' *.run.json) the strategy, each process's command line and NUMA policy, the host
    tuning behind the I/O mode and the strategy when one chose them; the pileup's setting
    when host tuning chose it (pileup_tuning: its record, numapore.compare.tune_pileup); tool
    versions. Nothing that changes from run to run (times), so a rerun writes the same bytes."""
    host_text = Path(host_file).read_text()
    overrides = dict(overrides or {})
    steps = {}
    for step, paths in records.items():
        steps[step] = []
        for path in paths:
            rec = json.loads(Path(path).read_text())
            steps[step].append(
                {
                    "record": str(path),
                    "strategy": rec.get("strategy"),
                    "io_mode": rec.get("io_mode"),
                    "overrides": rec.get("overrides", {}),
                    "why": rec.get("reasons", {}).get("why"),
                    "threads": rec.get("threads"),
                    "tuning": rec.get("tuning"),
                    "strategy_tuning": rec.get("strategy_tuning"),
                    "processes": [
                        {k: p.get(k) for k in ("shard", "node", "threads", "command", "policy")}
                        for p in rec.get("processes", [])
                    ],
                }
            )
    versions = tool_versions()
    pileup = None
    if pileup_tuning:
        tuned = json.loads(Path(pileup_tuning).read_text())
        pileup = {"record": str(pileup_tuning)} | {
            k: tuned.get(k) for k in ("measured", "pileup", "why", "walls", "candidates")
        }
    numbers = {
        "host_file": str(host_file),
        "overrides": overrides,
        "steps": steps,
        "pileup_tuning": pileup,
        "tool_versions": versions,
    }
    esc = html.escape
    parts = [f"<h3>Host file <code>{esc(str(host_file))}</code></h3><pre>{esc(host_text)}</pre>"]
    if overrides:
        given = " ".join(f"{k}={v}" for k, v in overrides.items())
        parts.append(f"<p>Overridden on the command line (--config): <code>{esc(given)}</code></p>")
    for step, jobs in steps.items():
        parts.append(f"<h3>Step: {esc(step)}</h3>")
        for job in jobs:
            parts.append(
                f"<p>strategy <b>{esc(str(job['strategy']))}</b>"
                + (f", I/O mode <b>{esc(job['io_mode'])}</b>" if job["io_mode"] else "")
                + f" ({esc(str(job['why']))}); {job['threads']} threads; record "
                f"<code>{esc(job['record'])}</code></p>"
            )
            for tuning in (job["tuning"], job["strategy_tuning"]):
                if tuning:
                    parts.append(tuning_line(tuning))
            rows = "".join(
                f"<tr><td>{p['shard']}</td><td>{'any' if p['node'] is None else p['node']}</td>"
                f"<td>{p['threads']}</td>"
                f"<td><pre>{esc(str(p['command']))}</pre></td>"
                f"<td><pre>{esc(str(p['policy']))}</pre></td></tr>"
                for p in job["processes"]
            )
            parts.append(
                "<table><tr><th>shard</th><th>node</th><th>threads</th><th>command line</th>"
                f"<th>NUMA policy (numactl --show)</th></tr>{rows}</table>"
            )
    if pileup:
        setting = pileup["pileup"] or {}
        parts.append("<h3>Step: pileup</h3>")
        choice = label((setting.get("regions"), setting.get("threads")))
        parts.append(tuning_line(pileup | {"choice": choice}))
    parts.append("<h3>Tool versions</h3><table>")
    parts += [f"<tr><td>{esc(t)}</td><td>{esc(v)}</td></tr>" for t, v in versions.items()]
    parts.append("</table>")
    write_html(f"{name}: provenance", "".join(parts), output)
    write_json(numbers, data)


def tuning_line(tuning: Mapping[str, Any]) -> str:
    """The host tuning behind a job's I/O mode, its strategy (its run record's `tuning` and
    `strategy_tuning`: compare.tuning.add_to_record, compare.tune_strategy.add_to_record) or
    the pileup's setting (`choice`): what it chose, why, and each candidate's median wall."""
    esc = html.escape
    walls = ", ".join(
        f"{esc(mode)} {statistics.median(w):.2f} s ({len(w)} cells)"
        for mode, w in (tuning.get("walls") or {}).items()
        if w
    )
    if "choice" in tuning:
        what, chosen = "Pileup setting", tuning["choice"]
    elif "io_mode" in tuning:
        what, chosen = "I/O mode", tuning["io_mode"]
    else:  # '' or None: not measured, the host file's strategy
        what, chosen = "Strategy", tuning.get("strategy") or "the host file's"
    return (
        f"<p>{what} chosen by host tuning (<code>{esc(str(tuning.get('record')))}</code>, "
        f"measured {esc(str(tuning.get('measured')))}): <b>{esc(str(chosen))}</b>"
        f", {esc(str(tuning.get('why')))}"
        + (f"; on the slice, median wall: {walls}" if walls else "; nothing measured")
        + "</p>"
    )
