#!/usr/bin/env python3
"""Turns the measured results into plots and the README tables.

Reads only results/<gpu>/, one folder per GPU, and in it:
  bench.json       Google Benchmark JSON written by the bench binary: every stage and every cuDNN
                   algorithm at the canonical config and over the batch and hidden-size sweeps,
                   plus the GPU's measured FP32 FMA rate (the entry named fp32_fma_peak);
  pytorch.jsonl    torch.nn.LSTM over the same configs, one JSON record a line (the last record
                   of a config wins);
  canonical.jsonl  the stage executables' own checked runs (scripts/gpu_check.sh, scripts/run.sh);
                   the stage times come from it only where bench.json is missing, and its check
                   status is quoted in the stage READMEs.

For every GPU folder it writes into <folder>/plots/ (or DIR/<gpu>/ with --out DIR):
  canonical.png      the stages at the canonical config: time and speedup over stage 00, with
                     cuDNN's fastest algorithm and PyTorch as reference lines;
  batch_sweep.png    µs per step against batch size (log-log), one panel per hidden size;
  persistent.png     stage 07 against cuDNN's fastest algorithm at each batch size (and stage 06);
  hidden_sweep.png   µs per step and layer against hidden size (log-log);
  fp32_fraction.png  each stage, cuDNN's fastest and PyTorch as a share of the measured FP32 rate;
drawing what the folder's data allows and saying which figure it could not draw and why.

Then (unless --no-readmes) it rewrites, from the folder named by --readme-gpu, the text between
  <!-- results-table:begin --> and <!-- results-table:end -->           in README.md (required),
  <!-- stage-result:begin --> and <!-- stage-result:end -->             in stages/*/README.md,
  <!-- stage-batch-sweep:begin --> and <!-- stage-batch-sweep:end -->   in stages/*/README.md,
(the stage markers where present). Nothing in those tables is typed by hand.

usage: plots/make_plots.py [--results DIR] [--out DIR] [--no-readmes] [--readme-gpu NAME]
                           [--readme-root DIR]

notebooks/walkthrough.ipynb imports this module: load_results(), results_table(),
stage_paragraph() and the figure_*() functions are its API.
"""
import argparse
import json
import math
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

ROOT = Path(__file__).resolve().parent.parent
DPI = 120  # fixed, so that the same results give the same PNG bytes

# ---------------------------------------------------------------------------------------------
# Configurations and names
# ---------------------------------------------------------------------------------------------


class Config(NamedTuple):
    """The sizes of one LSTM problem."""

    hidden: int
    input_size: int
    batch: int
    seq_len: int
    layers: int

    def label(self):
        return (f"H={self.hidden} I={self.input_size} B={self.batch} "
                f"T={self.seq_len} L={self.layers}")


SIZE_KEYS = Config._fields
NAME_SIZE_KEYS = {"H": "hidden", "I": "input_size", "B": "batch", "T": "seq_len", "L": "layers"}
CANONICAL = Config(hidden=512, input_size=512, batch=64, seq_len=100, layers=4)
BATCH_SWEEP_HIDDEN = (512, 1024)
CUDNN_ORDER = ("cudnn_standard", "cudnn_persist_static", "cudnn_persist_dynamic")
PYTORCH = "pytorch"
PEAK_ENTRY = "fp32_fma_peak"
BARRIER_ENTRY = "grid_sync"  # grid_sync/blocks:N: one grid-wide barrier, counter us_per_barrier


def in_batch_sweep(config):
    """Whether a config is in the batch sweep (docs/design.md: T=100, L=1, H in {512, 1024})."""
    return (config.seq_len == 100 and config.layers == 1 and config.input_size == config.hidden
            and config.hidden in BATCH_SWEEP_HIDDEN)


def in_hidden_sweep(config):
    """Whether a config is in the hidden-size sweep (docs/design.md: B=64, T=100, L=4, I=H)."""
    return (config.batch == 64 and config.seq_len == 100 and config.layers == 4
            and config.input_size == config.hidden)


def is_stage(impl):
    """A numbered stage: '00_naive', '07_persistent', ..."""
    return re.fullmatch(r"\d\d_\w+", impl) is not None


def is_cudnn(impl):
    return impl.startswith("cudnn_")


def cudnn_sort_key(impl):
    return (CUDNN_ORDER.index(impl) if impl in CUDNN_ORDER else len(CUDNN_ORDER), impl)


def display_name(impl):
    """How an implementation is named in legends and tables."""
    if impl == PYTORCH:
        return "PyTorch nn.LSTM"
    if is_cudnn(impl):
        return "cuDNN " + impl[len("cudnn_"):]
    return impl


# ---------------------------------------------------------------------------------------------
# Reading results/<gpu>/
# ---------------------------------------------------------------------------------------------


class InputError(Exception):
    """Malformed or missing input; the message names the file."""


class MissingData(Exception):
    """The data a figure or table needs is not in the results folder; the message says which."""


@dataclass(frozen=True)
class Measurement:
    """One implementation at one config: a bench entry or a JSON Lines record."""

    impl: str
    group: str  # "canonical", "batch_sweep", "hidden_sweep"; "" for a JSON Lines record
    config: Config
    median_ms: float = math.nan
    min_ms: float = math.nan
    max_ms: float = math.nan
    tflops: float = math.nan
    us_per_step_layer: float = math.nan
    runs: int | None = None
    unsupported: str | None = None  # why it was skipped; None when it was measured
    check: str | None = None  # "passed", "FAILED", "not performed" (records only)

    @property
    def supported(self):
        return self.unsupported is None


