#!/usr/bin/env python3
"""Writes SYNTHETIC results (made-up numbers, not measurements) for the tests of make_plots.py.

The numbers come from a toy model (a fixed launch overhead per step and layer plus the FLOPs at
a fixed share of a 60.5 TFLOP/s FP32 rate) chosen only so that the figures look like real ones:
stage 00 near 72 ms at the canonical config, cuDNN's standard algorithm near 8 ms. Nothing here
is a result; the real pipeline never reads this folder (only plots/test_plots.py does), and the
GPU name in every file says SYNTHETIC.

Writes, under OUT (default: plots/testdata/synthetic/):
  synthetic-gpu/bench.json        Google Benchmark JSON: every stage and cuDNN algorithm over the
                                  canonical config and both sweeps, fp32_fma_peak, and skipped
                                  entries in both Google Benchmark 1.7 and 1.8 styles
  synthetic-gpu/pytorch.jsonl     PyTorch records for the same configs (one config twice: the
                                  last must win)
  synthetic-gpu/canonical.jsonl   checked runs of two stages (the stage READMEs quote the check)
  synthetic-no-bench/             canonical.jsonl and pytorch.jsonl only (the fallback path)

usage: plots/testdata/make_synthetic.py [OUT]
"""
import json
import sys
from pathlib import Path

PEAK_TFLOPS = 60.5
GPU = "SYNTHETIC TEST DATA (not a measurement)"
ENV = {"gpu": GPU, "sm_count": "132", "driver": "000.00", "cuda_runtime": "13.0",
       "cublas": "13.1.0", "cudnn": "9.14.0", "git_commit": "synthetic", "date_utc":
       "2000-01-01T00:00:00Z", "clocks": "synthetic"}

# impl: (launch overhead per step and layer in µs, share of the FP32 rate in the GEMMs,
#        whether layers overlap when L > 1)
MODEL = {
    "00_naive": (165, 0.25, False),
    "01_combined_gemms": (62, 0.35, False),
    "02_streams": (50, 0.35, False),
    "03_fused_pointwise": (25, 0.35, False),
    "04_transposed_weights": (21, 0.40, False),
    "05_layer_wavefront": (21, 0.40, True),
    "06_cuda_graph": (8, 0.40, True),
    "07_persistent": (3, 0.55, True),
    "cudnn_standard": (12, 0.50, True),
    "cudnn_persist_static": (4, 0.50, True),
    "cudnn_persist_dynamic": (7, 0.45, True),
    "pytorch": (14, 0.50, True),
}


def unsupported(impl, h, b, group):
    """Synthetic limits, so that skipped entries exist (message, Google Benchmark style)."""
    if impl == "07_persistent" and (h > 1024 or (h == 1024 and b > 128)):
        return "recurrent weights do not fit on chip at this size (synthetic limit)", "1.8"
    if impl == "cudnn_persist_static" and h > 1024:
        return "CUDNN_STATUS_NOT_SUPPORTED (synthetic)", "1.7"
    if impl == "cudnn_persist_dynamic" and group == "canonical":
        return "synthetic skip: exercises the 'unsupported' row of the table", "1.7"
    return None


def timing(impl, h, i, b, t, layers):
    """(median_ms, min_ms, max_ms, tflops, us_per_step_layer) of the toy model."""
    overhead, share, overlap = MODEL[impl]
    flop = sum(2 * t * b * 4 * h * ((i if layer == 0 else h) + h) for layer in range(layers))
    compute_us = flop / (share * PEAK_TFLOPS * 1e12) * 1e6 / (t * layers)
    us = (overhead + compute_us) * (0.75 if overlap and layers > 1 else 1.0)
    median = us * t * layers / 1000
    values = (median, median * 0.97, median * 1.06, flop / (median / 1000) / 1e12, us)
    return tuple(round(v, 4) for v in values)


def configs():
    """(group, h, i, b, t, l) of the canonical config and both sweeps (docs/design.md)."""
    yield ("canonical", 512, 512, 64, 100, 4)
    for h in (512, 1024):
        for b in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            yield ("batch_sweep", h, h, b, 100, 1)
    for h in (256, 512, 1024, 2048):
        yield ("hidden_sweep", h, h, 64, 100, 4)


def bench_entry(impl, group, h, i, b, t, layers):
    name = f"{impl}/{group}/H:{h}/I:{i}/B:{b}/T:{t}/L:{layers}/iterations:20/manual_time"
    entry = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
             "threads": 1}
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
    entry.update(iterations=20, real_time=median, cpu_time=median, time_unit="ms", hidden=h,
                 input_size=i, batch=b, seq_len=t, layers=layers, median_ms=median, min_ms=low,
                 max_ms=high, tflops=tflops, us_per_step_layer=us)
    return entry


def record(stage, h, i, b, t, layers, scale=1.0):
    median, low, high, tflops, us = timing(stage, h, i, b, t, layers)
    return {"stage": stage, "hidden": h, "input_size": i, "batch": b, "seq_len": t,
            "layers": layers, "dtype": "fp32", "iters": 20,
            "ms": {"median": median * scale, "min": low * scale, "max": high * scale},
            "tflops": tflops / scale, "us_per_step_layer": us * scale,
            "check": {"performed": True, "passed": True},
            "env": dict(ENV, torch="0.0.0+synthetic") if stage == "pytorch" else ENV}


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "synthetic"
    gpu, no_bench = out / "synthetic-gpu", out / "synthetic-no-bench"
    gpu.mkdir(parents=True, exist_ok=True)
    no_bench.mkdir(parents=True, exist_ok=True)
    impls = [k for k in MODEL if k != "pytorch"]
    entries = [{"name": "fp32_fma_peak/iterations:10/manual_time", "run_type": "iteration",
                "iterations": 10, "real_time": 1.0, "cpu_time": 1.0, "time_unit": "ms",
                "tflops": PEAK_TFLOPS}]
    entries += [bench_entry(impl, *config) for config in configs() for impl in impls]
    context = dict(ENV, date="2000-01-01T00:00:00+00:00", host_name="synthetic",
                   executable="synthetic", num_cpus=16, mhz_per_cpu=2000,
                   library_build_type="release")
    # One entry a line: small and diffable, still Google Benchmark's document shape.
    body = ",\n".join(json.dumps(e, sort_keys=True) for e in entries)
    (gpu / "bench.json").write_text(
        '{"context": ' + json.dumps(context, sort_keys=True) + ',\n"benchmarks": [\n' + body
        + "\n]}\n")
    pytorch = [record("pytorch", *config[1:]) for config in configs()]
    pytorch.insert(0, record("pytorch", 512, 512, 64, 100, 4, scale=3.0))  # superseded below
    write_jsonl(gpu / "pytorch.jsonl", pytorch)
    canonical = (512, 512, 64, 100, 4)
    checked = [record("00_naive", *canonical, scale=0.8), record("00_naive", *canonical),
               record("01_combined_gemms", *canonical)]
    write_jsonl(gpu / "canonical.jsonl", checked)
    write_jsonl(no_bench / "canonical.jsonl", checked)
    write_jsonl(no_bench / "pytorch.jsonl", [record("pytorch", 512, 512, 64, 100, 4)])
    for path in sorted(out.glob("*/*")):
        print(f"make_synthetic: wrote {path}")


if __name__ == "__main__":
    main()
