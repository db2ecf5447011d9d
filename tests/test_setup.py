"""setup.sh: a user's setup installs what the workflow runs and none of the test machinery;
`--tests` adds the machinery that the tests start (the README says which packages each adds)."""

from __future__ import annotations

import subprocess

from conftest import REPO

# What only the tests start: a Slurm cluster with its accounting database and its nodes' network
# namespaces (ip), the emulated NUMA guest, the report tests' browser, the concurrency tests'
# tracer, the short-read simulator.
TEST_MACHINERY = {
    "slurm-wlm", "munge", "slurmdbd", "mariadb-server", "qemu-system-x86", "linux-image-amd64",
    "busybox-static", "chromium", "strace", "art-nextgen-simulation-tools", "iproute2",
}  # fmt: skip


def listed(*options: str) -> dict[str, list[str]]:
    """What `setup.sh --list OPTIONS` says it would install, by source (debian, python)."""
    out = subprocess.run(
        ["bash", str(REPO / "setup.sh"), "--list", *options],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return {k: v.split() for k, v in (line.split(": ", 1) for line in out.splitlines())}


def test_user_setup_installs_no_test_machinery():
    user = listed()
    assert not TEST_MACHINERY & set(user["debian"])
    assert {"samtools", "minimap2", "nanopolish", "numactl", "tabix"} <= set(user["debian"])
    assert user["python"] == ["requirements.txt"]
    pinned = {line.split("==")[0] for line in (REPO / "requirements.txt").read_text().splitlines()}
    assert not {"pytest", "pytest-xdist", "black", "ruff", "virtme-ng"} & pinned


def test_test_setup_adds_the_machinery_and_the_test_packages():
    tests = listed("--tests")
    assert TEST_MACHINERY <= set(tests["debian"])
    assert set(listed()["debian"]) <= set(tests["debian"])
    assert tests["python"] == ["requirements.txt", "requirements-tests.txt"]


def test_no_apt_lists_no_debian_packages_and_a_wrong_option_is_named():
    assert "debian" not in listed("--no-apt", "--tests")
    run = subprocess.run(["bash", str(REPO / "setup.sh"), "--test"], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.startswith("numapore: setup.sh: unknown option '--test'")


def test_readme_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text()
    command = "./setup.sh --tests && .venv/bin/pytest"
    assert f"```bash\n{command}\n```" in readme
    assert (REPO / ".ci" / "run").read_text().strip().splitlines()[-1] == command
