"""docs/config.md is the config reference that fastrl.config_reference renders (in-process)."""

from __future__ import annotations

from dataclasses import field, make_dataclass

from fastrl import config_reference
from fastrl.config import field_docs

FIX = f"run `{config_reference.COMMAND}` and commit docs/config.md"


def test_config_page_is_current():
    path = config_reference.DOC_PATH
    assert path.is_file(), f"{path} is missing: {FIX}"
    assert path.read_text(encoding="utf-8") == config_reference.render(), \
        f"{path} is stale (a field doc, default or section of fastrl/config.py changed): {FIX}"


def test_every_leaf_key_is_in_the_page():
    page = config_reference.render()
    missing = [key for key, *_ in field_docs() if f"| `{key}` |" not in page]
    assert not missing, f"keys without a row in the config reference: {missing}"


def test_sections_are_found_by_walking_the_dataclasses():
    # A section generated at run time (as a plug-in's would be) gets its own table.
    inner = make_dataclass("PluginConfig", [
        ("rate", float, field(default=0.5, metadata={"doc": "a | b", "gt": 0}))],
        namespace={"__doc__": "Keys of algo.<name>."})
    outer = make_dataclass("RootConfig", [
        ("plugin", inner, field(default_factory=inner)),
        ("seed", int, field(default=1, metadata={"doc": "the seed"}))])
    page = config_reference.render(outer)
    assert "## `plugin`" in page and "## Top-level keys" in page
    assert "| `plugin.rate` | `float` | `0.5` | a \\| b *(> 0)* |" in page
    assert "Keys of algo.&lt;name>." in page  # (not an HTML tag)
    plain = make_dataclass("Plain", [("x", int, field(default=0))])
    assert "Plain(" not in config_reference.render(plain)  # a generated docstring: no intro


def test_check_flag(tmp_path, capsys):
    page = tmp_path / "config.md"
    main = config_reference.main
    assert main(["--check", "--output", str(page)]) == 1
    assert config_reference.COMMAND in capsys.readouterr().err
    assert main(["--output", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == config_reference.render()
    assert main(["--check", "--output", str(page)]) == 0
    page.write_text(page.read_text(encoding="utf-8") + "edited by hand\n", encoding="utf-8")
    assert main(["--check", "--output", str(page)]) == 1
    assert "stale" in capsys.readouterr().err
