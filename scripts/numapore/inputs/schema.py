"""The config and the sample sheet checked against their JSON schemas (workflow/schemas/) before
Snakemake's own `validate`, whose message is the whole schema: here each problem is one line
naming the file, the line and the key, with the likely fix (`did you mean ...?`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from numapore.base.errors import InputError


def did_you_mean(word: object, choices: Sequence[str]) -> str:
    """'; did you mean `x`?' for the choice closest to word, or '' when none is close."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""


def unknown_keys(
    data: Mapping[str, Any], schema: Mapping[str, Any], path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], list[str]]]:
    """The keys of data (nested) that a strict schema object (additionalProperties: false)
    does not name: (path of the key, the keys allowed there)."""
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, value in data.items():
        if key in properties:
            sub = properties[key]
        elif extra is False:
            yield (*path, str(key)), list(properties)
            continue
        else:
            sub = extra if isinstance(extra, Mapping) else {}
        if isinstance(value, Mapping):
            yield from unknown_keys(value, sub, (*path, str(key)))


def yaml_line(path: Path, keys: Sequence[str]) -> int | None:
    """The line (1-based) of a nested key in a YAML file, or None (absent, unreadable)."""
    import yaml

    try:
        node = yaml.compose(path.read_text(encoding="utf-8-sig"))
    except (OSError, yaml.YAMLError):
        return None
    line = None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        match = next(((k, v) for k, v in node.value if str(k.value) == key), None)
        if match is None:
            return None
        line, node = match[0].start_mark.line + 1, match[1]
    return line


def _nested(data: Mapping[str, Any], keys: Sequence[str]) -> bool:
    """Whether data holds the nested key."""
    for key in keys:
        if not isinstance(data, Mapping) or key not in data:
            return False
        data = data[key]
    return True


def key_source(keys: Sequence[str], files: Sequence[Path], command_line: Mapping[str, Any]) -> str:
    """Where a config key was set: '--config KEY=VALUE', 'FILE, line N', or the files."""
    if _nested(command_line, keys):
        value = command_line[keys[0]]
        return f"--config {keys[0]}=" + ("..." if isinstance(value, Mapping) else f"{value}")
    for path in reversed(files):  # the last file given wins
        line = yaml_line(Path(path), keys)
        if line is not None:
            return f"{path}, line {line}"
    return ", ".join(map(str, files)) or "the config"


def _fix(word: object, choices: Sequence[str], what: str) -> str:
    """The likely fix: the closest choice, else the list of choices."""
    return did_you_mean(word, choices) or f" ({what}: {', '.join(choices)})"


def _first_error(data: Any, schema: Mapping[str, Any]):
    """The schema error jsonschema would report first (best_match), or None."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    return jsonschema.exceptions.best_match(validator.iter_errors(data))


def _explain(error) -> str:
    """A jsonschema error as a reason, with the likely fix where the schema gives choices."""
    reason = error.message
    if error.validator == "enum":
        reason += did_you_mean(error.instance, [str(c) for c in error.validator_value])
    elif error.validator == "pattern" and error.schema.get("description"):
        reason += f" ({error.schema['description']})"
    return reason


def check_config(
    config: Mapping[str, Any],
    schema: Mapping[str, Any],
    files: Sequence[Path],
    command_line: Mapping[str, Any],
) -> None:
    """Raise one InputError line for the config's first problem: an unknown key (with the
    closest known one), else the first value the schema refuses, naming where it was set."""
    for keys, allowed in unknown_keys(config, schema):
        raise InputError(
            f"{key_source(keys, files, command_line)}: unknown config key '{'.'.join(keys)}'"
            + _fix(keys[-1], allowed, "keys here")
        )
    error = _first_error(config, schema)
    if error is not None:
        keys = [str(k) for k in error.absolute_path if not isinstance(k, int)]
        where = key_source(keys, files, command_line) if keys else ", ".join(map(str, files))
        name = ".".join(str(k) for k in error.absolute_path) or "config"
        named = where.startswith("--config") and len(error.absolute_path) == 1
        raise InputError(f"{where}: " + ("" if named else f"{name}: ") + _explain(error))


def check_sheet(
    header: Sequence[str],
    rows: Sequence[Mapping[str, str]],
    lines: Sequence[int],
    header_line: int,
    sheet: Path,
    schema: Mapping[str, Any],
) -> None:
    """Raise one InputError line for the sample sheet's first problem: a column the schema does
    not know (with the closest known one), else the first value it refuses, by line and
    column."""
    known = list(schema.get("properties", {}))
    for column in header:
        if column not in known:
            raise InputError(
                f"sample sheet {sheet}, line {header_line}: unknown column '{column}'"
                + _fix(column, known, "columns")
            )
    present = set(header)
    alternatives = [set(a.get("required", [])) for a in schema.get("anyOf", [])]
    if not set(schema.get("required", [])) <= present or (
        alternatives and not any(a <= present for a in alternatives)
    ):
        return  # a missing column: load_samples names it
    for line, row in zip(lines, rows, strict=True):
        error = _first_error(dict(row), schema)
        if error is None:
            continue
        column = next((str(k) for k in error.absolute_path), None)
        where = f"sample sheet {sheet}, line {line}" + (f", column '{column}'" if column else "")
        raise InputError(f"{where}: {_explain(error)}")
