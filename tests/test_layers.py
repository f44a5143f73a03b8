"""The package's shape: layers import one way (docs/architecture.md), modules import each
other without cycles, and only the algorithm plug-ins know algorithms by name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import fastrl
from fastrl.algos.registry import ALGORITHMS

ROOT = Path(fastrl.__file__).parent

#: Lowest first: a module may import its own layer or lower ones (docs/architecture.md).
LAYERS = [
    ["fastrl.core", "fastrl.callbacks"],
    ["fastrl.memory", "fastrl.replay", "fastrl.envs", "fastrl.models", "fastrl.selfplay",
     "fastrl.population.config", "fastrl.tracking.config"],
    ["fastrl.algos"],
    ["fastrl.config", "fastrl.compat", "fastrl.population"],
    ["fastrl.plan", "fastrl.checkpoint", "fastrl.resume", "fastrl.eval.harness",
     "fastrl.eval.policy", "fastrl.eval.checkpoints", "fastrl.telemetry", "fastrl.tracking"],
    ["fastrl.rollout", "fastrl.learner"],
    ["fastrl.runtime"],
    ["fastrl.trainer", "fastrl.errors", "fastrl.export"],
    ["fastrl.train", "fastrl.describe", "fastrl.eval.cli", "fastrl.eval.__main__",
     "fastrl.bench", "fastrl.config_reference", "fastrl.sweep"],
]


def module_name(path: Path) -> str:
    """``fastrl.a.b`` for ``ROOT/a/b.py`` (``fastrl.a`` for ``ROOT/a/__init__.py``)."""
    parts = ("fastrl", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def layer_of(module: str) -> int | None:
    """The layer of ``module`` (by its longest listed prefix), None for a bare package
    ``__init__`` that no layer lists."""
    best = None
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (i, len(prefix))
    return best[0] if best else None


def imports_of(module: str) -> set[str]:
    """The fastrl modules ``module`` imports (anywhere in it: function bodies and
    ``if TYPE_CHECKING:`` blocks included, its own parent packages excluded)."""
    tree = ast.parse(MODULES[module].read_text())
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    parents = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
    return {m for m in found if m in MODULES and m not in parents and m != module}


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in MODULES if layer_of(m) is None and
                      MODULES[m].name != "__init__.py")
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"


def test_layers_import_downwards_only():
    upward = []
    for module in sorted(MODULES):
        here = layer_of(module)
        if here is None:
            continue
        for target in sorted(imports_of(module)):
            there = layer_of(target)
            if there is not None and there > here:
                upward.append(f"{module} (layer {here}) imports {target} (layer {there})")
    assert not upward, "\n".join(upward)


def test_no_module_imports_the_package_root():
    # fastrl/__init__.py sits above every layer: a module that reads fastrl.__version__
    # through it would point an arrow back up (it lives in fastrl.core.version).
    upward = sorted(m for m in MODULES if m != "fastrl" and "fastrl" in imports_of(m))
    assert not upward, f"modules importing the package root: {upward}"


TESTS = ROOT.parent / "tests"


def test_no_test_module_imports_another():
    # Shared helpers live in tests/helpers.py (and the scripted envs and policies beside it).
    test_modules = {p.stem for p in TESTS.rglob("test_*.py")}
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.relative_to(TESTS)} imports {n}" for n in names
                          if n.split(".")[-1] in test_modules]
    assert not offenders, "\n".join(offenders)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (module -> the modules it imports), or None."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def walk(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state:
                cycle = walk(n)
                if cycle:
                    return cycle
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state:
            cycle = walk(m)
            if cycle:
                return cycle
    return None


def test_modules_import_each_other_without_cycles():
    cycle = find_cycle({m: imports_of(m) for m in MODULES})
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_an_import_for_type_checking_only_counts(tmp_path, monkeypatch):
    # The config -> algos -> config circle once hid behind `if TYPE_CHECKING:`.
    (tmp_path / "low.py").write_text("from typing import TYPE_CHECKING\n"
                                     "if TYPE_CHECKING:\n    from fastrl.high import X\n")
    (tmp_path / "high.py").write_text("from fastrl.low import Y\n")
    monkeypatch.setitem(MODULES, "fastrl.low", tmp_path / "low.py")
    monkeypatch.setitem(MODULES, "fastrl.high", tmp_path / "high.py")
    assert imports_of("fastrl.low") == {"fastrl.high"}
    assert find_cycle({m: imports_of(m) for m in ("fastrl.low", "fastrl.high")}) == \
        ["fastrl.high", "fastrl.low", "fastrl.high"]


def _names_compared(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, name)`` of every algorithm name compared with (``==``, ``!=``, ``in``) or
    used as a dict key."""
    names = set(ALGORITHMS)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for part in (node.left, *node.comparators):
                consts = part.elts if isinstance(part, (ast.Tuple, ast.List, ast.Set)) \
                    else [part]
                found += [(node.lineno, c.value) for c in consts
                          if isinstance(c, ast.Constant) and c.value in names]
        elif isinstance(node, ast.Dict):
            found += [(node.lineno, k.value) for k in node.keys
                      if isinstance(k, ast.Constant) and k.value in names]
    return found


