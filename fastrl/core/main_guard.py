"""Is training being started by a script's module-level code, outside the guard
``if __name__ == "__main__":``?

Every child process of a run (started through the fork server, as with ``spawn``) imports
the parent's main script before it runs: code at its top level runs again there, and a
``Trainer.fit()`` reached that way tries to start processes from a child still starting
itself, which multiprocessing refuses with a traceback per child. The parent can tell
beforehand: the frame of the main script's top-level code is on its stack, and the line it
is at either lies inside such a guard or does not. A package's ``__main__.py`` (``python
-m package``) is never imported again by the children, as multiprocessing skips it.
"""

from __future__ import annotations

import ast
import os
import sys
import tokenize
from collections.abc import Iterator
from types import FrameType


def _is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either operand order), alone or in an ``and``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_main_test(v) for v in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    operands = [test.left, *test.comparators]
    names = {o.id for o in operands if isinstance(o, ast.Name)}
    constants = {o.value for o in operands if isinstance(o, ast.Constant)}
    return names == {"__name__"} and constants == {"__main__"}


def _span(node: ast.stmt) -> tuple[int, int]:
    """First and last line of a statement, its decorators included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
    return first, node.end_lineno or node.lineno


def _blocks(node: ast.stmt) -> Iterator[tuple[list[ast.stmt], bool]]:
    """The statement lists nested in ``node``, each with whether it runs only in the main
    process (the body of a main guard)."""
    guard = isinstance(node, ast.If) and _is_main_test(node.test)
    yield node.body if hasattr(node, "body") and isinstance(node.body, list) else [], guard
    for name in ("orelse", "finalbody"):
        yield getattr(node, name, []) or [], False
    for handler in getattr(node, "handlers", []):
        yield handler.body, False
    for case in getattr(node, "cases", []):
        yield case.body, False


def guarded(source: str, line: int) -> bool:
    """True when ``line`` of the module ``source`` lies in the body of an ``if __name__ ==
    "__main__":`` (at any depth of top-level ``if``/``try``/``with``/loop blocks)."""
    statements = ast.parse(source).body
    while True:
        node = next((n for n in statements if _span(n)[0] <= line <= _span(n)[1]), None)
        if node is None or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                             ast.ClassDef)):
            return False
        inner = next(((block, guard) for block, guard in _blocks(node)
                      if any(_span(n)[0] <= line <= _span(n)[1] for n in block)), None)
        if inner is None:
            return False  # the line of the statement itself: a test, a header, a call
        statements, guard = inner
        if guard:
            return True


def _script_frame(frame: FrameType | None, path: str) -> FrameType | None:
    """The outermost frame running the main script's top-level code, if on this stack."""
    main = sys.modules.get("__main__")
    found = None
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is main.__dict__ and \
                os.path.abspath(frame.f_code.co_filename) == path:
            found = frame
        frame = frame.f_back
    return found


def unguarded_call_site(frame: FrameType | None = None) -> tuple[str, int] | None:
    """``(script path, line)`` when the caller's stack runs from the main script's
    top-level code outside an ``if __name__ == "__main__":`` block, which children would
    run again; None otherwise (a guarded call, an interactive session, ``python -c``, a
    notebook, ``python -m package``, or a script whose source cannot be read)."""
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", "") or ""
    path = getattr(main, "__file__", None)
    if not path or spec_name == "__main__" or spec_name.endswith(".__main__"):
        return None  # (multiprocessing imports no package __main__ in its children)
    path = os.path.abspath(path)
    top = _script_frame(frame or sys._getframe(1), path)
    if top is None or top.f_lineno is None:
        return None
    try:
        with tokenize.open(path) as f:
            source = f.read()
        return None if guarded(source, top.f_lineno) else (path, top.f_lineno)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
