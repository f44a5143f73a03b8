"""The config reference, docs/config.md, rendered from the typed config's own documentation.

Every section of :class:`fastrl.config.MainConfig` is a dataclass with a docstring, and every
leaf field carries its description in ``metadata["doc"]`` (and its checks in ``gt``, ``ge``,
``le``, ``choices``). :func:`render` walks those dataclasses with :func:`dataclasses.fields`,
recursively and in declaration order, and makes one Markdown table per section. Nothing here
names a section: a section added to the config (or generated from an algorithm plug-in)
appears in the page by itself.

``python -m fastrl.config_reference`` writes docs/config.md; with ``--check`` it only
compares, and exits 1 when the page is stale (0 when it is current).
tests/docs/test_config_reference.py makes the same comparison.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import MISSING, Field, fields, is_dataclass
from pathlib import Path
from typing import Any

from fastrl.compat import table_rows
from fastrl.config import MainConfig

#: The page this module writes: docs/config.md of the source tree fastrl is imported from.
DOC_PATH = Path(__file__).resolve().parents[1] / "docs" / "config.md"
COMMAND = "python -m fastrl.config_reference"
#: Field metadata that states a check, and how the page words it.
CHECKS = (("gt", "> {}"), ("ge", ">= {}"), ("le", "<= {}"))


def _default(f: Field) -> Any:
    """The value a field takes when the config does not set it (MISSING if it has none)."""
    if f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


def _is_section(f: Field) -> bool:
    """True for a field that holds a nested config section (a dataclass instance)."""
    value = _default(f)
    if value is not MISSING:
        return is_dataclass(value) and not isinstance(value, type)
    return isinstance(f.type, type) and is_dataclass(f.type)


def _section_type(f: Field) -> type:
    """The dataclass of a section field."""
    value = _default(f)
    return type(value) if value is not MISSING else f.type


def sections(cls: type = MainConfig, prefix: str = "") -> Iterator[tuple[str, type, list[Field]]]:
    """``(dotted key, dataclass, leaf fields)`` of ``cls`` and of every section nested in it,
    depth first in declaration order; the dotted key of ``cls`` itself is ``prefix``."""
    own = fields(cls)
    yield prefix, cls, [f for f in own if not _is_section(f)]
    for f in own:
        if _is_section(f):
            yield from sections(_section_type(f), f"{prefix}{f.name}.")


def _docstring(cls: type) -> str:
    """A section's docstring as Markdown, or '' when it has none of its own (a dataclass
    without one gets its signature as ``__doc__``)."""
    doc = inspect.getdoc(cls) or ""
    return "" if doc.startswith(f"{cls.__name__}(") else _no_html(doc)


def _no_html(text: str) -> str:
    """``text`` with every ``<`` that could open an HTML tag (``algo.<name>``) escaped."""
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)


def _type_name(f: Field) -> str:
    """A field's annotation as written (``int | None``), also when it is not a string."""
    if isinstance(f.type, str):
        return f.type
    if isinstance(f.type, type):
        return f.type.__name__
    return str(f.type).replace("typing.", "")


def _format_default(value: Any) -> str:
    """A default as it would be written in YAML or a ``key=value`` override."""
    if value is MISSING:
        return "(required)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    try:
        return json.dumps(value)
    except TypeError:
        return repr(value)


def _cell(text: str) -> str:
    """Text made safe for one Markdown table cell."""
    text = " ".join(text.split())
    for raw, escaped in (("\\", "\\\\"), ("|", "\\|"), ("*", "\\*")):
        text = text.replace(raw, escaped)
    return _no_html(text)


def _code(text: str) -> str:
    """Text as inline code in a table cell (a pipe must be escaped even there)."""
    return "`" + " ".join(text.split()).replace("|", "\\|") + "`"


def _description(f: Field) -> str:
    """A field's doc, followed by the checks :func:`fastrl.config.check_values` applies."""
    meta = f.metadata
    text = _cell(meta.get("doc", ""))
    checks = [form.format(meta[key]) for key, form in CHECKS if key in meta]
    if "choices" in meta:
        checks.append("one of " + ", ".join(str(c) for c in meta["choices"]))
    if checks:
        text += f" *({_cell(', '.join(checks))})*"
    return text


