#!/usr/bin/env python3
"""Writes SYNTHETIC results (made-up numbers, not measurements) for the tests of make_plots.py.

The numbers come from a toy model (a fixed launch overhead per step and layer plus the FLOPs at
a fixed share of a 60.5 TFLOP/s FP32 rate) chosen only so that the figures look like real ones:
stage 00 near 72 ms at the canonical config, cuDNN's standard algorithm near 8 ms. Nothing here
is a result; the real pipeline never reads this folder (only plots/test_plots.py and the
notebook's synthetic test do), and the GPU name in every file says SYNTHETIC.

The configurations are the standard ones, read from common/standard_configs.json (or --configs).

Writes, under OUT (default: plots/testdata/synthetic/):
  synthetic-gpu/        the CURRENT schema (stage names '<series>/<NN_slug>', series, kind and
                        precision in every record and bench label):
    bench.json          Google Benchmark JSON: every forward stage and cuDNN algorithm over
                        every group of the standard configurations, fp32_fma_peak, skipped
                        entries in both Google Benchmark 1.7 and 1.8 styles, a stage in FP16
                        (forward/11_half_precision), and the training kind over every group:
                        two training stages and cuDNN's three training algorithms (with
                        forward_ms and backward_ms; the total is not their sum, as in a real
                        bench where each is timed on its own), which the forward figures must
                        ignore and the training figures show; not the persistent stages 07-09
                        (as on the H100, where they came after the full run)
    bench_persistent.json  the persistent run: forward stages 07-10 and cuDNN's three forward
                        algorithms over every group, 10% slower than bench.json (so that a test
                        can tell which run a number came from), its own commit and date
                        (PERSISTENT_ENV), 07-09 refusing H > 1024, 10 its bench.json limits
    pytorch.jsonl       PyTorch records for the same configs (one config twice: the last must
                        win), then PyTorch training records ("pytorch_training", kind training,
                        with "phases") at the same configs
    canonical.jsonl     checked runs of three forward stages (00, 01 and the persistent 07:
                        the stage READMEs quote the check) and one training run (with "phases",
                        its gradients not checked)
  synthetic-no-bench/   the OLD schema (names like '00_naive', no series, kind or precision):
                        canonical.jsonl and pytorch.jsonl only (the fallback path, and the proof
                        that old results are still read)

usage: plots/testdata/make_synthetic.py [OUT] [--configs FILE]
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import make_plots  # noqa: E402  (the standard configurations, read the same way)

PEAK_TFLOPS = 60.5
GPU = "SYNTHETIC TEST DATA (not a measurement)"
ENV = {"gpu": GPU, "sm_count": "132", "driver": "000.00", "cuda_runtime": "13.0",
       "cublas": "13.1.0", "cudnn": "9.14.0", "git_commit": "synthetic", "date_utc":
       "2000-01-01T00:00:00Z", "clocks": "synthetic"}
PERSISTENT_ENV = dict(ENV, git_commit="synthetic-persistent", date_utc="2000-01-02T00:00:00Z")
PERSISTENT_SCALE = 1.1  # bench_persistent.json's times against bench.json's
BOUND = {"relative_norm": 1e-5, "max_absolute": 1e-4}  # the FP32 check bounds

# impl: (launch overhead per step and layer in µs, share of the FP32 rate in the GEMMs,
#        whether layers overlap when L > 1, precision)
MODEL = {
    "forward/00_naive": (165, 0.25, False, "fp32"),
    "forward/01_combined_gemms": (62, 0.35, False, "fp32"),
    "forward/02_streams": (50, 0.35, False, "fp32"),
    "forward/03_fused_pointwise": (25, 0.35, False, "fp32"),
    "forward/04_transposed_weights": (21, 0.40, False, "fp32"),
    "forward/05_layer_wavefront": (21, 0.40, True, "fp32"),
    "forward/06_cuda_graph": (8, 0.40, True, "fp32"),
    "forward/07_persistent_barrier": (6, 0.45, True, "fp32"),
    "forward/08_published_h": (5, 0.45, True, "fp32"),
    "forward/09_register_tiled": (3.5, 0.55, True, "fp32"),
    "forward/10_small_batch_registers": (3, 0.55, True, "fp32"),
    "forward/11_half_precision": (2.5, 1.6, True, "fp16"),
    "cudnn_standard": (12, 0.50, True, "fp32"),
    "cudnn_persist_static": (4, 0.50, True, "fp32"),
    "cudnn_persist_dynamic": (7, 0.45, True, "fp32"),
    "pytorch": (14, 0.50, True, "fp32"),
}
# The persistent run (bench_persistent.json); its stages 07-09 are in no other bench file.
PERSISTENT_RUN = ("forward/07_persistent_barrier", "forward/08_published_h",
                  "forward/09_register_tiled", "forward/10_small_batch_registers",
                  "cudnn_standard", "cudnn_persist_static", "cudnn_persist_dynamic")
PERSISTENT_ONLY = PERSISTENT_RUN[:3]
TRAINING = "training/00_naive"  # the training stage of canonical.jsonl's training record
# Training implementations: (the forward model of their forward pass, backward ÷ forward). The
# total is TRAINING_TOTAL × (forward + backward): each is timed on its own in a real bench.
TRAINING_MODEL = {
    "training/00_naive": ("forward/00_naive", 2.0),
    "training/01_combined_gemms": ("forward/01_combined_gemms", 1.8),
    "cudnn_standard_training": ("cudnn_standard", 1.5),
    "cudnn_persist_static_training": ("cudnn_persist_static", 1.4),
    "cudnn_persist_dynamic_training": ("cudnn_persist_dynamic", 1.6),
    "pytorch": ("pytorch", 1.5),
}
TRAINING_TOTAL = 0.95


def series_of(impl):
    return impl.split("/")[0] if "/" in impl else ""


def unsupported(impl, h, b, group):
    """Synthetic limits, so that skipped entries exist (message, Google Benchmark style). The
    messages start with 'unsupported: ', as lstm_bench's refusals do (its failed runs do not)."""
    if impl in PERSISTENT_ONLY and h > 1024:
        return "unsupported: the recurrent weights do not fit on chip (synthetic limit)", "1.8"
    if impl == "forward/10_small_batch_registers" and (h > 1024 or (h == 1024 and b > 128)):
        return "unsupported: recurrent weights do not fit on chip at this size (synthetic limit)", "1.8"
    if impl in ("cudnn_persist_static", "cudnn_persist_static_training") and h > 1024:
        return "unsupported: CUDNN_STATUS_NOT_SUPPORTED (synthetic)", "1.7"
    if impl == "training/01_combined_gemms" and h > 1024:
        return "unsupported: synthetic limit of a training stage", "1.8"
    if impl == "cudnn_persist_dynamic" and group == "canonical":
        return "unsupported: synthetic skip: exercises the 'unsupported' row of the table", "1.7"
    return None


