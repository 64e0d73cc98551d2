#!/usr/bin/env python3
"""PyTorch baseline: times torch.nn.LSTM in FP32 (or with --precision in FP16 or BF16) on a CUDA
GPU, the forward pass or (--training) the training pass through autograd.

What it measures: torch.nn.LSTM in float32 with TF32 switched off
(torch.backends.cuda.matmul.allow_tf32 = False, torch.backends.cudnn.allow_tf32 = False), through
the same data contract, checks, timing and JSON result record as the C++ stages (see
docs/design.md). Underneath, PyTorch runs cuDNN's RNN with the STANDARD algorithm for FP32 at
the standard configurations (its heuristic takes PERSIST_STATIC_SMALL_H for a small H, as in the
odd test shapes, and PERSIST_STATIC for some FP16 cases), so this is what most users of nn.LSTM
get.

  --precision fp16|bf16 ("pytorch_fp16", "pytorch_bf16_training", ...): the model and the data in
      that dtype (FP32 accumulation; torch.backends.cudnn.allow_tf32 left on for BF16, PyTorch's
      default; at the canonical config both 16-bit dtypes run tensor-core GEMMs whether it is on or
      off: git show 65b1677:results/h100-sxm/session75_runs.txt, calls 2 and 3). Every input is
      first rounded to the precision (nearest, ties to even), as the C++ harness does; to be
      checked, the loaded data must already be those values and the reference theirs: make the
      folder with
      lstm_reference --precision fp16 [--training] --save-inputs DIR --dump DIR. The bounds are
      the reduced-precision ones (lstm::reduced_precision_tolerance).

  forward (default, "stage": "pytorch"): the forward pass in inference (torch.inference_mode).
  --training ("stage": "pytorch_training"): the forward pass keeping its autograd graph, then
      torch.autograd.grad((y, hy, cy), (x, h0, c0, *parameters), (dy, dhy, dcy)): the gradients
      dx, dh0, dc0 and grad_{weight,bias}_{ih,hh}_l{k} of docs/design.md ("The training pass").
      The upstream gradients dy, dhy, dcy come from the --load folder; where it has none of them
      they are generated from --seed (default 1) exactly as the C++ generator makes them
      (SplitMix64, common/core/lstm_data.cpp), so that every implementation sees the same ones.

How to run it (sizes come from the files; the C++ generator's data come from lstm_reference):

    build/bin/lstm_reference --hidden 512 --batch 64 --seq 100 --layers 4 \\
        --save-inputs /tmp/canonical --dump /tmp/canonical
    python3 baselines/pytorch/lstm_pytorch.py --load /tmp/canonical --json results.jsonl

    # the training pass, checked against the training reference (y, hy, cy and every gradient)
    build/bin/lstm_reference --hidden 64 --batch 8 --seq 20 --layers 2 --training \\
        --save-inputs /tmp/small --dump /tmp/small-ref
    python3 baselines/pytorch/lstm_pytorch.py --training --load /tmp/small --check-dir /tmp/small-ref

    # the committed fixtures (inputs, parameters, outputs; the training one also every gradient):
    python3 baselines/pytorch/lstm_pytorch.py --load tests/data/pytorch_fixture
    python3 baselines/pytorch/lstm_pytorch.py --training --load tests/data/pytorch_training_fixture

    # big sweeps: save the inputs only, check against a reference dumped elsewhere, or not at all
    build/bin/lstm_reference --hidden 2048 --save-inputs /tmp/h2048 --no-reference
    python3 baselines/pytorch/lstm_pytorch.py --load /tmp/h2048 --no-check

    # no files: the script draws its own data (torch.manual_seed), so nothing can be checked
    python3 baselines/pytorch/lstm_pytorch.py --hidden 1024 --batch 64 --no-check

The checked run comes first (no timing code around it): y, hy and cy (and for --training every
gradient) are compared with the reference's (--check-dir, or the --load folder if it holds
reference outputs) with the harness's rule, per tensor ||out - ref|| / ||ref|| <= 1e-5 and
max |out - ref| <= 1e-4, NaN/Inf failing. Then --warmup untimed and --iters timed runs, each
between two CUDA events on the current stream; the median, min and max are reported with TFLOP/s
and us per step-layer. A training pass is timed three ways, each on its own as the C++ harness
does: the whole pass (forward with its graph, then backward), the forward with its graph alone,
and the backward alone (each after an untimed forward that builds the graph it consumes).

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
TRAINING_STAGE = "pytorch_training"
REPO_ROOT = Path(__file__).resolve().parent.parent.parent  # baselines/pytorch/ -> the repository
DEFAULTS = {"hidden": 512, "batch": 64, "seq": 100, "layers": 4}  # I defaults to H
DEFAULT_SEED = 1
MAX_SEED = 2**64 - 1
MAX_RELATIVE_NORM = 1e-5  # the FP32 bounds of docs/design.md
MAX_ABSOLUTE = 1e-4
PRECISIONS = ("fp32", "fp16", "bf16")


def stage_name(training: bool, precision: str) -> str:
    """"pytorch", "pytorch_fp16", "pytorch_bf16_training", ...: the precision in the name unless FP32,
    as the cuDNN baseline names its stages."""
    return "pytorch" + ("" if precision == "fp32" else f"_{precision}") + ("_training" if training else "")


def tolerance(precision: str, tensor: str) -> tuple[float, float]:
    """(relative norm, max-abs) bound of `tensor`, as lstm::reduced_precision_tolerance gives it
    (common/core/kind_and_precision.cpp: the gradients' from cuDNN's measured error, the outputs'
    provisional)."""
    if precision == "fp32":
        return MAX_RELATIVE_NORM, MAX_ABSOLUTE
    fp16 = precision == "fp16"
    if tensor.startswith("grad_"):
        return (4.2e-3, 2.3e-2) if fp16 else (1.7e-2, 0.19)
    if tensor in ("dx", "dh0", "dc0"):
        return (1.1e-3, 5.8e-4) if fp16 else (1.1e-2, 4.2e-3)
    bound = 1e-3 if fp16 else 8e-3
    return bound, 10 * bound


def round_to_precision(np, array, precision: str):
    """`array` (float32) rounded to FP16 or BF16, nearest with ties to even, as float32
    (lstm::round_to_precision); FP32: unchanged."""
    if precision == "fp16":
        return array.astype(np.float16).astype(np.float32)
    if precision == "bf16":
        bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
        return bits.astype(np.uint32).view(np.float32).reshape(array.shape)
    return array
PARAMETER_STEMS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
UPSTREAM_NAMES = ("dy", "dhy", "dcy")


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


def seed_value(text: str) -> int:
    value = non_negative_int(text)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"{value} is above 2^64 - 1 = {MAX_SEED}")
    return value


def existing_dir(text: str) -> str:
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"directory does not exist: {text}")
    return text


def nearest_existing_ancestor(path: str) -> str:
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    return parent


def output_dir_problem(path: str) -> str | None:
    """Why `path` cannot take the --dump outputs (a folder written into or created), or None."""
    if not path:
        return "needs a folder name, got an empty one"
    if os.path.exists(path):
        if not os.path.isdir(path):
            return "exists and is not a folder"
        return None if os.access(path, os.W_OK | os.X_OK) else "cannot write into it"
    parent = nearest_existing_ancestor(path)
    if not os.path.isdir(parent):
        return f"its parent {parent} is not a folder"
    return None if os.access(parent, os.W_OK | os.X_OK) else f"cannot create it in {parent}"


def output_file_problem(path: str) -> str | None:
    """Why the JSON record cannot be appended to `path`, or None."""
    if not path:
        return "needs a file name, got an empty one"
    if os.path.exists(path):
        if os.path.isdir(path):
            return "is a folder, not a file"
        return None if os.access(path, os.W_OK) else "cannot write to it"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"its folder {parent} does not exist"
    return None if os.access(parent, os.W_OK | os.X_OK) else f"cannot create it in {parent}"


def has_upstream_files(folder: str) -> bool:
    """Whether `folder` holds any of dy.npy, dhy.npy, dcy.npy (lstm::has_upstream_files)."""
    return any((Path(folder) / f"{name}.npy").exists() for name in UPSTREAM_NAMES)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="lstm_pytorch.py",
        description="LSTM forward pass (pytorch), or with --training the training pass "
                    "(pytorch_training: forward, then torch.autograd.grad): torch.nn.LSTM, FP32 "
                    "(TF32 off) or with --precision FP16 or BF16, timed on a CUDA GPU and checked "
                    "against reference outputs.")
    parser.add_argument("--hidden", type=positive_int,
                        help="H, hidden units per layer [default 512; with --load every size comes from the files]")
    parser.add_argument("--input-size", type=positive_int, help="I, input features of layer 0 [default: H]")
    parser.add_argument("--batch", type=positive_int, help="B, batch size [default 64]")
    parser.add_argument("--seq", type=positive_int, help="T, time steps [default 100]")
    parser.add_argument("--layers", type=positive_int, help="L, stacked layers [default 4]")
    parser.add_argument("--iters", type=positive_int, default=20,
                        help="timed passes (with --training: of each of total, forward, backward) [default 20]")
    parser.add_argument("--warmup", type=non_negative_int, default=3,
                        help="untimed passes before timing [default 3]")
    parser.add_argument("--seed", type=seed_value,
                        help="without --load: torch.manual_seed of the script's own data; with --load and "
                             "--training, where the folder has no dy.npy, dhy.npy, dcy.npy: the seed they are "
                             "generated from, as the C++ generator does; refused with --load otherwise [default 1]")
    parser.add_argument("--no-check", action="store_true", help="skip the comparison with reference outputs")
    parser.add_argument("--training", action="store_true",
                        help="the training pass: forward keeping the autograd graph, then torch.autograd.grad"
                             "((y, hy, cy), (x, h0, c0, *parameters), (dy, dhy, dcy)); checks and dumps every "
                             "gradient too; the record is \"pytorch_training\", kind \"training\"")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="fp32 (TF32 off), or fp16 or bf16: model and data in that dtype (cuDNN's "
                             "tensor-op path), every input first rounded to it; to check, --load a folder "
                             "made by lstm_reference --precision P --save-inputs DIR --dump DIR; the "
                             "record is pytorch_<P>[_training] [default fp32]")
    parser.add_argument("--load", type=existing_dir, metavar="DIR",
                        help="read parameters and inputs (.npy, PyTorch names; with --training also dy, dhy, "
                             "dcy) from DIR; sizes come from the files")
    parser.add_argument("--check-dir", type=existing_dir, metavar="DIR",
                        help="compare with y.npy, hy.npy, cy.npy (with --training also dx.npy, dh0.npy, "
                             "dc0.npy and every grad_*_l{k}.npy) in DIR (e.g. from lstm_reference [--training] "
                             "--dump) [default: the --load folder, if it holds them]")
    parser.add_argument("--dump", metavar="DIR",
                        help="write y.npy, hy.npy, cy.npy (with --training also every gradient) into DIR")
    parser.add_argument("--json", metavar="FILE", help="append one JSON result record to FILE")
    args = parser.parse_args(argv)
    if args.load is None and not args.no_check:
        parser.error("without --load the script cannot reproduce the C++ generator's data: give --load DIR "
                     "(e.g. from lstm_reference --save-inputs DIR --dump DIR) or --no-check")
    if args.check_dir and args.no_check:
        parser.error("--check-dir and --no-check contradict each other")
    if args.load is not None and args.seed is not None and (not args.training or has_upstream_files(args.load)):
        parser.error(f"--seed {args.seed} has no effect: the data come from {args.load}"
                     + (" (dy, dhy and dcy too)" if args.training else "") + " (leave --seed out, or --load out)")
    # A dump over the reference it is checked against would make every later check compare
    # PyTorch with itself.
    if args.dump is not None:
        dump = Path(args.dump).resolve()
        for flag, value in (("--load", args.load), ("--check-dir", args.check_dir)):
            if value is not None and Path(value).resolve() == dump:
                parser.error(f"--dump {args.dump!r} is the {flag} folder: its reference files would "
                             "be overwritten with this run's outputs")
    # Output paths: checked before any work, so that a bad one costs nothing and writes nothing.
    for flag, value, problem in (("--dump", args.dump, output_dir_problem),
                                 ("--json", args.json, output_file_problem)):
        if value is not None and (why := problem(value)) is not None:
            parser.error(f"{flag} {value!r}: {why}")
    return args


# ---------------------------------------------------------------------------------------------
# Tensors by name: what a pass writes, with shapes and axis names (lstm::output_layouts)
# ---------------------------------------------------------------------------------------------

def output_layouts(size: tuple[int, ...], training: bool) -> list[tuple[str, tuple[int, ...], tuple[str, ...]]]:
    """(name, shape, axes) of every tensor a pass writes, in common/core/named_tensor.cpp's order: y,
    hy, cy; for training then dx, dh0, dc0 and per layer k grad_weight_ih_l{k}, grad_weight_hh_l{k},
    grad_bias_ih_l{k}, grad_bias_hh_l{k}."""
    H, I, B, T, L = size
    state = ("layer", "b", "j")
    layouts = [("y", (T, B, H), ("t", "b", "j")), ("hy", (L, B, H), state), ("cy", (L, B, H), state)]
    if training:
        layouts += [("dx", (T, B, I), ("t", "b", "i")), ("dh0", (L, B, H), state), ("dc0", (L, B, H), state)]
        for k in range(L):
            inputs = I if k == 0 else H
            layouts += [(f"grad_weight_ih_l{k}", (4 * H, inputs), ("row", "col")),
                        (f"grad_weight_hh_l{k}", (4 * H, H), ("row", "col")),
                        (f"grad_bias_ih_l{k}", (4 * H,), ("row",)),
                        (f"grad_bias_hh_l{k}", (4 * H,), ("row",))]
    return layouts


def shape_text(axes: tuple[str, ...]) -> str:
    return "(" + ", ".join(axes) + ")"


# ---------------------------------------------------------------------------------------------
# Data (.npy, the --load layout), read and validated with numpy before torch is imported
# ---------------------------------------------------------------------------------------------

def read_npy(np, path: Path, rank: int, layout: str):
    """Reads a float32 little-endian C-order .npy file of `rank` dimensions, every element finite."""
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
    finite = np.isfinite(array)
    if not finite.all():
        index = np.unravel_index(int(np.argmin(finite)), array.shape)
        value = array[index]
        raise Failure(f"{path}: element [{', '.join(str(int(i)) for i in index)}] is "
                      f"{'NaN' if np.isnan(value) else 'Inf'}; every tensor must be finite")
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


# The C++ generator (common/core/lstm_data.cpp), for the upstream gradients: SplitMix64, one stream
# per tensor derived from (seed, tensor id), 24 random bits per value. Values uniform in [-1, 1)
# are -1 + 2 * k / 2^24 for an integer k < 2^24: exactly representable in float32, so numpy's
# float32 arithmetic gives the C++ values bit for bit (tests/pytorch/test_upstream_generator.py
# compares them with lstm_reference --training --save-inputs).
MASK64 = 2**64 - 1
SPLITMIX_INCREMENT = 0x9E3779B97F4A7C15
SPLITMIX_MULTIPLIERS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
STREAM_KEY = 0xA0761D6478BD642F
UPSTREAM_TENSOR_IDS = {"dy": 4, "dhy": 5, "dcy": 6}  # lstm::generate_upstream's


def splitmix64_mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * SPLITMIX_MULTIPLIERS[0]) & MASK64
    z = ((z ^ (z >> 27)) * SPLITMIX_MULTIPLIERS[1]) & MASK64
    return z ^ (z >> 31)


def uniform_unit_tensor(np, count: int, seed: int, tensor_id: int, chunk: int = 1 << 20):
    """`count` float32 values uniform in [-1, 1) from the C++ generator's stream (seed, tensor_id)."""
    seeder_state = seed ^ ((STREAM_KEY * (tensor_id + 1)) & MASK64)
    generator_state = splitmix64_mix((seeder_state + SPLITMIX_INCREMENT) & MASK64)  # seeder.next()
    values = np.empty(count, dtype=np.float32)
    increment, start = np.uint64(SPLITMIX_INCREMENT), np.uint64(generator_state)
    first, second = (np.uint64(m) for m in SPLITMIX_MULTIPLIERS)
    for begin in range(0, count, chunk):
        end = min(count, begin + chunk)
        # The n-th value (n from 1) comes from the state start + n * increment (mod 2^64).
        z = np.arange(begin + 1, end + 1, dtype=np.uint64) * increment + start
        z = (z ^ (z >> np.uint64(30))) * first
        z = (z ^ (z >> np.uint64(27))) * second
        z ^= z >> np.uint64(31)
        unit = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
        values[begin:end] = np.float32(-1.0) + np.float32(2.0) * unit
    return values


