"""What each rule needs from its conda env, read statically (conda channels are not reachable
here, so the conda path is checked without solving an env).

For every rule of workflow/rules/*.smk: its env file (`conda:`; an `{aligner}` in the path is
expanded over the aligners the config schema allows), the third-party Python packages its
script imports (followed through the numapore package, function-level imports included), and
the tools it runs: the words in command position of its `shell:` command, and of the command
strings in its script and the package modules it reaches (string constants, docstrings left
out). These are compared with the env's dependencies.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "workflow" / "rules"
PACKAGE = REPO / "scripts"

# Python import name -> conda package name (where they differ).
IMPORT_PACKAGES = {
    "yaml": "pyyaml",
    "vbz_h5py_plugin": "vbz-h5py-plugin",
    "_cffi_backend": "cffi",
    "lib_pod5": "lib-pod5",
    # a script: job finds the running Snakemake's own package (its preamble puts it on the
    # path); what numapore uses of it, snakemake.utils.validate, needs jsonschema in the env
    "snakemake": "jsonschema",
}
# R packages a rule's R script loads (library(X)) -> the conda package that provides them.
R_PACKAGES = {"DSS": "bioconductor-dss", "data.table": "r-data.table"}
# Executables in command position -> the conda package that provides them. A word not listed
# here is not a tool numapore needs from an env (coreutils, grep, bash builtins).
TOOL_PACKAGES = {
    "samtools": "samtools",
    "minimap2": "minimap2",
    "bwa": "bwa",
    "bowtie2": "bowtie2",
    "bowtie2-build": "bowtie2",
    "snap-aligner": "snap-aligner",
    "nanopolish": "nanopolish",
    "numactl": "numactl",
    "tabix": "htslib",
    "bgzip": "htslib",
    "multiqc": "multiqc",
    "/usr/bin/time": "time",
    "fusermount3": "fuse3",
}
# What a tool needs beside it at run time: nanopolish reads VBZ-compressed FAST5 (MinKNOW's
# default) only with ONT's HDF5 filter plugin (numapore.signal.hdf5plugin finds it in the env).
TOOL_COMPANIONS = {"nanopolish": ["ont_vbz_hdf_plugin"]}
# Where a rule takes its aligner from the wildcard, the other aligners' commands are not run.
ALIGNERS = tuple(
    yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())[
        "properties"
    ]["aligner"]["enum"]
)  # the config schema's aligners: an {aligner} env is checked for each
# The conda package of an aligner whose package is named otherwise.
ALIGNER_PACKAGES = {"snap": "snap-aligner"}
# Modules whose tool use is optional by design, with the reason (not counted as needs).
OPTIONAL_TOOLS = {
    # provenance asks every tool for its version and says "not found" where one is absent
    "numapore.execution.versions": "tool versions for the provenance page and the tuning key",
    # the emulated slow storage unmounts with fusermount3 when not root, else with umount(2)
    "numapore.compare.slowfs": "FUSE unmount helper for non-root users",
}
# Modules that name tools as data, never running them (not counted as needs).
TOOL_NAMES_AS_DATA = {
    # the kinds table names each kind's aligners and their presets; the align rule runs them
    "numapore.inputs.kinds": "aligner names and presets per kind",
    # the provenance page's table header says where the NUMA policy comes from
    "numapore.report.provenance": "numactl --show named in a table header",
}
# A tool word in command position (start, or after | ; & ( { $( ) followed by what a command
# line has next: the end, an option or placeholder, or a subcommand then an option/placeholder/
# end. Prose that names a tool ("nanopolish could not align") is not a command.
_TOOL_WORDS = "|".join(re.escape(t) for t in sorted(TOOL_PACKAGES, key=len, reverse=True))
COMMAND = re.compile(
    rf"(?:^|[|;&({{]|\$\()\s*({_TOOL_WORDS})" r"(?=\s*$|\s+[-{]|\s+[a-z][a-z0-9-]*(?:\s+[-{]|\s*$))"
)


@dataclass
class Rule:
    """One rule as written in its .smk file."""

    name: str
    path: Path
    conda: str | None = None
    script: str | None = None
    shell: str | None = None


@dataclass
class Needs:
    """What one rule needs from its env: conda package -> where the need comes from."""

    packages: dict[str, str] = field(default_factory=dict)


def _directive_values(block: list[str]) -> dict[str, str]:
    """A rule body's directives (4-space indent) and their values (8-space lines or inline)."""
    values: dict[str, list[str]] = {}
    current = None
    for line in block:
        m = re.match(r"^    (\w+):\s*(.*)$", line)
        if m:
            current = m.group(1)
            values[current] = [m.group(2)] if m.group(2) else []
        elif current and line.startswith("        "):
            values[current].append(line.strip())
    return {k: "\n".join(v) for k, v in values.items()}


