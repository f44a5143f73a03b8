"""fastrl.core.main_guard: which lines of a main script run again in every child process
(top-level code outside ``if __name__ == "__main__":``)."""

from __future__ import annotations

import pytest

from fastrl.core.main_guard import guarded

SCRIPT = '''import fastrl

def main():
    fastrl.Trainer(cfg).fit()

main()

if __name__ == "__main__":
    main()
    print("done")
else:
    main()

if "__main__" == __name__:
    main()

if __name__ != "__main__":
    main()

try:
    if __name__ == "__main__" and len(sys.argv) > 1:
        with open("log") as f:
            main()
except KeyboardInterrupt:
    main()

if __name__ == "__main__":
    @decorated
    def run():
        pass
    run()
elif True:
    main()
'''


@pytest.mark.parametrize("line, expected", [
    (4, False),   # inside a function: what counts is the top-level line that called it
    (6, False),   # main() at top level: children run it again
    (9, True), (10, True),  # the guard's body
    (12, False),  # its else branch runs in the children
    (15, True),   # the guard written the other way round
    (18, False),  # not a guard
    (21, False),  # the guard's own test line
    (23, True),   # nested in try and with, under a guard joined by `and`
    (25, False),  # an except handler outside the guard
    (28, True), (29, True), (31, True),  # a decorated def and its call inside the guard
    (33, False),  # an elif that is no guard
])
def test_only_code_under_a_main_guard_is_guarded(line, expected):
    assert guarded(SCRIPT, line) is expected