def generate_upstream(np, size: tuple[int, ...], seed: int) -> dict:
    """dy (T, B, H), dhy and dcy (L, B, H) as lstm::generate_upstream makes them from `seed`."""
    H, _, B, T, L = size
    shapes = {"dy": (T, B, H), "dhy": (L, B, H), "dcy": (L, B, H)}
    return {name: uniform_unit_tensor(np, math.prod(shape), seed, UPSTREAM_TENSOR_IDS[name]).reshape(shape)
            for name, shape in shapes.items()}


def load_upstream(np, folder: Path, size: tuple[int, ...], seed: int) -> tuple[dict, bool]:
    """dy, dhy, dcy from `folder`, or generated from `seed` where it has none of them (as
    lstm::load_upstream); returns them and whether they were generated."""
    H, _, B, T, L = size
    present = [name for name in UPSTREAM_NAMES if (folder / f"{name}.npy").exists()]
    if not present:
        return generate_upstream(np, size, seed), True
    if len(present) != len(UPSTREAM_NAMES):
        absent = [f"{name}.npy" for name in UPSTREAM_NAMES if name not in present]
        raise Failure(f"{folder}: has {', '.join(f'{name}.npy' for name in present)} but not {', '.join(absent)} "
                      "(give all three upstream gradients, or none to generate them from the seed)")
    return {"dy": read_shaped(np, folder / "dy.npy", (T, B, H), "(T, B, H)"),
            "dhy": read_shaped(np, folder / "dhy.npy", (L, B, H), "(L, B, H)"),
            "dcy": read_shaped(np, folder / "dcy.npy", (L, B, H), "(L, B, H)")}, False