@dataclass
class GpuResults:
    """Everything read from one results/<gpu>/ folder."""

    name: str
    folder: Path
    bench_path: Path | None = None
    pytorch_path: Path | None = None
    checked_path: Path | None = None
    context: dict = field(default_factory=dict)  # bench.json's context
    bench: list = field(default_factory=list)  # Measurement per bench entry (not the peak)
    fp32_peak_tflops: float | None = None
    grid_sync_us: dict = field(default_factory=dict)  # blocks -> µs per grid-wide barrier
    pytorch: list = field(default_factory=list)  # Measurement per config, the last record wins
    pytorch_env: dict = field(default_factory=dict)
    checked: list = field(default_factory=list)  # Measurement per canonical.jsonl record
    checked_env: dict = field(default_factory=dict)  # env of the latest canonical.jsonl record
    ignored: list = field(default_factory=list)  # bench implementations no figure knows

    def env(self):
        """The environment the caption and table footers quote (bench first, then records)."""
        return self.context or self.checked_env or self.pytorch_env

    def sources(self):
        """The files read, for captions and footers."""
        return [p for p in (self.bench_path, self.pytorch_path, self.checked_path) if p]


def display_path(path):
    """A path as the README and the captions show it: relative to the repository if inside it."""
    path = Path(path).resolve()
    for base in (ROOT, Path.cwd()):
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return str(path)


def read_json(path):
    """The JSON document in `path`."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: not readable as JSON: {error}") from None


def read_jsonl(path):
    """Every JSON record of a .jsonl file, in order, as (line number, record)."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: not readable: {error}") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not a JSON record: {error}") from None
        if not isinstance(record, dict):
            raise InputError(f"{path}:{number}: not a JSON object")
        records.append((number, record))
    return records


def number(mapping, key, where):
    """mapping[key] as a finite float, or an InputError naming `where`."""
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{where}: '{key}' is missing or not a finite number (got {value!r})")
    return float(value)


def config_of_entry(entry, where):
    """A bench entry's sizes: its counters, or (a skipped entry may have none) its name."""
    if all(key in entry for key in SIZE_KEYS):
        return Config(*(int(number(entry, key, where)) for key in SIZE_KEYS))
    sizes = {}
    for part in entry["name"].split("/")[2:]:
        key, _, value = part.partition(":")
        if key in NAME_SIZE_KEYS and value.isdigit():
            sizes[NAME_SIZE_KEYS[key]] = int(value)
    if len(sizes) != len(SIZE_KEYS):
        raise InputError(f"{where}: no sizes: neither the counters {', '.join(SIZE_KEYS)} "
                         "nor H:/I:/B:/T:/L: in the name")
    return Config(**sizes)


def skip_reason(entry):
    """Why Google Benchmark skipped an entry (1.7: error_occurred, 1.8: also skipped), or None."""
    if entry.get("error_occurred") is True:
        return entry.get("error_message") or "skipped with an error"
    if entry.get("skipped") is True:
        return entry.get("skip_message") or entry.get("error_message") or "skipped"
    return None


def measurement_of_entry(entry, where):
    """A Measurement from one bench entry named '<impl>/<group>/H:../I:../B:../T:../L:..[/...]'."""
    parts = entry["name"].split("/")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise InputError(f"{where}: name is not '<impl>/<group>/...'")
    impl, group = parts[0], parts[1]
    config = config_of_entry(entry, where)
    reason = skip_reason(entry)
    if reason is not None:
        return Measurement(impl, group, config, unsupported=reason)
    values = {key: number(entry, key, where)
              for key in ("median_ms", "min_ms", "max_ms", "tflops", "us_per_step_layer")}
    runs = entry.get("iterations")
    return Measurement(impl, group, config, runs=runs if isinstance(runs, int) else None,
                       **values)


