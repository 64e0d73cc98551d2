#!/usr/bin/env python3
"""PyTorch baseline: times torch.nn.LSTM's forward pass in FP32 on a CUDA GPU.

What it measures: the forward pass of torch.nn.LSTM (inference, torch.inference_mode) in float32
with TF32 switched off (torch.backends.cuda.matmul.allow_tf32 = False,
torch.backends.cudnn.allow_tf32 = False), through the same data contract, checks, timing and JSON
result record as the C++ stages (see docs/design.md). Underneath, PyTorch runs cuDNN's RNN with the
STANDARD algorithm for FP32 (the persistent algorithms are used only for some half-precision
cases), so this is what most users of nn.LSTM get.

How to run it (sizes come from the files; the C++ generator's data come from lstm_reference):

    build/bin/lstm_reference --hidden 512 --batch 64 --seq 100 --layers 4 \\
        --save-inputs /tmp/canonical --dump /tmp/canonical
    python3 baselines/pytorch/lstm_pytorch.py --load /tmp/canonical --json results.jsonl

    # the committed fixture (inputs, parameters and outputs):
    python3 baselines/pytorch/lstm_pytorch.py --load tests/data/pytorch_fixture

    # big sweeps: save the inputs only, check against a reference dumped elsewhere, or not at all
    build/bin/lstm_reference --hidden 2048 --save-inputs /tmp/h2048 --no-reference
    python3 baselines/pytorch/lstm_pytorch.py --load /tmp/h2048 --no-check

    # no files: the script draws its own data (torch.manual_seed), so nothing can be checked
    python3 baselines/pytorch/lstm_pytorch.py --hidden 1024 --batch 64 --no-check

The checked run comes first (no timing code around it): y, hy and cy are compared with the
reference outputs (--check-dir, or y.npy/hy.npy/cy.npy inside the --load folder) with the
harness's rule, ||out - ref|| / ||ref|| <= 1e-5 and max |out - ref| <= 1e-4, NaN/Inf failing.
Then --warmup untimed and --iters timed forward passes, each between two CUDA events on the
current stream; the median, min and max are reported with TFLOP/s and us per step-layer.

Needs numpy and, to run anything, PyTorch with a CUDA GPU. Where PyTorch or a GPU is missing it
says so and exits 0 (nothing was run). Exit codes: 0 done (or nothing to run here), 1 an error
or a failed check, 2 a bad command line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
from pathlib import Path

STAGE = "pytorch"
REPO_ROOT = Path(__file__).resolve().parent.parent.parent  # baselines/pytorch/ -> the repository
DEFAULTS = {"hidden": 512, "batch": 64, "seq": 100, "layers": 4}  # I defaults to H
MAX_RELATIVE_NORM = 1e-5  # the FP32 bounds of docs/design.md
MAX_ABSOLUTE = 1e-4


class Failure(Exception):
    """An error the script reports in one line and exits 1 on."""


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text: str) -> int:
    value = integer(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def non_negative_int(text: str) -> int:
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def existing_dir(text: str) -> str:
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"directory does not exist: {text}")
    return text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="lstm_pytorch.py",
        description="LSTM forward pass (pytorch): torch.nn.LSTM, FP32 (TF32 off), timed on a CUDA "
                    "GPU and checked against reference outputs.")
    parser.add_argument("--hidden", type=positive_int,
                        help="H, hidden units per layer [default 512; with --load every size comes from the files]")
    parser.add_argument("--input-size", type=positive_int, help="I, input features of layer 0 [default: H]")
    parser.add_argument("--batch", type=positive_int, help="B, batch size [default 64]")
    parser.add_argument("--seq", type=positive_int, help="T, time steps [default 100]")
    parser.add_argument("--layers", type=positive_int, help="L, stacked layers [default 4]")
    parser.add_argument("--iters", type=positive_int, default=20, help="timed forward passes [default 20]")
    parser.add_argument("--warmup", type=non_negative_int, default=3,
                        help="untimed forward passes before timing [default 3]")
    parser.add_argument("--seed", type=non_negative_int, default=1,
                        help="torch.manual_seed of the script's own data (only without --load) [default 1]")
    parser.add_argument("--no-check", action="store_true", help="skip the comparison with reference outputs")
    parser.add_argument("--load", type=existing_dir, metavar="DIR",
                        help="read parameters and inputs (.npy, PyTorch names) from DIR; sizes come from the files")
    parser.add_argument("--check-dir", type=existing_dir, metavar="DIR",
                        help="compare with y.npy, hy.npy, cy.npy in DIR (e.g. from lstm_reference --dump) "
                             "[default: the --load folder, if it holds them]")
    parser.add_argument("--dump", metavar="DIR", help="write y.npy, hy.npy, cy.npy into DIR")
    parser.add_argument("--json", metavar="FILE", help="append one JSON result record to FILE")
    args = parser.parse_args(argv)
    if args.load is None and not args.no_check:
        parser.error("without --load the script cannot reproduce the C++ generator's data: give --load DIR "
                     "(e.g. from lstm_reference --save-inputs DIR --dump DIR) or --no-check")
    if args.check_dir and args.no_check:
        parser.error("--check-dir and --no-check contradict each other")
    return args


# ---------------------------------------------------------------------------------------------
# Data (.npy, the --load layout), read and validated with numpy before torch is imported
# ---------------------------------------------------------------------------------------------

def read_npy(np, path: Path, rank: int, layout: str):
    """Reads a float32 little-endian C-order .npy file of `rank` dimensions."""
    if not path.is_file():
        raise Failure(f"{path}: missing (expected {layout}, float32)")
    try:
        array = np.load(path, allow_pickle=False)
    except Exception as error:  # truncated or malformed
        raise Failure(f"{path}: not a readable .npy file ({error})") from None
    if array.dtype != np.dtype("<f4"):
        raise Failure(f"{path}: dtype {array.dtype.str}, expected '<f4' (float32 little-endian)")
    if array.ndim > 1 and not array.flags.c_contiguous:
        raise Failure(f"{path}: Fortran order, expected C order")
    if array.ndim != rank:
        raise Failure(f"{path}: expected {rank} dimensions {layout}, found shape {array.shape}")
    if 0 in array.shape:
        raise Failure(f"{path}: shape {array.shape} has a zero dimension")
    return array


def read_shaped(np, path: Path, shape: tuple[int, ...], layout: str):
    array = read_npy(np, path, len(shape), layout)
    if array.shape != shape:
        raise Failure(f"{path}: shape {array.shape}, expected {shape} {layout}")
    return array


def require_flag(flag_value, from_file: int, flag: str, path: Path, meaning: str) -> None:
    if flag_value is not None and flag_value != from_file:
        raise Failure(f"{flag} {flag_value} disagrees with {path}, whose shape gives {meaning} = {from_file}")


def load_inputs(np, args: argparse.Namespace) -> dict:
    """Loads x, h0, c0 and every layer's parameters from --load DIR; sizes from the files."""
    folder = Path(args.load)
    x = read_npy(np, folder / "x.npy", 3, "(T, B, I)")
    h0 = read_npy(np, folder / "h0.npy", 3, "(L, B, H)")
    T, B, I = x.shape
    L, _, H = h0.shape
    if h0.shape[1] != B:
        raise Failure(f"{folder / 'h0.npy'}: shape {h0.shape} has B = {h0.shape[1]} but x.npy has B = {B}")
    require_flag(args.seq, T, "--seq", folder / "x.npy", "T")
    require_flag(args.batch, B, "--batch", folder / "x.npy", "B")
    require_flag(args.input_size, I, "--input-size", folder / "x.npy", "I")
    require_flag(args.layers, L, "--layers", folder / "h0.npy", "L")
    require_flag(args.hidden, H, "--hidden", folder / "h0.npy", "H")
    data = {"size": (H, I, B, T, L), "x": x, "h0": h0,
            "c0": read_shaped(np, folder / "c0.npy", (L, B, H), "(L, B, H)")}
    for k in range(L):
        inputs = I if k == 0 else H
        data[f"weight_ih_l{k}"] = read_shaped(np, folder / f"weight_ih_l{k}.npy", (4 * H, inputs), "(4H, I_k)")
        data[f"weight_hh_l{k}"] = read_shaped(np, folder / f"weight_hh_l{k}.npy", (4 * H, H), "(4H, H)")
        data[f"bias_ih_l{k}"] = read_shaped(np, folder / f"bias_ih_l{k}.npy", (4 * H,), "(4H)")
        data[f"bias_hh_l{k}"] = read_shaped(np, folder / f"bias_hh_l{k}.npy", (4 * H,), "(4H)")
    extra = folder / f"weight_ih_l{L}.npy"
    if extra.exists():
        raise Failure(f"{extra}: exists, but h0.npy has L = {L} layers (weight files for layers 0..{L - 1} expected)")
    return data


