"""Is training being started by a script's module-level code, outside the guard
``if __name__ == "__main__":``?

Every child process of a run (started through the fork server, as with ``spawn``) imports
the parent's main module before it runs: code at its top level runs again there, and a
``Trainer.fit()`` reached that way tries to start processes from a child still starting
itself, which multiprocessing refuses with a traceback per child. The parent can tell
beforehand: the frame of the main module's top-level code is on its stack, and the line it
is at either lies in the body of such a guard or does not.
"""

from __future__ import annotations

import ast
import sys
from types import FrameType


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either operand order)."""
    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq)):
        return False
    operands = [node.test.left, *node.test.comparators]
    names = {o.id for o in operands if isinstance(o, ast.Name)}
    constants = {o.value for o in operands if isinstance(o, ast.Constant)}
    return names == {"__name__"} and constants == {"__main__"}


def guarded(source: str, line: int) -> bool:
    """True when ``line`` of the module ``source`` lies in the body of a top-level
    ``if __name__ == "__main__":`` (False for a line anywhere else at top level)."""
    for node in ast.parse(source).body:
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            return _is_main_guard(node) and node.body[0].lineno <= line <= \
                max(n.end_lineno or n.lineno for n in node.body)
    return False


def _main_module_frame(frame: FrameType | None) -> FrameType | None:
    """The frame of the main module's top-level code on this stack, if any."""
    main = sys.modules.get("__main__")
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is getattr(main, "__dict__",
                                                                             None):
            return frame
        frame = frame.f_back
    return None


def unguarded_call_site(frame: FrameType | None = None) -> tuple[str, int] | None:
    """``(script path, line)`` when the caller's stack runs from the main module's top-level
    code outside an ``if __name__ == "__main__":`` block, which children would run again;
    None otherwise (a guarded call, an interactive session, ``python -c``, a notebook, or a
    main module whose source cannot be read)."""
    top = _main_module_frame(frame or sys._getframe(1))
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if top is None or not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        return None if guarded(source, top.f_lineno) else (path, top.f_lineno)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