def read_bench(path, results):
    """Fills `results` from a bench.json (Google Benchmark's JSON output)."""
    document = read_json(path)
    if not isinstance(document, dict) or not isinstance(document.get("benchmarks"), list):
        raise InputError(f"{path}: not Google Benchmark JSON (no 'benchmarks' list)")
    context = document.get("context", {})
    if not isinstance(context, dict):
        raise InputError(f"{path}: 'context' is not a JSON object")
    results.bench_path, results.context = Path(path), context
    latest, medians = {}, {}
    for index, entry in enumerate(document["benchmarks"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise InputError(f"{path}: benchmarks[{index}] has no name")
        where = f"{path}: benchmarks[{index}] ({entry['name']})"
        # With --benchmark_repetitions, Google Benchmark adds mean/median/stddev entries: the
        # runs themselves are used (their counters are the bench's own medians), and the
        # 'median' aggregate only where the runs were not reported (aggregates only).
        is_aggregate = entry.get("run_type") == "aggregate"
        if is_aggregate and entry.get("aggregate_name") != "median":
            continue
        if entry["name"].split("/")[0] == PEAK_ENTRY:
            if skip_reason(entry) is None:
                results.fp32_peak_tflops = number(entry, "tflops", where)
            continue
        if entry["name"].split("/")[0] == BARRIER_ENTRY:
            if skip_reason(entry) is None:
                blocks = int(number(entry, "blocks", where))
                results.grid_sync_us[blocks] = number(entry, "us_per_barrier", where)
            continue
        measurement = measurement_of_entry(entry, where)
        key = (measurement.impl, measurement.group, measurement.config)
        (medians if is_aggregate else latest)[key] = measurement
    for key, measurement in medians.items():
        latest.setdefault(key, measurement)
    for measurement in latest.values():
        if is_stage(measurement.impl) or is_cudnn(measurement.impl):
            results.bench.append(measurement)
        elif measurement.impl not in results.ignored:
            results.ignored.append(measurement.impl)


def measurement_of_record(record, where, impl):
    """A Measurement from one JSON Lines record (the stages' --json schema)."""
    config = Config(*(int(number(record, key, where)) for key in SIZE_KEYS))
    ms = record.get("ms")
    check = record.get("check") if isinstance(record.get("check"), dict) else {}
    status = ("passed" if check.get("passed") is True else
              "not performed" if check.get("performed") is not True else "FAILED")
    return Measurement(impl, "", config,
                       median_ms=number(ms, "median", f"{where}: ms"),
                       min_ms=number(ms, "min", f"{where}: ms"),
                       max_ms=number(ms, "max", f"{where}: ms"),
                       tflops=number(record, "tflops", where),
                       us_per_step_layer=number(record, "us_per_step_layer", where),
                       runs=record.get("iters") if isinstance(record.get("iters"), int) else None,
                       check=status)


def read_pytorch(path, results):
    """Fills `results` from pytorch.jsonl: the last record of each config."""
    latest = {}
    for line, record in read_jsonl(path):
        measurement = measurement_of_record(record, f"{path}:{line}", PYTORCH)
        latest[measurement.config] = measurement
        results.pytorch_env = record.get("env") or results.pytorch_env
    results.pytorch_path, results.pytorch = Path(path), list(latest.values())


def read_checked(path, results):
    """Fills `results` from canonical.jsonl: every record of a stage, in file order."""
    for line, record in read_jsonl(path):
        where = f"{path}:{line}"
        if not isinstance(record.get("stage"), str):
            raise InputError(f"{where}: 'stage' is missing or not a string")
        results.checked.append(measurement_of_record(record, where, record["stage"]))
        results.checked_env = record.get("env") or results.checked_env
    results.checked_path = Path(path)


def gpu_folders(results_dir):
    """The folders under `results_dir` that hold bench.json, pytorch.jsonl or canonical.jsonl."""
    return [folder for folder in sorted(Path(results_dir).iterdir())
            if folder.is_dir() and any((folder / name).is_file()
                                       for name in ("bench.json", "pytorch.jsonl",
                                                    "canonical.jsonl"))]


def load_results(folder):
    """Everything in one results/<gpu>/ folder, as a GpuResults."""
    folder = Path(folder)
    results = GpuResults(name=folder.name, folder=folder)
    if (folder / "bench.json").is_file():
        read_bench(folder / "bench.json", results)
    if (folder / "pytorch.jsonl").is_file():
        read_pytorch(folder / "pytorch.jsonl", results)
    if (folder / "canonical.jsonl").is_file():
        read_checked(folder / "canonical.jsonl", results)
    return results


# ---------------------------------------------------------------------------------------------
# Selecting what a figure or a table shows
# ---------------------------------------------------------------------------------------------


@dataclass
class CanonicalView:
    """The canonical config: every stage, every cuDNN algorithm and PyTorch, one row each."""

    config: Config
    stages: list  # Measurement per stage, in stage order
    cudnn: list  # Measurement per cuDNN algorithm
    pytorch: Measurement | None
    stage_source: Path | None  # bench.json, or canonical.jsonl where bench.json is missing

    def stage(self, name):
        return next((m for m in self.stages if m.impl == name), None)

    def base(self):
        """Stage 00 when measured: the reference of every speedup."""
        first = self.stages[0] if self.stages else None
        return first if first and first.impl.startswith("00_") and first.supported else None

    def previous(self, name):
        """The stage just before `name` in stage order, when measured."""
        names = [m.impl for m in self.stages]
        index = names.index(name)
        before = self.stages[index - 1] if index > 0 else None
        return before if before and before.supported else None

    def fastest_cudnn(self):
        return fastest(self.cudnn)


def fastest(measurements):
    """The supported measurement with the smallest median time, or None."""
    measured = [m for m in measurements if m.supported]
    return min(measured, key=lambda m: m.median_ms) if measured else None


def canonical_view(results):
    """The canonical-config rows of `results`: stages from bench.json (or canonical.jsonl)."""
    bench = [m for m in results.bench if m.group == "canonical"]
    stages = {m.impl: m for m in bench if is_stage(m.impl)}
    source = results.bench_path if stages else None
    if not stages:
        for m in results.checked:  # the latest checked record of each stage
            if m.config == CANONICAL:
                stages[m.impl] = m
        source = results.checked_path if stages else None
    config = bench[0].config if bench else CANONICAL
    cudnn = sorted((m for m in bench if is_cudnn(m.impl)), key=lambda m: cudnn_sort_key(m.impl))
    pytorch = next((m for m in results.pytorch if m.config == config), None)
    return CanonicalView(config, [stages[name] for name in sorted(stages)], cudnn, pytorch, source)


def sweep_series(results, group):
    """{impl: [Measurement, ...]} for one sweep: bench entries of `group`, PyTorch's matching
    records; stages first, then cuDNN, then PyTorch."""
    series = {}
    for m in results.bench:
        if m.group == group:
            series.setdefault(m.impl, []).append(m)
    belongs = in_batch_sweep if group == "batch_sweep" else in_hidden_sweep
    pytorch = [m for m in results.pytorch if belongs(m.config)]
    ordered = dict(sorted(((k, v) for k, v in series.items() if is_stage(k))))
    ordered.update(sorted(((k, v) for k, v in series.items() if is_cudnn(k)),
                          key=lambda item: cudnn_sort_key(item[0])))
    if pytorch:
        ordered[PYTORCH] = pytorch
    return ordered


def checked_records(results, stage):
    """canonical.jsonl's canonical-config records of one stage, in file order."""
    return [m for m in results.checked if m.impl == stage and m.config == CANONICAL]


# ---------------------------------------------------------------------------------------------
# Figures (one function each; each returns a matplotlib Figure or raises MissingData)
# ---------------------------------------------------------------------------------------------

STAGE_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink",
                "tab:olive", "tab:cyan")
CUDNN_STYLES = (("black", "s"), ("dimgray", "^"), ("darkgray", "D"), ("silver", "v"))
PYTORCH_COLOR = "tab:red"
CUDNN_COLOR = "black"
BAR_COLOR = "#4878a8"
MIN_BAR_SLOTS = 6  # bar charts keep room for this many bars, so a lone bar is not a slab


def line_style(impl):
    """Line properties of one series in the sweep figures: stages solid and coloured (a stage
    keeps its colour in every figure), cuDNN dashed in greys, PyTorch dotted red."""
    if impl == PYTORCH:
        return dict(color=PYTORCH_COLOR, linestyle=":", marker="x", linewidth=2)
    if is_cudnn(impl):
        color, marker = CUDNN_STYLES[cudnn_sort_key(impl)[0] % len(CUDNN_STYLES)]
        return dict(color=color, linestyle="--", marker=marker, linewidth=1.6)
    return dict(color=STAGE_COLORS[int(impl[:2]) % len(STAGE_COLORS)], linestyle="-",
                marker="o", linewidth=1.6, markersize=4)


def caption(results):
    """The caption line of every figure: GPU, software, date, commit and source files."""
    env = results.env()
    parts = [env.get("gpu", "unknown GPU")]
    for key, label in (("driver", "driver"), ("cuda_runtime", "CUDA"), ("cublas", "cuBLAS"),
                       ("cudnn", "cuDNN")):
        if env.get(key):
            parts.append(f"{label} {env[key]}")
    if results.pytorch_env.get("torch"):
        parts.append(f"PyTorch {results.pytorch_env['torch']}")
    parts.append(f"measured {str(env.get('date_utc', '?'))[:10]}")
    parts.append(f"commit {env.get('git_commit', '?')}")
    names = [p.name for p in results.sources()]
    files = names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"
    return " · ".join(parts) + f" · from {display_path(results.folder)}/{files}"


def new_figure(results, size, title):
    """A Figure with a title on top and the caption line at the bottom (constrained layout keeps
    room for both: the caption is the figure's supxlabel)."""
    fig = Figure(figsize=size, layout="constrained")
    fig.suptitle(title, fontsize=13)
    fig.supxlabel(textwrap.fill(caption(results), int(size[0] * 17), break_on_hyphens=False),
                  x=0.005, ha="left", fontsize=7.5, color="#444444")
    return fig


def stage_tick_label(impl):
    """'01_combined_gemms' -> '01 combined\\ngemms' (fits under a bar)."""
    return textwrap.fill(impl.replace("_", " "), 11)


def format_ms(ms):
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}"


