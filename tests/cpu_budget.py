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
    outcome.get_result().user_properties.append(("cpu_seconds", seconds))


def pytest_terminal_summary(terminalreporter):
    by_file: dict[str, float] = defaultdict(float)
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name == "cpu_seconds":
                    by_file[report.nodeid.split("::")[0]] += value
    if not by_file:
        return
    total = sum(by_file.values())
    title = f"CPU seconds by test file (tools included): {total:.0f} in all"
    terminalreporter.write_sep("=", title)
    for path, seconds in sorted(by_file.items(), key=lambda kv: -kv[1])[:20]:
        terminalreporter.write_line(f"{seconds:8.1f}  {seconds / total:5.1%}  {path}")