def reference_dir(args: argparse.Namespace) -> Path | None:
    """Where the reference outputs are: --check-dir, else the --load folder if it holds them."""
    if args.no_check:
        return None
    if args.check_dir:
        return Path(args.check_dir)
    folder = Path(args.load)
    if any((folder / f"{name}.npy").exists() for name in ("y", "hy", "cy")):
        return folder
    raise Failure(f"{folder} holds no reference outputs (y.npy, hy.npy, cy.npy): "
                  "give --check-dir (lstm_reference --dump) or --no-check")


def load_reference(np, folder: Path, size: tuple[int, ...]) -> dict:
    H, _, B, T, L = size
    return {"y": read_shaped(np, folder / "y.npy", (T, B, H), "(T, B, H)"),
            "hy": read_shaped(np, folder / "hy.npy", (L, B, H), "(L, B, H)"),
            "cy": read_shaped(np, folder / "cy.npy", (L, B, H), "(L, B, H)")}


# ---------------------------------------------------------------------------------------------
# Checking (the harness's rule, common/validate.cpp)
# ---------------------------------------------------------------------------------------------

def compare_tensor(np, name: str, out, ref) -> dict:
    """Compares `out` with `ref` element by element, as lstm::compare_tensor does."""
    out64 = np.asarray(out, dtype=np.float64).ravel()
    ref64 = np.asarray(ref, dtype=np.float64).ravel()
    finite = np.isfinite(out64)
    nonfinite = int(out64.size - np.count_nonzero(finite))
    diff = np.where(finite, np.abs(np.where(finite, out64, 0.0) - ref64), 0.0)
    max_absolute = float(diff.max()) if diff.size else 0.0
    ref_norm = float(np.sqrt(np.sum(ref64 * ref64)))
    relative_norm = float(np.sqrt(np.sum(diff * diff))) / (ref_norm if ref_norm > 0.0 else 1.0)
    worst = int(np.argmin(finite)) if nonfinite else int(np.argmax(diff)) if diff.size else 0
    passed = (out64.size > 0 and nonfinite == 0 and relative_norm <= MAX_RELATIVE_NORM
              and max_absolute <= MAX_ABSOLUTE)
    return {"name": name, "shape": tuple(np.shape(out)), "compared": int(out64.size),
            "relative_norm": relative_norm, "max_absolute": max_absolute, "nonfinite": nonfinite,
            "passed": bool(passed), "worst_index": worst,
            "worst_value": float(out64[worst]) if out64.size else 0.0,
            "worst_reference": float(ref64[worst]) if ref64.size else 0.0}


