"""Every published bench figure is a link to the committed output it comes from, and says
what that output says: ``[0.48×](benchmarks/results/FILE.json#/solve/races/0/ratio)``
links the figure to a JSON pointer (RFC 6901) into the file. The README's speed section
publishes no figure any other way."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[([^\]]*)\]\((?:\.\./)*(benchmarks/results/[^)#\s]+\.json)#(/[^)\s]*)\)")
NUMBER = re.compile(r"[<>~]?(-?[\d,]*\.?\d+)")


def linked_figures(page: Path) -> list[tuple[str, str, str]]:
    """(text, file, pointer) of every figure ``page`` links to a result file."""
    return LINK.findall(page.read_text(encoding="utf-8"))


def resolve(doc, pointer: str):
    """The value at JSON pointer ``pointer`` in ``doc`` (a URL fragment: percent-encoded,
    RFC 6901 section 6)."""
    for part in pointer.lstrip("/").split("/"):
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def shown(text: str) -> tuple[float, int]:
    """The number a figure's text shows, and its decimals."""
    m = NUMBER.search(text)
    assert m, f"a figure link without a number: [{text}]"
    digits = m.group(1).replace(",", "")
    return float(digits), len(digits.split(".")[1]) if "." in digits else 0


FIGURES = [(page.name, *fig) for page in PAGES for fig in linked_figures(page)]


def test_the_readme_s_speed_section_links_its_figures():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    speed = readme.split("## Speed", 1)[1].split("\n## ", 1)[0]
    assert LINK.search(speed), "the README's speed section links no figure to its output"


@pytest.mark.parametrize("page, text, file, pointer", FIGURES,
                         ids=[f"{p}:{t}" for p, t, *_ in FIGURES])
def test_a_linked_figure_is_what_its_output_says(page, text, file, pointer):
    path = ROOT / file
    assert path.is_file(), f"{page}: [{text}] links {file}, which is not committed"
    doc = json.loads(path.read_text())
    for key in ("command", "machine"):  # what reproduces it
        assert key in doc, f"{file} lacks its {key}"
    value = resolve(doc, pointer)
    number, decimals = shown(text)
    assert value is not None, f"{page}: [{text}] links {pointer}, which is null in {file}"
    assert round(float(value), decimals) == pytest.approx(number), \
        f"{page}: [{text}] says {number}, {file}#{pointer} is {value}"


def test_a_figure_that_differs_from_its_output_is_caught(tmp_path):
    out = tmp_path / "r.json"
    out.write_text(json.dumps({"a": [{"ratio": 0.4812}]}))
    assert resolve(json.loads(out.read_text()), "/a/0/ratio") == 0.4812
    assert shown("0.48×") == (0.48, 2) and shown("<0.31×") == (0.31, 2)
    assert shown("24,128 steps") == (24128.0, 0)
    assert round(0.4812, 2) != pytest.approx(shown("0.49×")[0])


def test_every_figure_of_the_readme_s_speed_section_is_linked():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    speed = readme.split("## Speed", 1)[1].split("\n## ", 1)[0]
    unlinked = re.findall(r"\d[\d,.]*\s?(?:×|s\b|%)", LINK.sub("", speed))
    assert not unlinked, f"figures in the README's speed section without their output: {unlinked}"