def reference_dir(args: argparse.Namespace, layouts) -> Path | None:
    """Where the reference outputs are: --check-dir, else the --load folder if it holds them."""
    if args.no_check:
        return None
    if args.check_dir:
        return Path(args.check_dir)
    folder = Path(args.load)
    if any((folder / f"{name}.npy").exists() for name, _, _ in layouts):
        return folder
    names = "y.npy, hy.npy, cy.npy" + (", dx.npy, ... every gradient" if args.training else "")
    raise Failure(f"{folder} holds no reference outputs ({names}): give --check-dir "
                  f"(lstm_reference{' --training' if args.training else ''} --dump) or --no-check")


def load_reference(np, folder: Path, layouts, training: bool) -> dict:
    """Every tensor of `layouts` from `folder` (the reference's --dump)."""
    reference = {}
    for name, shape, axes in layouts:
        path = folder / f"{name}.npy"
        if not path.exists():
            what = ("a training check compares y, hy, cy and every gradient: give --check-dir DIR with "
                    "lstm_reference --training --dump DIR's files, or --no-check" if training else
                    "give --check-dir DIR with lstm_reference --dump DIR's files, or --no-check")
            raise Failure(f"{path}: missing (expected {shape_text(axes)} = {shape}, float32); {what}")
        reference[name] = read_shaped(np, path, shape, shape_text(axes))
    return reference