def test_only_the_plug_ins_decide_by_algorithm_name():
    offenders = [f"{MODULES[m].relative_to(ROOT.parent)}:{line}: {name!r}"
                 for m in sorted(MODULES) if not m.startswith("fastrl.algos")
                 for line, name in _names_compared(ast.parse(MODULES[m].read_text()))]
    assert not offenders, "algorithm names compared outside fastrl.algos:\n" + \
        "\n".join(offenders)


def test_the_name_check_finds_a_comparison():
    tree = ast.parse("if cfg.algo.name in ('dqn', 'x'):\n    pass\nT = {'sac': 1}\n")
    assert _names_compared(tree) == [(1, "dqn"), (3, "sac")]


def test_every_algorithm_module_is_registered_under_its_name():
    modules = {m.rpartition(".")[2] for m in MODULES if m.startswith("fastrl.algos.")}
    assert set(ALGORITHMS) <= modules
    for name, algorithm in ALGORITHMS.items():
        assert algorithm.name == name
        assert algorithm.trains == (algorithm.make_update is not None)


#: The middle of the pipeline: a feature reaches it through the actor's hooks, the slot's
#: weight, a LearnerHook or a feed protocol (docs/architecture.md, "Adding a feature").
FEATURE_BLIND = ("fastrl.rollout.collector", "fastrl.learner.learner", "fastrl.learner.feeds")
FEATURE_WORDS = re.compile(r"recurrent|selfplay|self-play|\bpool|agents|[\"']active[\"']",
                           re.IGNORECASE)


def _actor_isinstance(tree: ast.AST) -> list[int]:
    """Lines of ``isinstance(x, <a name ending in Actor>)``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            names = [n.id if isinstance(n, ast.Name) else getattr(n, "attr", "")
                     for n in ast.walk(node.args[1])]
            found += [node.lineno for name in names if name.endswith("Actor")]
    return found


def test_the_collector_and_the_learner_name_no_feature():
    offenders = []
    for module in FEATURE_BLIND:
        text = MODULES[module].read_text()
        offenders += [f"{module}:{i}: {line.strip()}" for i, line in
                      enumerate(text.splitlines(), 1) if FEATURE_WORDS.search(line)]
        offenders += [f"{module}:{i}: isinstance of an actor class"
                      for i in _actor_isinstance(ast.parse(text))]
    assert not offenders, "\n".join(offenders)


def test_the_feature_check_finds_a_branch():
    tree = ast.parse("if isinstance(act, RecurrentActor):\n    pass\n"
                     "ok = isinstance(e, DiskFull)\n")
    assert _actor_isinstance(tree) == [1]
    assert FEATURE_WORDS.search('if "active" not in slot:')
    assert FEATURE_WORDS.search("self.pool = pool") and not FEATURE_WORDS.search("spool_up")