def _literal(text: str) -> str | None:
    """The value of a directive written as (concatenated) string literals, else None."""
    try:
        value = ast.literal_eval(f"({text})")
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


# A rule's first line; `use rule A as B with:` makes B from A, its directives overriding A's.
RULE_START = re.compile(r"^(?:(?:rule|checkpoint) (\w+)|use rule (\w+) as (\w+) with):")


def parse_rules(rules_dir: Path = RULES) -> list[Rule]:
    """Every rule of the workflow (Snakefile and rules/*.smk), as snakefmt formats them."""
    rules = []
    for smk in [rules_dir.parent / "Snakefile", *sorted(rules_dir.glob("*.smk"))]:
        lines = smk.read_text().splitlines()
        starts = [i for i, line in enumerate(lines) if RULE_START.match(line)]
        for start in starts:
            end = next(
                (i for i in range(start + 1, len(lines)) if re.match(r"^\S", lines[i])), None
            )
            own, base, derived = RULE_START.match(lines[start]).groups()
            values = _directive_values(lines[start + 1 : end])
            name = own or derived
            rule = Rule(name, smk)
            if base:
                (parent,) = (r for r in rules if r.name == base)
                rule.conda, rule.script, rule.shell = parent.conda, parent.script, parent.shell
            for key in ("conda", "script", "shell"):
                if key in values:
                    value = _literal(values[key])
                    if value is None:
                        raise ValueError(f"{smk.name}: rule {name}: {key}: is not a string literal")
                    setattr(rule, key, value)
            rules.append(rule)
    return rules


def env_packages(env_file: Path) -> dict[str, str]:
    """An env's dependencies: package name (lower case) -> pinned version ('' if unpinned)."""
    env = yaml.safe_load(env_file.read_text())
    out: dict[str, str] = {}

    def add(spec: str, sep: str) -> None:
        name, _, version = spec.partition(sep)
        out[name.strip().lower()] = version.strip().lstrip("=")

    for dep in env.get("dependencies", []):
        if isinstance(dep, dict):
            for spec in dep.get("pip", []):
                add(spec, "==")
        else:
            add(dep, "=")
    return out


def _module_file(name: str) -> Path | None:
    """The source file of a numapore module (package __init__ or module), if it exists."""
    base = PACKAGE / Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _compiled(name: str) -> bool:
    """Whether a numapore module name is one of the cffi extensions the install builds."""
    base = PACKAGE / Path(*name.split("."))
    builders = base.parent.glob("*build*.py")
    return any(base.parent.glob(base.name + ".*.so")) or any(
        f'"{name}"' in builder.read_text() for builder in builders
    )


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module and its functions and classes."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _strings(tree: ast.AST) -> list[str]:
    """Every string constant of a module outside docstrings (f-strings: their literal parts)."""
    skip = _docstring_nodes(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
    ]


def command_tools(text: str) -> set[str]:
    """Known tools in command position in a command string (or a lone argv[0] string)."""
    if text in TOOL_PACKAGES:
        return {text}
    return {m.group(1) for m in COMMAND.finditer(text)}


def _top_level(tree: ast.AST):
    """The statements that run when a module is loaded (not inside functions or classes)."""
    todo = list(getattr(tree, "body", []))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue  # imports for type hints only
        yield node
        for field_name in ("body", "orelse", "finalbody", "handlers"):
            todo += getattr(node, field_name, [])


def _imports(tree: ast.AST, module: str, top_level: bool = True) -> list[str]:
    """Absolute names of the modules a module imports when loaded (top_level) or that a
    function imports when it runs."""
    names = []
    nodes = _top_level(tree) if top_level else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = module.split(".")[: -node.level]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names.append(prefix)
            names += [f"{prefix}.{a.name}" for a in node.names]  # `from pkg import module`
        elif top_level or isinstance(node, ast.Call):
            names += _compiled_loads(node)
    return names


