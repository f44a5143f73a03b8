"""The micro-benchmarks' JSON (``--benchmark-json FILE``) as a committed result file: the
command and the machine beside pytest-benchmark's own record, and each benchmark's median
in microseconds under ``medians_us``, so that docs can link a figure to it."""

from __future__ import annotations

import shlex
import sys

from fastrl.bench.report import machine_facts


def pytest_benchmark_update_json(config, benchmarks, output_json) -> None:
    """Add ``command``, ``machine`` and ``medians_us`` to the JSON pytest-benchmark writes."""
    output_json["command"] = " ".join(["python -m pytest", shlex.join(sys.argv[1:])])
    output_json["machine"] = machine_facts()
    output_json["medians_us"] = {b["name"]: b["stats"]["median"] * 1e6
                                 for b in output_json["benchmarks"]}
