#!/usr/bin/env python3
"""Compares two lstm_bench runs (Google Benchmark JSON, e.g. two bench.json of one GPU).

Per benchmark in both: the median of its repetitions' median_ms in each run and (B - A) / A,
"BEYOND" past the threshold; rows marked ">" are the canonical config of every stage and of
cuDNN's fastest algorithm in either run (forward: cudnn_standard, persist_static, persist_dynamic;
training: their *_training passes). Aggregates and skipped entries (error_occurred) are left out.
Exit 0 when it ran, whatever it found; 2 on bad input.

usage: scripts/compare_runs.py A.json B.json [--threshold PERCENT (default 5)]
"""
import argparse
import json
import re
import statistics
import sys

NAME = re.compile(r"(?P<impl>.+)/(?P<group>[a-z_]+)/H:\d+/I:\d+/B:\d+/T:\d+/L:\d+")
CUDNN = ("cudnn_standard", "cudnn_persist_static", "cudnn_persist_dynamic")


def fail(message):
    print(f"compare_runs: {message}", file=sys.stderr)
    sys.exit(2)


def medians(path):
    """{benchmark: median of its repetitions' median_ms} of one run; exits 2 on bad input."""
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except OSError as error:
        fail(f"{path}: cannot read it ({error.strerror})")
    except ValueError as error:
        fail(f"{path}: not JSON ({error})")
    entries = document.get("benchmarks") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        fail(f"{path}: not Google Benchmark JSON (no 'benchmarks' list)")
    runs = {}
    for index, entry in enumerate(entries):
        try:
            skipped = entry.get("run_type") == "aggregate" or entry.get("error_occurred")
            if skipped or "median_ms" not in entry:  # nor the ceilings (fp32_fma_peak, ...)
                continue
            name = re.sub(r"/(iterations|repeats):\d+|/manual_time", "",
                          entry.get("run_name", entry["name"]))
            runs.setdefault(name, []).append(float(entry["median_ms"]))
        except (AttributeError, KeyError, TypeError, ValueError):
            fail(f"{path}: benchmarks[{index}] has no name or no numeric median_ms")
    if not runs:
        fail(f"{path}: no benchmark with a median_ms to compare")
    return {name: statistics.median(values) for name, values in runs.items()}


def highlighted(a, b):
    """The canonical rows: every stage, and cuDNN's fastest algorithm in either run."""
    rows, cudnn = set(), {}
    for name in a.keys() & b.keys():
        match = NAME.fullmatch(name)
        if match is None or match["group"] != "canonical":
            continue
        impl = match["impl"]
        if re.sub("_training$", "", impl) in CUDNN:
            cudnn.setdefault(impl.endswith("_training"), []).append(name)
        elif not impl.startswith("cudnn_"):
            rows.add(name)
    for names in cudnn.values():
        rows.update(min(names, key=run.get) for run in (a, b))
    return rows


def summary(what, diffs, threshold):
    beyond = [name for name, diff in diffs.items() if abs(diff) > threshold]
    worst = max(diffs, key=lambda name: abs(diffs[name]), default=None)
    text = f"{what}: {len(diffs)} compared, {len(beyond)} beyond {threshold * 100:g}%"
    return text + (f"; worst {diffs[worst]:+.1%} ({worst})" if worst else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", metavar="A.json")
    parser.add_argument("b", metavar="B.json")
    parser.add_argument("--threshold", type=float, default=5.0, metavar="PERCENT",
                        help="mark differences beyond this many percent (default 5)")
    args = parser.parse_args()
    if not args.threshold > 0:
        parser.error("--threshold must be a positive number of percent")
    threshold = args.threshold / 100
    a, b = medians(args.a), medians(args.b)
    marked = highlighted(a, b)
    diffs = {name: (b[name] - a[name]) / a[name] for name in sorted(a.keys() & b.keys())
             if a[name] > 0}
    print(f"  {'benchmark':<64} {'A ms':>10} {'B ms':>10} {'B/A-1':>8}")
    for name in diffs:
        flag = "BEYOND" if abs(diffs[name]) > threshold else ""
        print(f"{'>' if name in marked else ' '} {name:<64} {a[name]:>10.3f} {b[name]:>10.3f} "
              f"{diffs[name]:>+8.1%} {flag}".rstrip())
    print(summary("all", diffs, threshold) +
          f"; {len(a.keys() - b.keys())} only in A, {len(b.keys() - a.keys())} only in B")
    print(summary("canonical (> rows)", {n: d for n, d in diffs.items() if n in marked}, threshold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