def _compiled_loads(node: ast.AST) -> list[str]:
    """The compiled modules a statement or call loads through numapore.base.compiled:
    compiled.load("numapore.x._y") imports that module as surely as an import statement."""
    calls = [node] if isinstance(node, ast.Call) else ast.walk(node)
    return [
        call.args[0].value
        for call in calls
        if isinstance(call, ast.Call)
        and ast.unparse(call.func) == "compiled.load"
        and call.args
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    ]


class _Module:
    """A parsed numapore module (or rule script): its definitions, string constants, imports."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.tree = ast.parse(path.read_text(), str(path))
        self.docstrings = _docstring_nodes(self.tree)
        self.defs: dict[str, ast.AST] = {}
        self.imported: dict[str, tuple[str, str | None]] = {}  # local name -> (module, attr)
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.defs[target.id] = node
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.imported[a.asname or a.name] = (node.module, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    self.imported[a.asname or a.name.split(".")[0]] = (a.name, None)

    def strings(self, node: ast.AST) -> list[str]:
        """String constants under node, docstrings left out."""
        return [
            n.value
            for n in ast.walk(node)
            if isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and id(n) not in self.docstrings
        ]


def _referenced(node: ast.AST) -> set[tuple[str, ...]]:
    """Names and dotted attribute chains a piece of code refers to (`f`, `mod.f`)."""
    refs = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            refs.add((n.id,))
        elif isinstance(n, ast.Attribute):
            chain, inner = [n.attr], n.value
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name):
                refs.add((inner.id, *reversed(chain)))
    return refs


@functools.cache
def _parsed(name: str, path: Path) -> _Module:
    """A module parsed once a session: every rule script's walk reaches much of the package
    (44 scripts, 831 modules read; 27 s of the env tests' CPU before this cache)."""
    return _Module(name, path)


@functools.cache
def script_needs(script: Path) -> dict[str, str]:
    """Conda packages (and tools' packages) a rule script needs: package -> why.

    Imports count for every module the script loads (a module's imports run when it is loaded);
    tools count for the code the script can reach: its own top level, then every function,
    class or constant of the package it names, followed through the functions they name."""
    needs: dict[str, str] = {}
    modules: dict[str, _Module] = {}
    todo: list[tuple[_Module, ast.AST]] = []
    seen: set[tuple[str, str]] = set()

    def load(name: str) -> _Module | None:
        if name not in modules:
            path = script if name == "__script__" else _module_file(name)
            if path is None:
                return None
            modules[name] = _parsed(name, path)
            for imported in _imports(modules[name].tree, name):
                need_import(imported, name)
        return modules[name]

    def need_import(imported: str, by: str) -> None:
        top = imported.split(".")[0]
        if top == "numapore":
            if load(imported) is None and imported.rsplit(".", 1)[-1].startswith("_"):
                # a compiled module without Python source (cffi, built by the install)
                if _compiled(imported):
                    needs.setdefault("cffi", f"import {imported} (compiled with cffi)")
        elif top and top not in sys.stdlib_module_names and top != "__future__":
            where = script.name if by == "__script__" else by
            needs.setdefault(IMPORT_PACKAGES.get(top, top).lower(), f"import {top} ({where})")

    def tools_in(module: _Module, node: ast.AST) -> None:
        if not isinstance(node, ast.Module):  # a reached function's own imports run too
            for imported in _imports(node, module.name, top_level=False):
                need_import(imported, module.name)
        where = script.name if module.name == "__script__" else f"{module.name}"
        for text in module.strings(node):
            if re.fullmatch(r"numapore(\.\w+)+", text) and (text, "") not in seen:
                seen.add((text, ""))
                if load(text) is not None:  # `python -m numapore.x` runs the module whole
                    todo.append((load(text), load(text).tree))
                    for imported in _imports(load(text).tree, text, top_level=False):
                        need_import(imported, text)
            if module.name in OPTIONAL_TOOLS or module.name in TOOL_NAMES_AS_DATA:
                continue
            for tool in command_tools(text):
                needs.setdefault(TOOL_PACKAGES[tool], f"runs {tool} ({where})")

    todo.append((load("__script__"), load("__script__").tree))
    while todo:
        module, node = todo.pop()
        tools_in(module, node)
        for ref in _referenced(node):
            target = _resolve(module, ref, load)
            if target is not None and (target[0].name, target[1]) not in seen:
                seen.add((target[0].name, target[1]))
                todo.append((target[0], target[0].defs[target[1]]))
    return needs


def _resolve(module: _Module, ref: tuple[str, ...], load) -> tuple[_Module, str] | None:
    """The package definition a name or attribute chain refers to, if any."""
    head, rest = ref[0], list(ref[1:])
    if head in module.defs and not rest:
        return module, head
    if head not in module.imported:
        return None
    source, attr = module.imported[head]
    if not source.startswith("numapore"):
        return None
    path = [source] + ([attr] if attr else [])
    # walk `pkg.sub.func` down to a module and a definition in it
    parts = path[0].split(".") + path[1:] + rest
    for cut in range(len(parts), 0, -1):
        target = load(".".join(parts[:cut]))
        if target is not None:
            names = parts[cut:]
            if names and names[0] in target.defs:
                return target, names[0]
            return None
    return None


def r_script_needs(script: Path) -> dict[str, str]:
    """Conda packages an R rule script needs: R itself and the packages it loads (library(X));
    a package R_PACKAGES does not map is named as conda-forge names R packages (r-<lower>)."""
    needs = {"r-base": "script: (R)"}
    for name in re.findall(r"\blibrary\(([A-Za-z0-9.]+)\)", script.read_text()):
        needs.setdefault(
            R_PACKAGES.get(name, f"r-{name.lower()}"), f"library({name}) ({script.name})"
        )
    return needs


def rule_problems(rule: Rule, env_dir: Path | None = None) -> list[str]:
    """What a rule's env lacks, one line each: rule, env, missing package and why it is needed."""
    if rule.script is None and rule.shell is None:
        return []  # a target rule: it runs nothing
    if rule.conda is None:
        return [f"rule {rule.name} ({rule.path.name}): no conda: env"]
    problems = []
    aligners = ALIGNERS if "{aligner}" in rule.conda else (None,)
    for aligner in aligners:
        env_path = rule.conda.replace("{aligner}", aligner) if aligner else rule.conda
        env_file = (rule.path.parent / env_path).resolve()
        if env_dir is not None:
            env_file = env_dir / env_file.name
        if not env_file.is_file():
            problems.append(f"rule {rule.name}: env {env_path} does not exist")
            continue
        have = env_packages(env_file)
        needs: dict[str, str] = {}
        if rule.script and rule.script.endswith(".R"):
            needs.update(r_script_needs((rule.path.parent / rule.script).resolve()))
        elif rule.script:
            needs["python"] = "script:"
            needs.update(script_needs((rule.path.parent / rule.script).resolve()))  # cached
        if rule.shell:
            for tool in command_tools(rule.shell):
                needs.setdefault(TOOL_PACKAGES[tool], f"shell: runs {tool}")
        for tool, companions in TOOL_COMPANIONS.items():
            if tool in needs:
                for companion in companions:
                    needs.setdefault(companion, f"{tool} needs it ({needs[tool]})")
        for package, why in sorted(needs.items()):
            packages = {ALIGNER_PACKAGES.get(a, a) for a in ALIGNERS}
            if (
                aligner
                and package in packages
                and package != ALIGNER_PACKAGES.get(aligner, aligner)
            ):
                continue  # the other aligners' commands are not run for this wildcard
            if package not in have:
                problems.append(
                    f"rule {rule.name}: env {env_file.name} lacks {package} (needed: {why})"
                )
    return problems


def pin_mismatches(env_files: list[Path], requirements: Path) -> list[str]:
    """Packages pinned both in an env and in requirements.txt to different versions."""
    pins = {}
    for line in requirements.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    out = []
    for env_file in env_files:
        for name, version in env_packages(env_file).items():
            want = pins.get(name.replace("_", "-"))
            if want is not None and version != want:
                out.append(
                    f"{env_file.name}: {name}={version or '(unpinned)'}, requirements.txt {want}"
                )
    return out
