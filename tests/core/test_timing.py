"""The end-of-run stage table (fastrl.core.timing): shares of each process's stages, the
workers averaged, and the seconds compiling numba kernels shown apart from the stages."""

from __future__ import annotations

from fastrl.core.timing import JIT, format_table, verdict


def test_compile_seconds_are_a_row_of_their_own_not_a_stage():
    table = {"learner": {"train": 3.0, "waiting": 1.0, JIT: 2.5},
             "worker 0": {"rollout": 1.0, "waiting": 3.0, JIT: 0.2},
             "worker 1": {"rollout": 1.0, "waiting": 3.0, JIT: 0.4}}
    lines = format_table(table).splitlines()
    assert lines[0].split() == ["stage", "learner", "workers", "(mean", "of", "2)"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:-1]}
    assert rows["train"] == ["3.00s", "75%", "0.00s", "0%"]
    assert rows["total"] == ["4.00s", "100%", "4.00s", "100%"]  # jit inside, not added
    assert rows["(numba"] == ["jit)", "2.50s", "0.30s"]
    # the verdict weighs stages only: compile seconds do not make the learner look busy
    assert verdict(table) == verdict({k: {s: v for s, v in row.items() if s != JIT}
                                      for k, row in table.items()})
    assert lines[-1] == verdict(table)