def flop_count(h, i, b, t, layers):
    return sum(2 * t * b * 4 * h * ((i if layer == 0 else h) + h) for layer in range(layers))


def timing(impl, h, i, b, t, layers):
    """(median_ms, min_ms, max_ms, tflops, us_per_step_layer) of the toy model."""
    overhead, share, overlap, _ = MODEL[impl]
    flop = flop_count(h, i, b, t, layers)
    compute_us = flop / (share * PEAK_TFLOPS * 1e12) * 1e6 / (t * layers)
    us = (overhead + compute_us) * (0.75 if overlap and layers > 1 else 1.0)
    median = us * t * layers / 1000
    values = (median, median * 0.97, median * 1.06, flop / (median / 1000) / 1e12, us)
    return tuple(round(v, 4) for v in values)


def label(impl, kind, precision):
    return f"series={series_of(impl)} kind={kind} precision={precision}"


def configs(standard):
    """(group, h, i, b, t, l) of every group of the standard configurations, in file order."""
    for name, group in standard.groups.items():
        for c in group.configs:
            yield (name, c.hidden, c.input_size, c.batch, c.seq_len, c.layers)


def bench_entry(impl, group, h, i, b, t, layers, scale=1.0):
    """A forward-kind entry of the toy model, its times × `scale`."""
    name = f"{impl}/{group}/H:{h}/I:{i}/B:{b}/T:{t}/L:{layers}/iterations:20/manual_time"
    entry = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
             "threads": 1, "label": label(impl, "forward", MODEL[impl][3])}
    skip = unsupported(impl, h, b, group)
    if skip:
        message, style = skip
        if style == "1.7":
            entry.update(error_occurred=True, error_message=message)
        else:  # 1.8 style, and with no counters at all: sizes must come from the name
            entry.update(skipped=True, skip_message=message, iterations=0, real_time=0,
                         cpu_time=0, time_unit="ms")
            return entry
    median, low, high, tflops, us = timing(impl, h, i, b, t, layers) if not skip else (0,) * 5
    if scale != 1.0 and not skip:
        median, low, high, us = (round(v * scale, 4) for v in (median, low, high, us))
        tflops = round(tflops / scale, 4)
    entry.update(iterations=20, real_time=median, cpu_time=median, time_unit="ms", hidden=h,
                 input_size=i, batch=b, seq_len=t, layers=layers, median_ms=median, min_ms=low,
                 max_ms=high, tflops=tflops, us_per_step_layer=us)
    return entry


