"""numapore is a package that pip installs, with one console command, and layers that hold.

- `pip install .` into a new virtual environment builds the compiled parts and installs the
  package with its schemas and stock host files; `numapore` and every subcommand's --help work
  there, and the compiled modules and data load from the installed copy, not the checkout.
- The layer contract (pyproject.toml, `lint-imports`) holds, and fails when an upward import is
  added; no module imports itself through a loop.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import grimp
import pytest
from conftest import REPO

from numapore.base import compiled
from numapore.cli import SUBCOMMANDS

VENV = REPO / ".venv"


def tracked_copy(dest: Path) -> Path:
    """The repository's committed and staged files (what a clone holds, symlinks kept) in dest."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached"], cwd=REPO, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        src, dst = REPO / name, dest / name
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the work tree, not yet in the index
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A new virtual environment with numapore installed by `pip install .` from a copy of the
    repository (its dependencies come from .venv through a .pth file: nothing else to fetch)."""
    root = tmp_path_factory.mktemp("install")
    source = tracked_copy(root / "src")
    env = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)}))
    (site / "numapore-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    done = subprocess.run(
        [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet", str(source)],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.rmtree(source)  # what runs from here on can only be the installed copy
    return env


def run_in(env: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """argv run with env's bin/ first on PATH, in cwd."""
    path = f"{env / 'bin'}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, env={**os.environ, "PATH": path}
    )


def test_console_command_and_every_subcommand_help(installed, tmp_path) -> None:
    """`numapore --help` lists every subcommand; each one's --help exits 0 under its name."""
    top = run_in(installed, "numapore", "--help", cwd=tmp_path)
    assert top.returncode == 0, top.stderr
    for name in SUBCOMMANDS:
        assert f"  {name}" in top.stdout, top.stdout
        sub = run_in(installed, "numapore", name, "--help", cwd=tmp_path)
        assert sub.returncode == 0, (name, sub.stderr)
        assert sub.stdout.startswith(f"usage: numapore {name}"), (name, sub.stdout[:200])
    bad = run_in(installed, "numapore", "pilup", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("numapore: unknown subcommand 'pilup'")


def test_compiled_parts_and_data_load_from_the_installed_package(installed, tmp_path) -> None:
    """The compiled modules, schemas and stock host files are the installed package's."""
    site = sysconfig.get_path("purelib", vars={"base": str(installed), "platbase": str(installed)})
    shown = run_in(installed, "numapore", "compiled", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == len(compiled.MODULES), shown.stdout
    for line in lines:
        assert f": {site}/numapore/" in line and line.endswith(".so"), line
    code = (
        "from numapore.execution.hosts import SCHEMA_PATH, host_path, load_host_config\n"
        "host = load_host_config(host_path('single-node'))\n"
        "print(SCHEMA_PATH); print(host.path); print(host.io_mode)\n"
    )
    loaded = run_in(installed, "python", "-c", code, cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    schema, host, io_mode = loaded.stdout.split()
    assert schema.startswith(f"{site}/numapore/data/schemas/") and Path(schema).is_file()
    assert host.startswith(f"{site}/numapore/data/hosts/") and io_mode == "fast5"


def test_pure_python_switch_is_the_one_place(installed, tmp_path) -> None:
    """NUMAPORE_PURE_PYTHON=1 turns every compiled module off, and only base/compiled.py loads
    them (no module imports a compiled module itself)."""
    env = {**os.environ, compiled.PURE_PYTHON_ENV: "1"}
    shown = subprocess.run(
        [str(installed / "bin" / "numapore"), "compiled"], cwd=tmp_path, env=env,
        capture_output=True, text=True,
    )  # fmt: skip
    assert shown.stdout.count("Python path (NUMAPORE_PURE_PYTHON is set)") == len(
        compiled.MODULES
    ), shown.stdout
    names = tuple(name.rsplit(".", 1)[1] for name in compiled.MODULES.values())
    package = REPO / "scripts" / "numapore"
    for path in package.rglob("*.py"):
        text = path.read_text()
        for name in names:
            if path.name != "compiled.py":
                assert f"import {name}" not in text and f"{name} import" not in text, path


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the package of tree (its pyproject.toml's contract)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "scripts")}
    return subprocess.run(
        [str(VENV / "bin" / "lint-imports"), "--no-cache"], cwd=tree, env=env,
        capture_output=True, text=True,
    )  # fmt: skip


def test_layer_contract_holds() -> None:
    """The checkout's package keeps its layers."""
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    "module, upward",
    [
        ("base/atomic.py", "from numapore.signal import slow5"),
        ("signal/slow5.py", "from numapore.execution import hosts"),
        ("methylation/motifs.py", "import numapore.report.figures"),
        ("methylation/dmr.py", "from numapore.simulate import poremodel"),
        ("pileup/settings.py", "from numapore.nanopolish import calls"),
        ("methylation/cohort.py", "from numapore.pileup import common"),
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path, module, upward) -> None:
    """The same check on a copy of the package with one upward import added fails, naming it."""
    tree = tracked_copy(tmp_path / "tree")
    target = tree / "scripts" / "numapore" / module
    target.write_text(target.read_text() + f"\n{upward}  # noqa\n")
    result = lint_imports(tree)
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout and "1 broken" in result.stdout, result.stdout
    importer = "numapore." + module.removesuffix(".py").replace("/", ".")
    assert importer in result.stdout, result.stdout


def import_loops(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every loop of imports between the graph's modules (each as the modules along it)."""
    modules = sorted(graph.modules)
    loops, state = [], dict.fromkeys(modules, 0)  # 0 unseen, 1 on the path, 2 done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if state.get(imported) == 1:
                loops.append(path[path.index(imported) :] + [imported])
            elif state.get(imported) == 0:
                visit(imported, path + [imported])
        state[module] = 2

    for module in modules:
        if state[module] == 0:
            visit(module, [module])
    return loops


def test_no_import_loops() -> None:
    """No module imports itself through others (imports inside functions count too)."""
    graph = grimp.build_graph("numapore", cache_dir=None)
    assert import_loops(graph) == []


def test_loop_finder_finds_a_loop() -> None:
    """import_loops sees a loop where one is."""
    graph = grimp.ImportGraph()
    for a, b in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")]:
        graph.add_import(importer=a, imported=b)
    assert import_loops(graph) == [["p.a", "p.b", "p.c", "p.a"]]


def test_conda_post_deploy_installs_without_a_compiler(tmp_path) -> None:
    """envs/install-numapore.sh (each conda env's post-deploy script) installs the package into
    the env it runs in; where nothing can be compiled, the Python paths run and it says so."""
    source = tracked_copy(tmp_path / "src")
    env = tmp_path / "env"  # a stand-in for the new conda env: its python first on PATH
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)}))
    (site / "numapore-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    path = f"{env / 'bin'}{os.pathsep}{os.environ['PATH']}"
    run = subprocess.run(
        ["bash", str(source / "envs" / "python.post-deploy.sh")], cwd=tmp_path,
        env={**os.environ, "PATH": path, "NUMAPORE_SOURCE": str(source), "CC": "false"},
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("not built: Python path") == len(compiled.MODULES), run.stdout
    unset = subprocess.run(
        ["bash", str(source / "envs" / "install-numapore.sh")], cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "NUMAPORE_SOURCE"},
        capture_output=True, text=True,
    )  # fmt: skip
    assert unset.returncode != 0 and "numapore: NUMAPORE_SOURCE is not set" in unset.stderr