def describe_check(np, check: dict) -> str:
    """The harness's lines for one tensor (CheckReport::describe)."""
    line = (f"check {check['name']}: {'ok  ' if check['passed'] else 'FAIL'}  "
            f"rel-norm err {check['relative_norm']:.3e}  max-abs err {check['max_absolute']:.3e}  "
            f"({check['compared']} elements")
    if check["nonfinite"]:
        line += f", {check['nonfinite']} NaN/Inf"
    line += ")"
    if not check["passed"]:
        axes = ("t", "b", "j") if check["name"] == "y" else ("layer", "b", "j")
        index = np.unravel_index(check["worst_index"], check["shape"]) if check["compared"] else ()
        position = ", ".join(f"{axis}={int(i)}" for axis, i in zip(axes, index))
        value = check["worst_value"]
        line += (f"\n  worst element {check['name']}[{position}] = {value:.9g}, "
                 f"reference {check['worst_reference']:.9g}"
                 + ("" if math.isfinite(value) else "  (NaN/Inf: unwritten or overflowed)"))
    return line


# ---------------------------------------------------------------------------------------------
# Environment (the "env" of a result record, as common/environment.cpp collects it)
# ---------------------------------------------------------------------------------------------

def command_output(command: list[str], cwd: Path | None = None) -> str:
    """The first line of a command's stdout, or "" if it cannot run or fails."""
    try:
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = result.stdout.strip().splitlines()
    return lines[0].strip() if result.returncode == 0 and lines else ""