def reference_lines(view):
    """[(label, Measurement, style)] for cuDNN's fastest algorithm and PyTorch, when measured."""
    lines = []
    best = view.fastest_cudnn()
    if best:
        lines.append((f"cuDNN fastest ({best.impl[len('cudnn_'):]})", best,
                      dict(color=CUDNN_COLOR, linestyle="--", linewidth=1.5)))
    if view.pytorch:
        lines.append(("PyTorch nn.LSTM", view.pytorch,
                      dict(color=PYTORCH_COLOR, linestyle=":", linewidth=2)))
    return lines


def draw_bars(ax, view, heights, labels):
    """Bars per stage with a value on top; an unsupported stage gets a note instead of a bar."""
    positions = range(len(view.stages))
    top = max((h for h in heights if h is not None), default=1)
    for x, m, height, label in zip(positions, view.stages, heights, labels):
        if height is None:
            ax.text(x, top * 0.02, "unsupported", ha="center", va="bottom", rotation=90,
                    fontsize=8, color="#aa0000")
            continue
        ax.bar(x, height, color=BAR_COLOR, width=0.7)
        ax.annotate(label, (x, height), xytext=(0, 3), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8,
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=0.5))
    ax.set_xticks(list(positions), [stage_tick_label(m.impl) for m in view.stages], fontsize=8)
    pad = max(0, (MIN_BAR_SLOTS - len(view.stages)) / 2)  # few stages: narrow bars, centred
    ax.set_xlim(-0.6 - pad, len(view.stages) - 0.4 + pad)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def figure_canonical(results):
    """canonical.png: median ms per stage (left) and speedup over stage 00 (right), with cuDNN's
    fastest algorithm and PyTorch as labelled horizontal reference lines."""
    view = canonical_view(results)
    if not view.stages:
        raise MissingData("no stage measured at the canonical config "
                          "(neither bench.json nor canonical.jsonl has one)")
    fig = new_figure(results, (13, 5.4),
                     f"LSTM forward pass, FP32, canonical config ({view.config.label()})")
    ax_ms, ax_speed = fig.subplots(1, 2)
    refs = reference_lines(view)

    ms = [m.median_ms if m.supported else None for m in view.stages]
    draw_bars(ax_ms, view, ms, [format_ms(v) if v else "" for v in ms])
    for label, m, style in refs:
        ax_ms.axhline(m.median_ms, label=f"{label}: {format_ms(m.median_ms)} ms", **style)
    ax_ms.set_ylim(0, max([v for v in ms if v] + [m.median_ms for _, m, _ in refs] + [1e-3])
                   * 1.15)
    ax_ms.set_ylabel("forward pass, median (ms)")
    ax_ms.set_title("time (lower is better)")
    if refs:
        ax_ms.legend(loc="upper right", fontsize=9)

    base = view.base()
    if base is None:
        ax_speed.text(0.5, 0.5, "no measured stage 00 time:\nno speedup to show", ha="center",
                      va="center", transform=ax_speed.transAxes)
        ax_speed.set_axis_off()
        return fig
    speedups = [base.median_ms / v if v else None for v in ms]
    draw_bars(ax_speed, view, speedups, [f"{s:.2f}×" if s else "" for s in speedups])
    for label, m, style in refs:
        ax_speed.axhline(base.median_ms / m.median_ms, **style,
                         label=f"{label}: {base.median_ms / m.median_ms:.2f}× "
                               f"({format_ms(m.median_ms)} ms)")
    ax_speed.set_ylim(0, max([s for s in speedups if s] +
                             [base.median_ms / m.median_ms for _, m, _ in refs]) * 1.15)
    ax_speed.set_ylabel(f"speedup over {base.impl} (×)")
    ax_speed.set_title(f"speedup over {base.impl} (higher is better)")
    if refs:
        ax_speed.legend(loc="upper left", fontsize=9)
    return fig


