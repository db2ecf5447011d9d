"""The suite's CPU seconds by test file, printed at the end of every run beside the slowest tests.

Wall time on a shared 2-core machine says little about what a file costs; CPU seconds do: each
phase of a test adds this process's CPU time and that of the tool processes it waited for (a
workflow run's jobs, QEMU, ...). With two workers the suite's wall time is at least half the
total, so the total is the budget's figure to watch when a test adds a run.
"""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

# The CPU seconds at the end of the test's last phase (or at its start).
_since_key = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_since_key] = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # A report is made right after each phase (setup, call, teardown): the CPU since the last
    # one is that phase's.
    outcome = yield
    now = _cpu_seconds()
    seconds, item.stash[_since_key] = now - item.stash.get(_since_key, now), now
    # user_properties travel with the report from an xdist worker to the controller.
    report = outcome.get_result()
    report.user_properties.append(("cpu_seconds", seconds))
    report.user_properties.append(("worker", os.environ.get("PYTEST_XDIST_WORKER", "main")))


def pytest_terminal_summary(terminalreporter, config):
    by_file: dict[str, float] = defaultdict(float)
    # Per worker, per file: its first start and last stop (wall clock).
    spans: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for reports in terminalreporter.stats.values():
        for report in reports:
            props = dict(getattr(report, "user_properties", ()))
            if "cpu_seconds" not in props:
                continue
            path = report.nodeid.split("::")[0]
            by_file[path] += props["cpu_seconds"]
            span = spans[props["worker"]].setdefault(path, [report.start, report.stop])
            span[0], span[1] = min(span[0], report.start), max(span[1], report.stop)
    if not by_file:
        return
    _write_workers(terminalreporter, config, spans)
    total = sum(by_file.values())
    title = f"CPU seconds by test file (tools included): {total:.0f} in all"
    terminalreporter.write_sep("=", title)
    for path, seconds in sorted(by_file.items(), key=lambda kv: -kv[1])[:20]:
        terminalreporter.write_line(f"{seconds:8.1f}  {seconds / total:5.1%}  {path}")


def _write_workers(terminalreporter, config, spans) -> None:
    """Each worker's busy time and when it finished: a worker that ends long before the others
    is time two cores stood half idle (the files a worker ran, in order, go to
    .pytest_cache/d/timeline/worker-timeline.tsv)."""
    begin = min(span[0] for files in spans.values() for span in files.values())
    terminalreporter.write_sep("=", "workers: busy seconds, and when each finished")
    lines = ["worker\tfile\tstart_s\tend_s"]
    for worker, files in sorted(spans.items()):
        ordered = sorted(files.items(), key=lambda kv: kv[1][0])
        busy = sum(stop - start for start, stop in files.values())
        last_path, (_, last_stop) = ordered[-1]
        terminalreporter.write_line(
            f"{worker}: busy {busy:6.0f} s, finished at {last_stop - begin:6.0f} s"
            f" (last: {last_path})"
        )
        lines += [f"{worker}\t{p}\t{a - begin:.1f}\t{b - begin:.1f}" for p, (a, b) in ordered]
    if getattr(config, "cache", None) is not None:
        out = config.cache.mkdir("timeline") / "worker-timeline.tsv"
        out.write_text("\n".join(lines) + "\n")