def bench_document(context, entries):
    """Google Benchmark's document, one entry a line (small and diffable)."""
    body = ",\n".join(json.dumps(e, sort_keys=True) for e in entries)
    return ('{"context": ' + json.dumps(context, sort_keys=True) + ',\n"benchmarks": [\n' + body
            + "\n]}\n")


def bench_context(env):
    return dict(env, date=env["date_utc"].replace("Z", "+00:00"), host_name="synthetic",
                executable="synthetic", num_cpus=16, mhz_per_cpu=2000,
                library_build_type="release")


def training_timing(impl, h, i, b, t, layers):
    """(forward, backward, total) medians in ms of a training implementation's toy model."""
    model, backward_ratio = TRAINING_MODEL[impl]
    forward = timing(model, h, i, b, t, layers)[0]
    backward = round(backward_ratio * forward, 4)
    return forward, backward, round(TRAINING_TOTAL * (forward + backward), 4)


def training_entry(group, h, i, b, t, layers, impl=TRAINING):
    """A training-kind entry: forward and backward medians, median_ms the total's, the FLOPs of
    the training pass (3× the forward's)."""
    name = f"{impl}/{group}/H:{h}/I:{i}/B:{b}/T:{t}/L:{layers}/iterations:20/manual_time"
    entry = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
             "threads": 1, "label": label(impl, "training", "fp32")}
    skip = unsupported(impl, h, b, group)
    if skip:
        message, style = skip
        if style == "1.7":
            entry.update(error_occurred=True, error_message=message)
        else:
            entry.update(skipped=True, skip_message=message, iterations=0, real_time=0,
                         cpu_time=0, time_unit="ms")
        return entry
    forward, backward, total = training_timing(impl, h, i, b, t, layers)
    entry.update(iterations=20, real_time=total, cpu_time=total, time_unit="ms", hidden=h,
                 input_size=i, batch=b, seq_len=t, layers=layers, median_ms=total,
                 min_ms=round(total * 0.97, 4), max_ms=round(total * 1.06, 4),
                 forward_ms=forward, backward_ms=backward,
                 tflops=round(3 * flop_count(h, i, b, t, layers) / (total / 1000) / 1e12, 4),
                 us_per_step_layer=round(total * 1000 / (t * layers), 4))
    return entry


def check(passed=True):
    return {"performed": True, "passed": passed, "steps_checked": 100, "steps_total": 100,
            "tensors": {name: {"relative_norm": 2e-7, "max_absolute": 2e-7, "nonfinite": 0,
                               "passed": passed, "bound": BOUND} for name in ("cy", "hy", "y")}}


def record(stage, h, i, b, t, layers, scale=1.0, old_schema=False):
    """A stage's (or PyTorch's) JSON Lines record; old_schema: as written before series."""
    median, low, high, tflops, us = timing(stage, h, i, b, t, layers)
    result = {"stage": stage, "hidden": h, "input_size": i, "batch": b, "seq_len": t,
              "layers": layers, "dtype": "fp32", "iters": 20,
              "ms": {"median": median * scale, "min": low * scale, "max": high * scale},
              "tflops": tflops / scale, "us_per_step_layer": us * scale,
              "flop": float(flop_count(h, i, b, t, layers)),
              "env": dict(ENV, torch="0.0.0+synthetic") if stage == "pytorch" else ENV}
    if old_schema:
        result.update(stage=stage.split("/")[-1], check={"performed": True, "passed": True})
        del result["flop"]
        return result
    result.update(series=series_of(stage), kind="forward", precision=MODEL[stage][3],
                  check=check())
    return result