# ---------------------------------------------------------------------------------------------
# Checking (the harness's rule, common/core/check.cpp)
# ---------------------------------------------------------------------------------------------

def compare_tensor(np, name: str, axes: tuple[str, ...], out, ref, precision: str = "fp32") -> dict:
    """Compares `out` with `ref` element by element, as lstm::compare_tensor does, against the
    bound of `tensor` in `precision`."""
    max_relative_norm, max_absolute_bound = tolerance(precision, name)
    out64 = np.asarray(out, dtype=np.float64).ravel()
    ref64 = np.asarray(ref, dtype=np.float64).ravel()
    finite = np.isfinite(out64)
    nonfinite = int(out64.size - np.count_nonzero(finite))
    diff = np.where(finite, np.abs(np.where(finite, out64, 0.0) - ref64), 0.0)
    max_absolute = float(diff.max()) if diff.size else 0.0
    ref_norm = float(np.sqrt(np.sum(ref64 * ref64)))
    relative_norm = float(np.sqrt(np.sum(diff * diff))) / (ref_norm if ref_norm > 0.0 else 1.0)
    worst = int(np.argmin(finite)) if nonfinite else int(np.argmax(diff)) if diff.size else 0
    passed = (out64.size > 0 and nonfinite == 0 and relative_norm <= max_relative_norm
              and max_absolute <= max_absolute_bound)
    severity = (math.inf if nonfinite or not out64.size else
                max(relative_norm / max_relative_norm, max_absolute / max_absolute_bound))
    return {"name": name, "axes": axes, "shape": tuple(np.shape(out)), "compared": int(out64.size),
            "relative_norm": relative_norm, "max_absolute": max_absolute, "nonfinite": nonfinite,
            "passed": bool(passed), "severity": severity, "worst_index": worst,
            "bound": {"relative_norm": max_relative_norm, "max_absolute": max_absolute_bound},
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
        index = np.unravel_index(check["worst_index"], check["shape"]) if check["compared"] else ()
        position = ", ".join(f"{axis}={int(i)}" for axis, i in zip(check["axes"], index))
        value = check["worst_value"]
        line += (f"\n  worst element {check['name']}[{position}] = {value:.9g}, "
                 f"reference {check['worst_reference']:.9g}"
                 + ("" if math.isfinite(value) else "  (NaN/Inf: unwritten or overflowed)"))
    return line


def check_outputs(np, outputs: dict, reference: dict, layouts, precision: str = "fp32") -> list[dict]:
    checks = [compare_tensor(np, name, axes, outputs[name], reference[name], precision)
              for name, _, axes in layouts]
    for check in checks:
        print(describe_check(np, check))
    return checks


# ---------------------------------------------------------------------------------------------
# Environment (the "env" of a result record, as common/core/environment.cpp collects it)
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
# Reporting (common/core/run_record.cpp)
# ---------------------------------------------------------------------------------------------

def flop_count(H: int, I: int, B: int, T: int, L: int, training: bool = False) -> float:
    """docs/design.md's count: sum over layers of 2*T*B*4H*(I_l + H); a training pass 3 times that."""
    forward = float(sum(2.0 * T * B * 4 * H * ((I if layer == 0 else H) + H) for layer in range(L)))
    return 3.0 * forward if training else forward


def json_safe(value):
    """NaN/Inf become null, as nlohmann::json writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    return value


def check_record(checks: list[dict] | None, T: int) -> dict:
    """The "check" of a record, with lstm::json_record's keys (and, as before, the steps)."""
    if checks is None:
        return {"performed": False}
    worst = max(checks, key=lambda c: c["severity"]) if checks else None  # max(): the first of ties
    return {"performed": True, "passed": all(c["passed"] for c in checks), "not_checked": [],
            "worst_tensor": worst["name"] if worst else "", "steps_checked": T, "steps_total": T,
            "tensors": {c["name"]: {"relative_norm": c["relative_norm"], "max_absolute": c["max_absolute"],
                                    "nonfinite": c["nonfinite"], "missing": False, "passed": c["passed"],
                                    "bound": c["bound"]}
                        for c in checks}}


def json_record(size, training: bool, data_source: str, warmup: int, runs_ms: list[float], stats: dict,
                phases: dict | None, checks: list[dict] | None, env: dict, precision: str = "fp32") -> str:
    """One result record, with the keys and nesting of lstm::json_record (sorted, compact, as
    nlohmann::json dumps it), plus env["torch"]. A training record times the whole pass in "ms"
    and "runs_ms", and its forward and backward in "phases", as the C++ training records do."""
    H, I, B, T, L = size
    flop = flop_count(*size, training=training)
    record = {
        "stage": stage_name(training, precision), "series": "",
        "kind": "training" if training else "forward", "precision": precision,
        "hidden": H, "input_size": I, "batch": B, "seq_len": T, "layers": L,
        "dtype": precision, "data": data_source, "flop": flop, "warmup": warmup,
        "iters": len(runs_ms), "ms": {"median": stats["median"], "min": stats["min"], "max": stats["max"]},
        "runs_ms": runs_ms, "tflops": flop / (stats["median"] * 1e-3) / 1e12,
        "us_per_step_layer": stats["median"] * 1e3 / (T * L), "check": check_record(checks, T), "env": env,
    }
    if phases is not None:
        record["phases"] = {name: {"median": p["median"], "min": p["min"], "max": p["max"]}
                            for name, p in phases.items()}
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

def time_on_stream(torch, work, warmup: int, iters: int, before=None) -> list[float]:
    """As the harness times a stage (common/harness/event_timing.cpp): `warmup` untimed runs, then
    `iters` runs of `work`, each between two CUDA events on the current stream and waited for
    before the next one starts. `before`, if given, runs untimed ahead of every run of `work`
    (and is waited for); its result is passed to `work`. What `work` returns is kept until the
    stop event is recorded, so that freeing it is not timed."""
    stream = torch.cuda.current_stream()
    for _ in range(warmup):
        work(before() if before else None)
    stream.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    runs_ms = []
    for _ in range(iters):
        prepared = None
        if before is not None:
            prepared = before()
            stream.synchronize()
        start.record(stream)
        kept = work(prepared)
        stop.record(stream)
        stop.synchronize()
        runs_ms.append(start.elapsed_time(stop))
        del kept, prepared
    torch.cuda.synchronize()
    return runs_ms


def write_dump(np, folder: str, outputs: dict) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    for name, array in outputs.items():
        np.save(Path(folder) / f"{name}.npy", np.ascontiguousarray(array, dtype="<f4"))
    names = ", ".join(f"{name}.npy" for name in list(outputs)[:6]) + (", ... every gradient" if len(outputs) > 6 else "")
    print(f"dump: {len(outputs)} tensors ({names}) written to {folder}")


def run(args: argparse.Namespace) -> int:
    try:
        import numpy as np
    except ImportError:
        raise Failure("numpy is required (pip install numpy, or scripts/setup.sh's .venv)") from None
    name = stage_name(args.training, args.precision)
    seed = DEFAULT_SEED if args.seed is None else args.seed

    # Everything that can be read and validated without torch is, first.
    data = load_inputs(np, args) if args.load else None
    upstream, upstream_note = None, ""
    if data is not None and args.training:
        upstream, generated = load_upstream(np, Path(args.load), data["size"], seed)
        upstream_note = (f"; dy, dhy, dcy generated from seed {seed} (the C++ generator's)" if generated
                         else "")
    layouts = output_layouts(data["size"], args.training) if data is not None else None
    check_dir = reference_dir(args, layouts)
    reference = load_reference(np, check_dir, layouts, args.training) if check_dir else None
    # A reduced precision: every input rounded once (as the C++ harness does). A check needs the
    # loaded values to be those already, since the reference in the folder is of the loaded values.
    if data is not None and args.precision != "fp32":
        rounded_away = []
        arrays = [data, upstream] if upstream is not None else [data]
        for tensors in arrays:
            for tensor_name, array in list(tensors.items()):
                if tensor_name == "size":
                    continue
                rounded = round_to_precision(np, array, args.precision)
                if not np.array_equal(rounded, array):
                    rounded_away.append(tensor_name)
                tensors[tensor_name] = rounded
        if rounded_away and reference is not None:
            raise Failure(f"{args.load}: {', '.join(rounded_away[:3])}{', ...' if len(rounded_away) > 3 else ''} "
                          f"hold values that are not {args.precision}, so the reference there is not of the "
                          f"{args.precision} inputs: make the folder with lstm_reference --precision "
                          f"{args.precision}{' --training' if args.training else ''} --save-inputs DIR --dump DIR, "
                          "or --no-check")

    try:
        import torch
    except ImportError:
        print(f"{name} baseline: PyTorch is not installed here; nothing was run")
        return 0
    if not torch.cuda.is_available():
        print(f"{name} baseline: no CUDA GPU is available to PyTorch {torch.__version__} here; nothing was run")
        return 0

    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 means FP32: no TF32 in the GEMMs
    # Off for FP32 (no TF32); left on (PyTorch's default) for BF16, as a user's BF16 nn.LSTM has
    # it. A BF16 run has no FP32 cuDNN op; its GEMMs are BF16 tensor-core ones either way (above).
    torch.backends.cudnn.allow_tf32 = args.precision == "bf16"
    device = torch.device("cuda")
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.precision]

    # Data: loaded (sizes from the files) or drawn by torch (uniform, as nn.LSTM initializes).
    if data is not None:
        H, I, B, T, L = data["size"]
        data_source = f"loaded from {args.load}{upstream_note}" + (
            f", rounded to {args.precision}" if args.precision != "fp32" else "")
        lstm = torch.nn.LSTM(I, H, num_layers=L)
        with torch.no_grad():
            for parameter_name, parameter in lstm.named_parameters():
                parameter.copy_(torch.from_numpy(data[parameter_name]))
        x, h0, c0 = (torch.from_numpy(data[tensor]) for tensor in ("x", "h0", "c0"))
        if args.training:
            dy, dhy, dcy = (torch.from_numpy(upstream[tensor]) for tensor in UPSTREAM_NAMES)
    else:
        H = args.hidden or DEFAULTS["hidden"]
        I = args.input_size or H
        B, T, L = (args.batch or DEFAULTS["batch"], args.seq or DEFAULTS["seq"],
                   args.layers or DEFAULTS["layers"])
        data_source = (f"generated by torch (torch.manual_seed({seed}), uniform; "
                       "not the C++ generator's data)")
        torch.manual_seed(seed)
        lstm = torch.nn.LSTM(I, H, num_layers=L)  # weights uniform in [-1/sqrt(H), 1/sqrt(H)]
        x = torch.empty(T, B, I).uniform_(-1.0, 1.0)
        h0 = torch.empty(L, B, H).uniform_(-1.0, 1.0)
        c0 = torch.empty(L, B, H).uniform_(-1.0, 1.0)
        if args.training:
            dy = torch.empty(T, B, H).uniform_(-1.0, 1.0)
            dhy = torch.empty(L, B, H).uniform_(-1.0, 1.0)
            dcy = torch.empty(L, B, H).uniform_(-1.0, 1.0)
        layouts = output_layouts((H, I, B, T, L), args.training)
    size = (H, I, B, T, L)
    lstm = lstm.to(device=device, dtype=dtype)  # a reduced precision: rounded (nearest even) here
    # Training mode for the training pass: cuDNN then keeps what its backward needs (eval mode
    # refuses a backward); the same numbers either way, as the model has no dropout.
    lstm.train(args.training)
    lstm.flatten_parameters()
    x, h0, c0 = (t.to(device=device, dtype=dtype).contiguous() for t in (x, h0, c0))
    env = collect_environment(torch)
    print(f"{name}  {describe_size(*size)}  {'training' if args.training else 'forward'} {args.precision}  "
          f"{data_source}  "
          f"on {env['gpu']}  (torch {env['torch']}, cuDNN {env['cudnn']}, TF32 off)")

    if args.training:
        dy, dhy, dcy = (t.to(device=device, dtype=dtype).contiguous() for t in (dy, dhy, dcy))
        for tensor in (x, h0, c0):
            tensor.requires_grad_(True)
        parameters = [getattr(lstm, f"{stem}_l{k}") for k in range(L) for stem in PARAMETER_STEMS]
        gradient_names = ["dx", "dh0", "dc0"] + [f"grad_{stem}_l{k}" for k in range(L) for stem in PARAMETER_STEMS]

        def forward(_=None):  # the forward pass keeping its autograd graph (what backward needs)
            y, (hy, cy) = lstm(x, (h0, c0))
            return y, hy, cy

        def backward(outputs):  # every gradient; the graph of `outputs` is consumed
            return torch.autograd.grad(outputs, (x, h0, c0, *parameters), (dy, dhy, dcy))

        def whole_pass(_=None):
            return backward(forward())
    else:
        def forward(_=None):
            return lstm(x, (h0, c0))

    def checked_outputs() -> dict:
        if args.training:
            y, hy, cy = forward()
            gradients = backward((y, hy, cy))
            tensors = {"y": y, "hy": hy, "cy": cy, **dict(zip(gradient_names, gradients))}
        else:
            y, (hy, cy) = forward()
            tensors = {"y": y, "hy": hy, "cy": cy}
        torch.cuda.synchronize()
        # float() first: numpy has no bfloat16 (FP16 and BF16 widen to float32 exactly).
        return {tensor_name: tensor.detach().float().cpu().numpy() for tensor_name, tensor in tensors.items()}

    grad_mode = torch.enable_grad() if args.training else torch.inference_mode()
    phases = None
    with grad_mode:
        # The checked run: no timing code around it.
        checks = None
        if reference is not None or args.dump:
            outputs = checked_outputs()
            if args.dump:
                write_dump(np, args.dump, outputs)
            if reference is not None:
                checks = check_outputs(np, outputs, reference, layouts, args.precision)
                if not all(check["passed"] for check in checks):
                    bounds = ("FP32 bounds: rel-norm 1e-5, max-abs 1e-4" if args.precision == "fp32" else
                              f"{args.precision} bounds, per tensor as in lstm::reduced_precision_tolerance")
                    print(f"{name}: check FAILED against the reference in {check_dir} ({bounds})"
                          "\nDisposition: Failed", file=sys.stderr)
                    return 1
        if checks is None:
            print("check: skipped (--no-check)")

        # Timed runs. A training pass: the whole pass, then its forward (with the graph) and its
        # backward (after an untimed forward each time), each timed on its own.
        if args.training:
            runs_ms = time_on_stream(torch, whole_pass, args.warmup, args.iters)
            phases = {"forward": summarize(time_on_stream(torch, forward, args.warmup, args.iters)),
                      "backward": summarize(time_on_stream(torch, backward, args.warmup, args.iters,
                                                           before=forward))}
        else:
            runs_ms = time_on_stream(torch, forward, args.warmup, args.iters)

    stats = summarize(runs_ms)
    tflops = flop_count(*size, training=args.training) / (stats["median"] * 1e-3) / 1e12
    print(f"time {name}  {describe_size(*size)}  {'training' if args.training else 'forward'} {args.precision}  "
          f"median {stats['median']:.3f} ms (min {stats['min']:.3f}, max {stats['max']:.3f}, {len(runs_ms)} runs)  "
          f"{tflops:.2f} TFLOP/s  {stats['median'] * 1e3 / (T * L):.2f} us/step-layer  on {env['gpu']}")
    if phases is not None:
        print(f"  of which forward (keeping what backward needs) median {phases['forward']['median']:.3f} ms, "
              f"backward median {phases['backward']['median']:.3f} ms (each timed on its own)")
    if args.json:
        try:
            with open(args.json, "a", encoding="utf-8") as file:
                file.write(json_record(size, args.training, data_source, args.warmup, runs_ms, stats, phases,
                                       checks, env, args.precision) + "\n")
        except OSError as error:
            raise Failure(f"{args.json}: cannot append the JSON record ({error.strerror})") from None
        print(f"json: record appended to {args.json}")
    print(f"Disposition: {'Passed' if checks is not None else 'Not checked'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    name = stage_name(args.training, args.precision)
    try:
        return run(args)
    except Failure as error:
        print(f"{name}: error: {error}", file=sys.stderr)
        return 1
    except RuntimeError as error:  # torch's errors, e.g. torch.cuda.OutOfMemoryError
        print(f"{name}: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
