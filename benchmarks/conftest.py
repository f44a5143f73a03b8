"""The micro-benchmarks' JSON (``--benchmark-json FILE``) as a committed result file: the
command and the machine beside pytest-benchmark's own record, and each benchmark's median
in microseconds under ``medians_us``, so that docs can link a figure to it."""

from __future__ import annotations

from fastrl.bench.report import provenance


def pytest_benchmark_update_json(config, benchmarks, output_json) -> None:
    """Add ``command``, ``machine`` and ``medians_us`` to the JSON pytest-benchmark writes."""
    output_json.update(provenance("python -m pytest"))
    output_json["medians_us"] = {b["name"]: b["stats"]["median"] * 1e6
                                 for b in output_json["benchmarks"]}