def training_record(h, i, b, t, layers, impl=TRAINING):
    """A training run record (the stages' --json schema, with "phases"): a training stage's
    checked run (its gradients over the reference's budget, as at the real canonical config),
    or PyTorch's training pass ('pytorch_training')."""
    entry = training_entry("canonical", h, i, b, t, layers, impl=impl)
    phases = {phase: {"median": entry[f"{phase}_ms"], "min": entry[f"{phase}_ms"] * 0.97,
                      "max": entry[f"{phase}_ms"] * 1.06} for phase in ("forward", "backward")}
    result = {"stage": impl, "series": series_of(impl), "kind": "training", "precision": "fp32",
              "hidden": h, "input_size": i, "batch": b, "seq_len": t, "layers": layers,
              "dtype": "fp32", "iters": 20, "flop": 3.0 * flop_count(h, i, b, t, layers),
              "ms": {"median": entry["median_ms"], "min": entry["min_ms"],
                     "max": entry["max_ms"]},
              "phases": phases, "tflops": entry["tflops"],
              "us_per_step_layer": entry["us_per_step_layer"]}
    if impl == "pytorch":
        result.update(stage="pytorch_training", check={"performed": False},
                      env=dict(ENV, torch="0.0.0+synthetic"))
    else:
        result.update(check=dict(check(), not_checked=[
            "the gradients were NOT checked: over the reference's budget (synthetic)"]), env=ENV)
    return result


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", default=str(Path(__file__).resolve().parent /
                                                      "synthetic"))
    parser.add_argument("--configs", help="the standard configurations (default "
                                          "common/standard_configs.json)")
    args = parser.parse_args()
    try:
        standard = make_plots.load_standard_configs(args.configs)
    except make_plots.InputError as error:
        sys.exit(f"make_synthetic: error: {error}")
    out = Path(args.out)
    gpu, no_bench = out / "synthetic-gpu", out / "synthetic-no-bench"
    gpu.mkdir(parents=True, exist_ok=True)
    no_bench.mkdir(parents=True, exist_ok=True)
    impls = [k for k in MODEL if k != "pytorch" and k not in PERSISTENT_ONLY]
    entries = [{"name": "fp32_fma_peak/iterations:10/manual_time", "run_type": "iteration",
                "iterations": 10, "real_time": 1.0, "cpu_time": 1.0, "time_unit": "ms",
                "tflops": PEAK_TFLOPS}]
    for config in configs(standard):
        entries += [bench_entry(impl, *config) for impl in impls]
        entries += [training_entry(*config, impl=impl) for impl in TRAINING_MODEL
                    if impl != "pytorch"]
    (gpu / "bench.json").write_text(bench_document(bench_context(ENV), entries))
    persistent = [bench_entry(impl, *config, scale=PERSISTENT_SCALE)
                  for config in configs(standard) for impl in PERSISTENT_RUN]
    (gpu / "bench_persistent.json").write_text(bench_document(bench_context(PERSISTENT_ENV),
                                                              persistent))
    canonical = tuple(standard.canonical)
    pytorch = [record("pytorch", *config[1:]) for config in configs(standard)]
    pytorch.insert(0, record("pytorch", *canonical, scale=3.0))  # superseded below
    pytorch += [training_record(*config[1:], impl="pytorch") for config in configs(standard)]
    write_jsonl(gpu / "pytorch.jsonl", pytorch)
    checked = [record("forward/00_naive", *canonical, scale=0.8),
               record("forward/00_naive", *canonical),
               record("forward/01_combined_gemms", *canonical),
               record("forward/07_persistent_barrier", *canonical)]
    write_jsonl(gpu / "canonical.jsonl", checked + [training_record(*canonical)])
    write_jsonl(no_bench / "canonical.jsonl",
                [record("forward/00_naive", *canonical, scale=0.8, old_schema=True),
                 record("forward/00_naive", *canonical, old_schema=True),
                 record("forward/01_combined_gemms", *canonical, old_schema=True)])
    write_jsonl(no_bench / "pytorch.jsonl", [record("pytorch", *canonical, old_schema=True)])
    for path in sorted(out.glob("*/*")):
        print(f"make_synthetic: wrote {path}")


if __name__ == "__main__":
    main()
