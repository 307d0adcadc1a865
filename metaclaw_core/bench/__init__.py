"""MetaClaw-Bench harness: run a suite day by day in baseline, skills or full mode; report.

Entry points: ``metaclaw bench run|report`` and ``metaclaw models fetch|serve``
(:mod:`metaclaw_core.bench.cli`). See docs/benchmarks.md.
"""