def git_commit() -> str:
    # A copy of the tree whose .git is missing or stale (e.g. sent to a GPU machine) carries the
    # commit it was made from in .git_commit, which takes precedence (as in cmake/WriteGitCommit).
    try:
        recorded = (REPO_ROOT / ".git_commit").read_text().strip()
    except OSError:
        recorded = ""
    if recorded:
        return recorded
    # safe.directory: a checkout owned by another user (e.g. copied onto a GPU machine, run as
    # root) is otherwise refused by git.
    commit = command_output(["git", "-c", f"safe.directory={REPO_ROOT}", "rev-parse", "--short=12", "HEAD"],
                            cwd=REPO_ROOT)
    return commit or "unknown"


def cuda_driver_api_version() -> str:
    """The highest CUDA version the driver supports (cuDriverGetVersion), e.g. "13.0"."""
    try:
        import ctypes
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return "unavailable"
        return f"{version.value // 1000}.{(version.value % 1000) // 10}"
    except (OSError, AttributeError):
        return "unavailable"


def cublas_version(torch) -> str:
    """The cuBLAS wheel torch uses, if installed as one, else a statement of where it comes from."""
    from importlib import metadata
    for distribution in ("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return f"bundled with torch {torch.__version__} (CUDA {torch.version.cuda})"


def collect_environment(torch) -> dict:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    uuid = getattr(props, "uuid", None)
    select = ["-i", f"GPU-{uuid}"] if uuid else []
    smi = ["nvidia-smi", "--format=csv,noheader", *select]
    driver = command_output([*smi, "--query-gpu=driver_version"])
    clocks = command_output([*smi, "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem"])

    def mhz(field: int) -> int:  # "1980 MHz, 1980 MHz, 2619 MHz, 2619 MHz"
        try:
            return int(clocks.split(",")[field].split()[0])
        except (IndexError, ValueError):
            return 0

    cudnn = torch.backends.cudnn.version()  # 9.19.0 is 91900
    return {
        "gpu": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
        "memory_bytes": int(props.total_memory),
        "sm_clock_max_mhz": mhz(1),
        "memory_clock_max_mhz": mhz(3),
        "clocks": f"sm, max sm, mem, max mem: {clocks}" if clocks else "unavailable",
        "driver": driver or "unavailable",
        "cuda_runtime": torch.version.cuda or "unavailable",
        "cuda_driver_api": cuda_driver_api_version(),
        "cublas": cublas_version(torch),
        "cudnn": f"{cudnn // 10000}.{(cudnn % 10000) // 100}.{cudnn % 100}" if cudnn else "unavailable",
        "torch": torch.__version__,
        "git_commit": git_commit(),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


# ---------------------------------------------------------------------------------------------
# Reporting (common/report.cpp)
# ---------------------------------------------------------------------------------------------

def flop_count(H: int, I: int, B: int, T: int, L: int) -> float:
    """docs/design.md's count: sum over layers of 2*T*B*4H*(I_l + H)."""
    return float(sum(2.0 * T * B * 4 * H * ((I if layer == 0 else H) + H) for layer in range(L)))


def json_safe(value):
    """NaN/Inf become null, as nlohmann::json writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    return value


def json_record(size, data_source: str, warmup: int, runs_ms: list[float], stats: dict,
                checks: list[dict] | None, env: dict) -> str:
    """One result record, with the keys and nesting of lstm::json_record (sorted, compact, as
    nlohmann::json dumps it), plus env["torch"]."""
    H, I, B, T, L = size
    flop = flop_count(*size)
    if checks is None:
        check = {"performed": False}
    else:
        check = {"performed": True, "passed": all(c["passed"] for c in checks),
                 "steps_checked": T, "steps_total": T,
                 "tensors": {c["name"]: {"relative_norm": c["relative_norm"],
                                         "max_absolute": c["max_absolute"],
                                         "nonfinite": c["nonfinite"], "passed": c["passed"]}
                             for c in checks}}
    record = {
        "stage": STAGE, "series": "", "kind": "forward", "precision": "fp32",
        "hidden": H, "input_size": I, "batch": B, "seq_len": T, "layers": L,
        "dtype": "fp32", "data": data_source, "flop": flop, "warmup": warmup,
        "iters": len(runs_ms), "ms": {"median": stats["median"], "min": stats["min"], "max": stats["max"]},
        "runs_ms": runs_ms, "tflops": flop / (stats["median"] * 1e-3) / 1e12,
        "us_per_step_layer": stats["median"] * 1e3 / (T * L), "check": check, "env": env,
    }
    return json.dumps(json_safe(record), sort_keys=True, separators=(",", ":"), allow_nan=False)


def summarize(runs_ms: list[float]) -> dict:
    ordered = sorted(runs_ms)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
    return {"median": median, "min": ordered[0], "max": ordered[-1]}


def describe_size(H: int, I: int, B: int, T: int, L: int) -> str:
    return f"H={H} I={I} B={B} T={T} L={L}"


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    try:
        import numpy as np
    except ImportError:
        raise Failure("numpy is required (pip install numpy, or scripts/setup.sh's .venv)") from None

    # Everything that can be read and validated without torch is, first.
    data = load_inputs(np, args) if args.load else None
    check_dir = reference_dir(args)
    reference = load_reference(np, check_dir, data["size"]) if check_dir else None

    try:
        import torch
    except ImportError:
        print("pytorch baseline: PyTorch is not installed here; nothing was run")
        return 0
    if not torch.cuda.is_available():
        print(f"pytorch baseline: no CUDA GPU is available to PyTorch {torch.__version__} here; nothing was run")
        return 0

    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 means FP32: no TF32 in the GEMMs
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")

    # Data: loaded (sizes from the files) or drawn by torch (uniform, as nn.LSTM initializes).
    if data is not None:
        H, I, B, T, L = data["size"]
        data_source = f"loaded from {args.load}"
        lstm = torch.nn.LSTM(I, H, num_layers=L)
        with torch.no_grad():
            for name, parameter in lstm.named_parameters():
                parameter.copy_(torch.from_numpy(data[name]))
        x, h0, c0 = (torch.from_numpy(data[name]) for name in ("x", "h0", "c0"))
    else:
        H = args.hidden or DEFAULTS["hidden"]
        I = args.input_size or H
        B, T, L = (args.batch or DEFAULTS["batch"], args.seq or DEFAULTS["seq"],
                   args.layers or DEFAULTS["layers"])
        data_source = (f"generated by torch (torch.manual_seed({args.seed}), uniform; "
                       "not the C++ generator's data)")
        torch.manual_seed(args.seed)
        lstm = torch.nn.LSTM(I, H, num_layers=L)  # weights uniform in [-1/sqrt(H), 1/sqrt(H)]
        x = torch.empty(T, B, I).uniform_(-1.0, 1.0)
        h0 = torch.empty(L, B, H).uniform_(-1.0, 1.0)
        c0 = torch.empty(L, B, H).uniform_(-1.0, 1.0)
    size = (H, I, B, T, L)
    lstm = lstm.to(device=device, dtype=torch.float32).eval()
    lstm.flatten_parameters()
    x, h0, c0 = (t.to(device=device, dtype=torch.float32).contiguous() for t in (x, h0, c0))
    env = collect_environment(torch)
    print(f"{STAGE}  {describe_size(*size)}  fp32  {data_source}  on {env['gpu']}  "
          f"(torch {env['torch']}, cuDNN {env['cudnn']}, TF32 off)")

    def forward():
        return lstm(x, (h0, c0))

    with torch.inference_mode():
        # The checked run: no timing code around it.
        checks = None
        if reference is not None or args.dump:
            y, (hy, cy) = forward()
            torch.cuda.synchronize()
            outputs = {"y": y.cpu().numpy(), "hy": hy.cpu().numpy(), "cy": cy.cpu().numpy()}
            if args.dump:
                Path(args.dump).mkdir(parents=True, exist_ok=True)
                for name, array in outputs.items():
                    np.save(Path(args.dump) / f"{name}.npy", np.ascontiguousarray(array, dtype="<f4"))
                print(f"dump: y.npy, hy.npy, cy.npy written to {args.dump}")
            if reference is not None:
                checks = [compare_tensor(np, name, outputs[name], reference[name]) for name in ("y", "hy", "cy")]
                for check in checks:
                    print(describe_check(np, check))
                if not all(check["passed"] for check in checks):
                    print(f"{STAGE}: check FAILED against the reference in {check_dir} (FP32 bounds: "
                          "rel-norm 1e-5, max-abs 1e-4)\nDisposition: Failed", file=sys.stderr)
                    return 1
        if checks is None:
            print("check: skipped (--no-check)")

        # Timed runs, as the harness times a stage (common/timing.cpp): warm-up, then each run
        # between two events on the current stream, waited for before the next one starts.
        stream = torch.cuda.current_stream()
        for _ in range(args.warmup):
            forward()
        stream.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        runs_ms = []
        for _ in range(args.iters):
            start.record(stream)
            forward()
            stop.record(stream)
            stop.synchronize()
            runs_ms.append(start.elapsed_time(stop))
        torch.cuda.synchronize()

    stats = summarize(runs_ms)
    tflops = flop_count(*size) / (stats["median"] * 1e-3) / 1e12
    print(f"time {STAGE}  {describe_size(*size)}  fp32  median {stats['median']:.3f} ms "
          f"(min {stats['min']:.3f}, max {stats['max']:.3f}, {len(runs_ms)} runs)  {tflops:.2f} TFLOP/s  "
          f"{stats['median'] * 1e3 / (T * L):.2f} us/step-layer  on {env['gpu']}")
    if args.json:
        try:
            with open(args.json, "a", encoding="utf-8") as file:
                file.write(json_record(size, data_source, args.warmup, runs_ms, stats, checks, env) + "\n")
        except OSError as error:
            raise Failure(f"{args.json}: cannot append the JSON record ({error.strerror})") from None
        print(f"json: record appended to {args.json}")
    print(f"Disposition: {'Passed' if checks is not None else 'Not checked'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except Failure as error:
        print(f"{STAGE}: error: {error}", file=sys.stderr)
        return 1
    except RuntimeError as error:  # torch's errors, e.g. torch.cuda.OutOfMemoryError
        print(f"{STAGE}: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
