#!/usr/bin/env python3
"""Writes SYNTHETIC results (made-up numbers, not measurements) for plots/test_plots.py and the
notebook's synthetic test: plots/testdata/synthetic/synthetic-gpu/{bench.json,
bench_training.json, pytorch.jsonl, canonical.jsonl, error_vs_seq.jsonl}, in the current schema.

Every benchmark has REPS repetitions, shuffled as --benchmark_enable_random_interleaving
leaves them, whose median_ms are the model's time times SCALES (so the median is the model's
time and differs from the first, the mean, the min and the max), plus "aggregate" entries
whose numbers are wrong on purpose (a reader must skip them). forward/09_register_tiled and
training/02_persistent refuse H = 1024 ('unsupported: ...'); forward/11_half is FP16.
error_vs_seq.jsonl (scripts/error_vs_seq.sh's records) starts with a stale, failed record whose
error is wrong on purpose: a later record of the same point replaces it.

usage: plots/testdata/make_synthetic.py [OUT]   (default: plots/testdata/synthetic/)
"""
import json
import math
import random
import sys
from pathlib import Path

REPS, SCALES = 3, (1.3, 1.0, 0.9)  # repetition i's time: the model's times SCALES[i]
CONTEXT = {"gpu": "SYNTHETIC GPU (not a measurement)", "git_commit": "synth0commit",
           "date_utc": "2000-01-01T00:00:00Z"}
GROUPS = {"canonical": [(512, 64, 4)],
          "batch_sweep": [(h, b, 1) for h in (512, 1024) for b in (1, 8, 64)],
          "hidden_sweep": [(h, 64, 4) for h in (256, 512, 1024)]}
# implementation: (µs of overhead per step and layer, share of a 60 TFLOP/s rate, precision)
FORWARD = {"forward/00_naive": (160, 0.2, "fp32"), "forward/03_fused_pointwise": (25, 0.35, "fp32"),
           "forward/07_persistent_barrier": (6, 0.3, "fp32"),
           "forward/09_register_tiled": (3, 0.5, "fp32"), "forward/11_half": (2, 1.5, "fp16"),
           "cudnn_standard": (12, 0.5, "fp32"), "cudnn_persist_static": (2.5, 0.3, "fp32"),
           "cudnn_persist_dynamic": (5, 0.4, "fp32"), "pytorch": (14, 0.45, "fp32")}
TRAINING = {"training/00_naive": (400, 0.2, "fp32"), "training/02_persistent": (8, 0.4, "fp32"),
            "cudnn_standard_training": (30, 0.5, "fp32"),
            "cudnn_persist_static_training": (9, 0.3, "fp32"),
            "cudnn_persist_dynamic_training": (12, 0.4, "fp32"), "pytorch": (35, 0.45, "fp32")}
REFUSES_1024 = ("forward/09_register_tiled", "training/02_persistent")
# (implementation, precision): e, whose y's relative-norm error at T is e (1 + log10(T) / 10)
ERRORS = {("forward/09_register_tiled", "fp32"): 3e-7, ("cudnn_persist_static", "fp32"): 4e-6,
          ("forward/11_half", "fp16"): 3e-5, ("cudnn_persist_static_fp16", "fp16"): 2.5e-4,
          ("forward/11_half", "bf16"): 2.4e-4, ("cudnn_persist_static_bf16", "bf16"): 2e-3}
BOUNDS = {"fp32": 1e-5, "fp16": 1e-3, "bf16": 8e-3}  # relative norm; max-abs ten times that


def model(impl, kind, h, b, layers, t=100):
    """(ms, tflops, µs per step and layer) of the toy model; FLOPs 3× for a training pass."""
    overhead, share, _ = (TRAINING if kind == "training" else FORWARD)[impl]
    flop = 16 * h * h * b * t * layers * (3 if kind == "training" else 1)
    ms = overhead * t * layers / 1e3 + flop / (60e12 * share) * 1e3
    return ms, flop / ms / 1e9, ms * 1e3 / (t * layers)


def counters(impl, kind, h, b, layers, scale):
    ms, tflops, us = model(impl, kind, h, b, layers)
    out = {"median_ms": ms * scale, "min_ms": ms * scale * 0.95, "max_ms": ms * scale * 1.2,
           "tflops": tflops / scale, "us_per_step_layer": us * scale}
    if kind == "training":
        out.update(forward_ms=ms * scale * 0.4, backward_ms=ms * scale * 0.5)
    return out