def _table(prefix: str, leaves: list[Field]) -> list[str]:
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for f in leaves:
        lines.append(f"| {_code(prefix + f.name)} | {_code(_type_name(f))} | "
                     f"{_code(_format_default(_default(f)))} | {_description(f)} |")
    return lines


def render(root: type = MainConfig) -> str:
    """The Markdown config reference of ``root`` (by default the whole run's config): the
    root's docstring, a list of sections, then per section its docstring and a table of its
    keys with their type, default, description and checks."""
    found = list(sections(root))
    lines = [
        "# Config reference",
        "",
        f"<!-- Generated by `{COMMAND}` from the typed config's dataclasses",
        "     (fastrl/config.py and the algorithm plug-ins' sections in fastrl/algos/): edit",
        "     the field docs there, not this page; tests/docs/test_config_reference.py fails",
        "     while it is stale. -->",
        "",
    ]
    intro = _docstring(root)
    if intro:
        lines += [intro, ""]
    lines += [
        "Set any key in a YAML file or as a `key=value` override on the command line",
        "(`python -m fastrl.train configs/cartpole_ppo.yaml infra.num_workers=4",
        "algo.replay.n_step=3`); see [training.md](training.md). An unknown key, a wrong type",
        "or a value that fails the check in parentheses stops the run before anything starts.",
        "`null` is YAML's None.",
        "",
        "Sections:",
        "",
    ]
    for prefix, cls, _ in found:
        name = prefix.rstrip(".") or "top level"
        lines.append(f"- [{name}](#{_anchor(prefix)}) ({cls.__name__})")
    for prefix, cls, leaves in found:
        title = f"`{prefix.rstrip('.')}`" if prefix else "Top-level keys"
        lines += ["", f'<a id="{_anchor(prefix)}"></a>', "", f"## {title}", ""]
        doc = _docstring(cls)
        if doc and prefix:  # (the root's docstring opens the page)
            lines += [doc, ""]
        if leaves:
            lines += _table(prefix, leaves)
        else:
            lines.append("Only sections, below.")
    if root is MainConfig:
        lines += _pairs_table()
    return "\n".join(lines) + "\n"


def _pairs_table() -> list[str]:
    """The features that do not combine (fastrl.compat's table), one row a pair."""
    lines = ["", '<a id="config-pairs"></a>', "", "## Features that do not combine", "",
             "A run that combines a feature with one it does not combine with stops before "
             "anything starts, with one line that names both (fastrl/compat.py holds this "
             "table; the pairs that depend on the env's agents are decided once the env is "
             "made to read its spaces).", "",
             "| feature | does not combine with |", "|---|---|"]
    return lines + [f"| {_code(feature) if '=' in feature else _cell(feature)} | {_cell(other)} |"
                    for feature, other in table_rows()]


def _anchor(prefix: str) -> str:
    """The HTML id of a section's heading."""
    return "config-" + (prefix.rstrip(".").replace(".", "-") or "top")


def main(argv: Sequence[str] | None = None) -> int:
    """Write the reference (or with ``--check`` compare it); returns the exit status."""
    parser = argparse.ArgumentParser(
        prog=COMMAND, description="Write docs/config.md, the config reference rendered from "
        "the field docs of the typed config (fastrl.config.MainConfig).")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the page is stale, 0 when current")
    parser.add_argument("--output", type=Path, default=DOC_PATH,
                        help=f"the page (default: {DOC_PATH})")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.is_file() else None
        if current == page:
            print(f"{args.output} is current")
            return 0
        why = "does not exist" if current is None else \
            "is stale: the config's sections, field docs or defaults changed"
        print(f"{args.output} {why}; run `{COMMAND}` and commit the result", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(page, encoding="utf-8")
    print(f"wrote {args.output} ({len(page):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