def log_axes(ax, x_values):
    """Log-log axes with the swept values as the x ticks and plain numbers on both axes."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(x_values))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(which="major", alpha=0.3)


def plot_series(ax, series, x_of, keep=lambda m: True):
    """One line per implementation; unsupported points are left out. Returns the x values."""
    xs_all = []
    for impl, measurements in series.items():
        points = sorted((x_of(m), m.us_per_step_layer) for m in measurements
                        if m.supported and keep(m))
        if not points:
            continue
        xs, ys = zip(*points)
        xs_all += xs
        ax.plot(xs, ys, label=display_name(impl), **line_style(impl))
    return xs_all


def legend_outside(fig, axes):
    """One legend for all panels, to the right of them (labels in series order, once each)."""
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="outside right center", fontsize=9)


def measured_sweep(results, group):
    """sweep_series(), or MissingData when the bench measured nothing of `group` (PyTorch's
    records alone do not make a sweep figure)."""
    series = sweep_series(results, group)
    if not any(m.supported for impl, ms in series.items() if impl != PYTORCH for m in ms):
        if results.bench_path is None:
            raise MissingData(f"no bench.json in {display_path(results.folder)} (the {group} "
                              "entries come from it)")
        raise MissingData(f"{display_path(results.bench_path)} has no measured {group} entry")
    return series


def figure_batch_sweep(results):
    """batch_sweep.png: µs per step against batch size (log-log), one panel per hidden size,
    a line per stage, per cuDNN algorithm and PyTorch (L=1, so a step is a step-layer)."""
    series = measured_sweep(results, "batch_sweep")
    hiddens = sorted({m.config.hidden for ms in series.values() for m in ms if m.supported})
    fig = new_figure(results, (13, 5.4), "LSTM forward, FP32: time per step against batch size "
                                         "(T=100, L=1, I=H)")
    axes = fig.subplots(1, len(hiddens), sharey=True, squeeze=False)[0]
    for ax, hidden in zip(axes, hiddens):
        xs = plot_series(ax, series, lambda m: m.config.batch,
                         keep=lambda m, h=hidden: m.config.hidden == h)
        log_axes(ax, xs)
        ax.set_title(f"H = {hidden}")
        ax.set_xlabel("batch size B")
    axes[0].set_ylabel("µs per time step (lower is better)")
    legend_outside(fig, axes)
    return fig


def figure_persistent(results):
    """persistent.png: the persistent kernel (stage 07) against cuDNN's fastest algorithm at
    each point of the batch sweep (the algorithm named at each point), with stage 06 for
    reference: µs per step against batch size, one panel per hidden size."""
    series = measured_sweep(results, "batch_sweep")
    persistent = [m for m in series.get("07_persistent", []) if m.supported]
    if not persistent:
        raise MissingData("no measured 07_persistent entry in the batch sweep")
    hiddens = sorted({m.config.hidden for m in persistent})
    fig = new_figure(results, (13, 5.4), "Persistent kernel against cuDNN's fastest algorithm at "
                                         "each batch size (FP32, T=100, L=1, I=H)")
    axes = fig.subplots(1, len(hiddens), sharey=True, squeeze=False)[0]
    for ax, hidden in zip(axes, hiddens):
        keep = lambda m, h=hidden: m.config.hidden == h  # noqa: E731
        shown = {impl: series[impl] for impl in ("06_cuda_graph", "07_persistent")
                 if impl in series}
        xs = plot_series(ax, shown, lambda m: m.config.batch, keep=keep)
        fastest = {}  # batch -> (µs, algorithm)
        for impl, measurements in series.items():
            if not is_cudnn(impl):
                continue
            for m in measurements:
                if m.supported and keep(m):
                    best = fastest.get(m.config.batch)
                    if best is None or m.us_per_step_layer < best[0]:
                        fastest[m.config.batch] = (m.us_per_step_layer, impl)
        if fastest:
            batches = sorted(fastest)
            ax.plot(batches, [fastest[b][0] for b in batches], color="black", linestyle="--",
                    marker="s", label="cuDNN fastest at each point")
            for b in batches:
                ax.annotate(display_name(fastest[b][1]).replace("cuDNN ", ""),
                            (b, fastest[b][0]), textcoords="offset points", xytext=(0, -12),
                            ha="center", fontsize=7, color="#333333")
        log_axes(ax, xs + list(fastest))
        ax.set_title(f"H = {hidden}")
        ax.set_xlabel("batch size B")
    axes[0].set_ylabel("µs per time step (lower is better)")
    legend_outside(fig, axes)
    return fig


def figure_hidden_sweep(results):
    """hidden_sweep.png: µs per step and layer against the hidden size H (log-log), a line per
    stage, per cuDNN algorithm and PyTorch."""
    series = measured_sweep(results, "hidden_sweep")
    fig = new_figure(results, (11, 5.4), "LSTM forward, FP32: time per step and layer against "
                                         "hidden size (B=64, T=100, L=4, I=H)")
    ax = fig.subplots()
    xs = plot_series(ax, series, lambda m: m.config.hidden)
    log_axes(ax, xs)
    ax.set_xlabel("hidden size H")
    ax.set_ylabel("µs per step and layer (lower is better)")
    legend_outside(fig, [ax])
    return fig


def figure_fp32_fraction(results):
    """fp32_fraction.png: each stage, cuDNN's fastest and PyTorch at the canonical config as a
    percentage of the GPU's measured FP32 FMA rate (bench entry fp32_fma_peak)."""
    if results.fp32_peak_tflops is None:
        where = (f"{display_path(results.bench_path)} has no" if results.bench_path else
                 f"no bench.json in {display_path(results.folder)}, so no")
        raise MissingData(f"{where} measured FP32 FMA rate (the entry {PEAK_ENTRY})")
    view = canonical_view(results)
    rows = [(m.impl, m, BAR_COLOR) for m in view.stages]
    rows += [(f"{label}", m, style["color"]) for label, m, style in reference_lines(view)]
    if not rows:
        raise MissingData("nothing measured at the canonical config")
    peak = results.fp32_peak_tflops
    fig = new_figure(results, (11, 0.45 * len(rows) + 2.2),
                     f"Share of the measured FP32 FMA rate ({peak:.1f} TFLOP/s), canonical config "
                     f"({view.config.label()})")
    ax = fig.subplots()
    ys = list(range(len(rows)))[::-1]  # first row on top
    shares = [100 * m.tflops / peak if m.supported else None for _, m, _ in rows]
    for y, (label, m, color), share in zip(ys, rows, shares):
        if share is None:
            ax.text(0, y, "  unsupported", va="center", fontsize=9, color="#aa0000")
            continue
        ax.barh(y, share, color=color, height=0.65)
        ax.text(share, y, f"  {share:.1f} %  ({m.tflops:.2f} TFLOP/s)", va="center", fontsize=9)
    ax.set_yticks(ys, [label for label, _, _ in rows], fontsize=9)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(0, max([s for s in shares if s is not None] + [1]) * 1.35)
    ax.set_xlabel("% of the measured FP32 FMA rate (higher is better)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    return fig


FIGURES = {
    "canonical.png": figure_canonical,
    "batch_sweep.png": figure_batch_sweep,
    "persistent.png": figure_persistent,
    "hidden_sweep.png": figure_hidden_sweep,
    "fp32_fraction.png": figure_fp32_fraction,
}


def save(fig, path):
    """Writes a figure as PNG with a fixed dpi and no Software tag (reproducible bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})


# ---------------------------------------------------------------------------------------------
# Tables and paragraphs (README.md, stages/*/README.md, the notebook)
# ---------------------------------------------------------------------------------------------


def ratio(a, b):
    """a / b formatted as '1.23×', or '–' when either is missing."""
    return f"{a / b:.2f}×" if a and b else "–"


def footer(results, view):
    """The line under the results table: sources, GPU, date, commit."""
    env = results.env()
    files = [display_path(p) for p in (view.stage_source, results.pytorch_path,
                                       results.bench_path if view.cudnn else None) if p]
    files = list(dict.fromkeys(files))
    text = (f"Generated by `plots/make_plots.py` from {' and '.join(f'`{f}`' for f in files)} "
            f"({env.get('gpu', '?')}, {str(env.get('date_utc', '?'))[:10]}, "
            f"commit {env.get('git_commit', '?')}")
    if results.pytorch_env.get("torch"):
        text += f"; PyTorch {results.pytorch_env['torch']}"
    text += (f"). Canonical config {view.config.label()}, FP32; speedups and ratios are of "
             "median times.")
    if not view.cudnn:
        text += " No cuDNN measurement yet (it comes from bench.json)."
    skipped = [m for m in view.stages + view.cudnn if not m.supported]
    for m in skipped:
        text += f" `{m.impl}` is unsupported here: {m.unsupported}."
    return text


def results_table(results):
    """Markdown table of the canonical config: one row per stage, per cuDNN algorithm (the
    fastest marked) and PyTorch, and the footer line."""
    view = canonical_view(results)
    if not (view.stages or view.cudnn or view.pytorch):
        raise MissingData(f"{display_path(results.folder)}: nothing measured at the canonical "
                          "config")
    base, best = view.base(), view.fastest_cudnn()
    base_ms, best_ms = (base.median_ms if base else None), (best.median_ms if best else None)
    lines = ["| stage | ms (median) | TFLOP/s | speedup over 00 | speedup over previous stage "
             "| time ÷ cuDNN's fastest |",
             "|---|--:|--:|--:|--:|--:|"]

    def row(name, m, previous="–"):
        if not m.supported:
            return f"| {name} | unsupported | – | – | – | – |"
        return (f"| {name} | {m.median_ms:.3f} | {m.tflops:.2f} | {ratio(base_ms, m.median_ms)} "
                f"| {previous} | {ratio(m.median_ms, best_ms)} |")

    for m in view.stages:
        before = view.previous(m.impl)
        lines.append(row(m.impl, m, ratio(before.median_ms, m.median_ms) if before else "–"))
    for m in view.cudnn:
        mark = " **(fastest cuDNN)**" if m is best else ""
        lines.append(row(f"{display_name(m.impl)}{mark}", m))
    if view.pytorch:
        failed = " (check FAILED)" if view.pytorch.check == "FAILED" else ""
        lines.append(row(f"{display_name(PYTORCH)}{failed}", view.pytorch))
    return "\n".join(lines) + "\n\n" + footer(results, view)


def stage_paragraph(results, stage):
    """One paragraph on a stage at the canonical config: its time (median, min, max), TFLOP/s,
    µs per step-layer, speedups over stage 00 and the previous stage, ratio to cuDNN's
    fastest, the check of its checked run, and the source."""
    view = canonical_view(results)
    m = view.stage(stage)
    env = results.env()
    if m is None:
        return (f"Not measured yet: `{display_path(results.folder)}` has no canonical-config "
                f"result of `{stage}`.")
    where = f"the canonical config ({view.config.label()}, FP32) on the {env.get('gpu', '?')}"
    if not m.supported:
        return f"At {where} this stage is unsupported: {m.unsupported}."
    runs = f" of {m.runs} runs" if m.runs else ""
    text = (f"Measured at {where}: **{m.median_ms:.2f} ms** median{runs} (min {m.min_ms:.2f}, "
            f"max {m.max_ms:.2f}), {m.tflops:.2f} TFLOP/s, {m.us_per_step_layer:.1f} µs per step "
            "and layer.")
    base, before, best = view.base(), view.previous(stage), view.fastest_cudnn()
    comparisons = []
    if base and base is not m:
        comparisons.append(f"{ratio(base.median_ms, m.median_ms)} over `{base.impl}`")
    if before and before is not base:
        comparisons.append(f"{ratio(before.median_ms, m.median_ms)} over the previous stage "
                           f"`{before.impl}`")
    if comparisons:
        slower = any(other.median_ms < m.median_ms for other in (base, before) if other)
        text += (" Speedup " + ", ".join(comparisons)
                 + (" (below 1× is a slowdown)." if slower else "."))
    if best:
        text += (f" Its time is {ratio(m.median_ms, best.median_ms)} that of cuDNN's fastest "
                 f"algorithm (`{best.impl}`, {best.median_ms:.2f} ms).")
    checked = checked_records(results, stage)
    if checked:
        text += (f" Check against the CPU reference (latest run in "
                 f"`{results.checked_path.name}`): {checked[-1].check}.")
    source = view.stage_source
    text += (f" Source: `{display_path(source)}` (commit {env.get('git_commit', '?')}, "
             f"{str(env.get('date_utc', '?'))[:10]}).")
    if source == results.checked_path and len(checked) > 1:
        medians = [r.median_ms for r in checked]
        text += (f" Across the {len(checked)} committed runs of this stage the median ranged "
                 f"from {min(medians):.2f} to {max(medians):.2f} ms.")
    return text


def stage_batch_sweep_table(results, stage):
    """Markdown table: a stage's µs per step at each batch size of the sweep, beside cuDNN's
    fastest algorithm at the same point."""
    series = sweep_series(results, "batch_sweep")
    mine = {(m.config.hidden, m.config.batch): m for m in series.get(stage, [])}
    if not mine:
        return (f"Not measured yet: `{display_path(results.folder)}` has no batch-sweep result "
                f"of `{stage}`.")
    hiddens = sorted({h for h, _ in mine})
    batches = sorted({b for _, b in mine})
    cudnn = [m for impl, ms in series.items() if is_cudnn(impl) for m in ms]

    def cell(m):
        return "–" if m is None else ("unsupported" if not m.supported
                                      else f"{m.us_per_step_layer:.1f}")

    header = "| B |" + "".join(f" H={h}: {stage} | H={h}: cuDNN fastest |" for h in hiddens)
    lines = [header, "|--:|" + "--:|--:|" * len(hiddens)]
    for b in batches:
        row = f"| {b} |"
        for h in hiddens:
            best = fastest([m for m in cudnn if (m.config.hidden, m.config.batch) == (h, b)])
            note = f" ({best.impl[len('cudnn_'):]})" if best else ""
            row += f" {cell(mine.get((h, b)))} | {cell(best)}{note} |"
        lines.append(row)
    return ("\n".join(lines) + "\n\nµs per time step (T=100, L=1, I=H), median; from "
            f"`{display_path(results.bench_path)}`.")


# ---------------------------------------------------------------------------------------------
# README rewriting
# ---------------------------------------------------------------------------------------------


def replace_between_markers(path, name, text, required=False):
    """Rewrites the text between <!-- name:begin --> and <!-- name:end --> in `path`. Returns
    whether the markers were there; raises InputError when they are not and `required`."""
    source = path.read_text()
    pattern = re.compile(rf"(<!-- {name}:begin -->\n).*?(<!-- {name}:end -->)", re.S)
    if not pattern.search(source):
        if required:
            raise InputError(f"{path}: markers <!-- {name}:begin --> / <!-- {name}:end --> "
                             "not found")
        return False
    path.write_text(pattern.sub(lambda match: match.group(1) + text + "\n" + match.group(2),
                                source))
    return True


def update_readmes(results, readme_root):
    """Rewrites the results table of README.md and the stage sections of stages/*/README.md;
    returns the (path, marker) pairs rewritten."""
    readme = Path(readme_root) / "README.md"
    if not readme.is_file():
        raise InputError(f"{readme}: missing")
    try:
        table = results_table(results)
    except MissingData as why:
        raise InputError(f"the README table cannot be made: {why}") from None
    replace_between_markers(readme, "results-table", table, required=True)
    written = [(readme, "results-table")]
    for stage_readme in sorted((Path(readme_root) / "stages").glob("*/README.md")):
        stage = stage_readme.parent.name
        if replace_between_markers(stage_readme, "stage-result", stage_paragraph(results, stage)):
            written.append((stage_readme, "stage-result"))
        if replace_between_markers(stage_readme, "stage-batch-sweep",
                                   stage_batch_sweep_table(results, stage)):
            written.append((stage_readme, "stage-batch-sweep"))
        if replace_between_markers(stage_readme, "stage07-barrier", barrier_table(results)):
            written.append((stage_readme, "stage07-barrier"))
    return written


def barrier_table(results):
    """Markdown table of the grid-wide barrier's cost per block count (bench grid_sync)."""
    if not results.grid_sync_us:
        return "Not measured yet: no grid_sync entries in bench.json."
    lines = ["| blocks | µs per barrier |", "|--:|--:|"]
    for blocks in sorted(results.grid_sync_us, reverse=True):
        lines.append(f"| {blocks} | {results.grid_sync_us[blocks]:.2f} |")
    commit = results.context.get("git_commit", "?")
    lines += ["", f"From `{display_path(results.bench_path)}` (commit {commit}), 10,000 barriers of "
              "`cooperative_groups::this_grid().sync()` per block count, 128 threads per block."]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def draw_folder(results, out_dir):
    """Draws every figure the folder's data allows; prints one line per file written or not."""
    for name, function in FIGURES.items():
        path = out_dir / name
        try:
            fig = function(results)
        except MissingData as why:
            print(f"plots: {display_path(path)} not drawn: {why}")
            continue
        save(fig, path)
        print(f"plots: wrote {display_path(path)}")
    if results.ignored:
        print(f"plots: {display_path(results.bench_path)}: not plotted (not a stage nor cuDNN): "
              f"{', '.join(results.ignored)}")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="results/<gpu>/ -> PNG plots and the README tables (see the module docstring)")
    parser.add_argument("--results", default=str(ROOT / "results"),
                        help="folder of per-GPU result folders (default: results/)")
    parser.add_argument("--out", help="write the PNGs under OUT/<gpu>/ instead of "
                                      "<results>/<gpu>/plots/")
    parser.add_argument("--no-readmes", action="store_true", help="only draw the plots")
    parser.add_argument("--readme-gpu", default="h100-sxm",
                        help="the results folder the README tables come from (default h100-sxm)")
    parser.add_argument("--readme-root", default=str(ROOT),
                        help="where README.md and stages/*/README.md are (default: the "
                             "repository; the tests point it at a copy)")
    return parser.parse_args(argv)


def run(args):
    results_dir = Path(args.results)
    if not results_dir.is_dir():
        raise InputError(f"{results_dir}: no such results folder")
    folders = gpu_folders(results_dir)
    if not folders:
        print(f"plots: no bench.json, pytorch.jsonl or canonical.jsonl in any folder of "
              f"{display_path(results_dir)}: nothing to draw")
    for folder in folders:
        out_dir = Path(args.out) / folder.name if args.out else folder / "plots"
        draw_folder(load_results(folder), out_dir)
    if not args.no_readmes:
        folder = results_dir / args.readme_gpu
        if folder not in folders:
            raise InputError(f"{folder}: no results there; the README tables are made from it "
                             "(--readme-gpu)")
        for path, marker in update_readmes(load_results(folder), args.readme_root):
            print(f"plots: rewrote {display_path(path)} ({marker})")


def main(argv=None):
    try:
        run(parse_args(argv))
    except InputError as error:
        print(f"make_plots: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