def bench(kind, impls):
    entries = []
    for group, shapes in GROUPS.items():
        for impl, (_, _, precision) in impls.items():
            for h, b, layers in shapes if impl != "pytorch" and (impl != "forward/11_half"
                                                                or group == "canonical") else ():
                name = f"{impl}/{group}/H:{h}/I:{h}/B:{b}/T:100/L:{layers}/manual_time"
                series = impl.split("/")[0] if "/" in impl else "none"
                base = {"name": name, "run_name": name, "repetitions": REPS, "time_unit": "ms",
                        "label": f"series={series} kind={kind} precision={precision}"}
                for i, scale in enumerate(SCALES):
                    entry = dict(base, run_type="iteration", repetition_index=i)
                    if impl in REFUSES_1024 and h == 1024:
                        entry.update(error_occurred=True, error_message="unsupported: H > 512")
                    else:
                        entry.update(counters(impl, kind, h, b, layers, scale))
                    entries.append(entry)
                entries.append(dict(base, name=name + "_median", run_type="aggregate",
                                    aggregate_name="median", median_ms=999.0, tflops=999.0))
    if kind == "forward":
        for name, key, value in (("fp32_fma_peak", "tflops", 60.0),
                                 ("grid_sync/blocks:132", "us_per_barrier", 1.1),
                                 ("grid_sync/blocks:32", "us_per_barrier", 1.0)):
            entries += [{"name": name, "run_name": name, "run_type": "iteration",
                         "repetition_index": i, key: value * scale} for i, scale in
                        enumerate(SCALES)]
    random.Random(1).shuffle(entries)
    return {"context": CONTEXT, "benchmarks": entries}


def pytorch_records():
    for kind, impls in (("forward", FORWARD), ("training", TRAINING)):
        for h, b, layers in {s for shapes in GROUPS.values() for s in shapes}:
            ms, tflops, us = model("pytorch", kind, h, b, layers)
            record = {"stage": "pytorch", "kind": kind, "precision": "fp32", "hidden": h,
                      "input_size": h, "batch": b, "seq_len": 100, "layers": layers,
                      "ms": {"median": ms, "min": ms * 0.95, "max": ms * 1.2}, "tflops": tflops,
                      "us_per_step_layer": us, "env": {"torch": "0.0.0-synthetic"}}
            if kind == "training":
                record["phases"] = {p: {"median": ms * f, "min": ms * f, "max": ms * f}
                                    for p, f in (("forward", 0.4), ("backward", 0.5))}
            yield record


def error_records():
    stale = ("forward/11_half", "fp16", 10, 0.999)  # replaced by the record of the same point
    for impl, precision, t, error in [stale] + [(i, p, t, e * (1 + math.log10(t) / 10)) for t in
                                                (10, 100, 1000) for (i, p), e in ERRORS.items()]:
        passed = error <= BOUNDS[precision]
        y = {"relative_norm": error, "max_absolute": error * 0.8, "passed": passed, "bound": {
            "relative_norm": BOUNDS[precision], "max_absolute": BOUNDS[precision] * 10}}
        yield {"stage": impl, "kind": "forward", "precision": precision, "hidden": 512,
               "input_size": 512, "batch": 8, "seq_len": t, "layers": 1, "env": CONTEXT,
               "check": {"performed": True, "passed": passed, "tensors": {"y": y}}}


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "synthetic")
    folder = out / "synthetic-gpu"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench.json").write_text(json.dumps(bench("forward", FORWARD), indent=1) + "\n")
    (folder / "bench_training.json").write_text(json.dumps(bench("training", TRAINING),
                                                           indent=1) + "\n")
    records = sorted(pytorch_records(), key=json.dumps)
    (folder / "pytorch.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    checks = [{"stage": "forward/00_naive", "kind": "forward", "check": {"passed": True,
                                                                       "performed": True}},
              {"stage": "training/00_naive", "kind": "training", "check": {
                  "passed": True, "performed": True, "not_checked": ["the gradients (synthetic)"]}}]
    (folder / "canonical.jsonl").write_text("".join(json.dumps(dict(
        c, precision="fp32", hidden=512, input_size=512, batch=64, seq_len=100, layers=4)) + "\n"
        for c in checks))
    (folder / "error_vs_seq.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                       for r in error_records()))
    print(f"make_synthetic: wrote {folder}")


if __name__ == "__main__":
    main()
