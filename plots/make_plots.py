#!/usr/bin/env python3
"""Turns the measured results into plots and the README tables.

Reads common/standard_configs.json (the standard configurations: the canonical config and the
sweeps, the same file the benchmark reads; --configs points elsewhere) and results/<gpu>/, one
folder per GPU, and in it:
  bench.json       Google Benchmark JSON written by the bench binary: every stage and every cuDNN
                   algorithm over the standard configurations, named
                   '<implementation>/<group>/H:../I:../B:../T:../L:..' (a stage's name holds its
                   series: 'forward/00_naive'), labelled 'series=.. kind=.. precision=..', plus
                   the GPU's measured FP32 FMA rate (the entry named fp32_fma_peak); a
                   training-kind entry (a training stage, cuDNN's 'cudnn_<algo>_training') also
                   has the counters forward_ms and backward_ms;
  pytorch.jsonl    torch.nn.LSTM over the same configs, one JSON record a line (the last record
                   of a config, kind and precision wins); a training record (kind training, or
                   a stage 'pytorch_training' without a kind) carries its forward and backward
                   as "phases" (the run records' schema) or as forward_ms and backward_ms;
  canonical.jsonl  the stage executables' own checked runs (scripts/gpu_check.sh, scripts/run.sh);
                   the stage times come from it only where bench.json is missing, and its check
                   status is quoted in the stage READMEs;
  bench_training.json  (optional) the training series' own bench run: the training table,
                   figures and stage sections come from it where the folder has one;
  bench_persistent.json  (optional) a bench run of the persistent forward stages (07 and up)
                   and cuDNN's forward algorithms, bench.json's format: persistent_steps.png,
                   the persistent table and the stage sections of every forward stage it
                   measured come from it (cuDNN's fastest of the same run beside them), so that
                   a stage is compared within one run; without it they come from bench.json.
Other files of the folder (side runs such as bench_persistent_08-10-<commit>.json) are not read.
Results written before stages had series (names like '00_naive', no series, kind or precision)
are read as 'forward/00_naive', kind forward, precision fp32.

The forward figures and the results table show forward-kind measurements only; the training
figures and the training table show training-kind ones only (another kind is read, counted on
the console and not drawn). For every GPU folder it writes into <folder>/plots/ (or DIR/<gpu>/
with --out DIR):
  canonical.png      the stages at the canonical config: time and speedup over the first stage,
                     with cuDNN's fastest algorithm and PyTorch as reference lines (a bar's value
                     label sits on the bar, or inside it, or above the lines: never under one);
  batch_sweep.png    µs per step against batch size (log-log), one panel per hidden size;
  persistent.png     the forward series' last stage against cuDNN's fastest algorithm at each
                     batch size (and the stage before it);
  persistent_steps.png  every forward stage of the persistent run (bench_persistent.json; else
                     bench.json's forward stages numbered 07 and up): µs per step against batch
                     size (log-log), a panel per hidden size, with cuDNN's fastest algorithm of
                     the same run at each point;
  hidden_sweep.png   µs per step and layer against hidden size (log-log);
  fp32_fraction.png  each FP32 stage, cuDNN's fastest and PyTorch as a share of the measured FP32
                     rate;
  training_canonical.png  the training pass at the canonical config: per training stage, cuDNN
                     training algorithm and PyTorch's training pass, the forward with stash and
                     the backward stacked with the total marked (each is timed on its own), and
                     each training stage's speedup over the series' stage 00 with cuDNN's fastest
                     training algorithm (and PyTorch) as reference lines;
  training_sweeps.png  the training pass's time per step against batch size (a panel per hidden
                     size) and against hidden size;
  training_persistent.png  the training series' last stage against cuDNN's fastest training
                     algorithm at each batch size (and the stage before it);
drawing what the folder's data allows and saying which figure it could not draw and why. In the
sweep figures a point whose bench entry was skipped ('unsupported: ...', skip_reason()) is
an × in the series' colour in a grey band along the bottom of its panel, the series named beside
it and the × explained in the legend; a point with no entry (not measured) is not drawn. The
console gets a line before each step (reading a folder, drawing a figure, rewriting the READMEs)
and one per file written.

Then (unless --no-readmes) it rewrites, from the folder named by --readme-gpu, the text between
  <!-- results-table:begin --> and <!-- results-table:end -->           in README.md (required),
  <!-- training-table:begin --> and <!-- training-table:end -->         in README.md,
  <!-- persistent-table:begin --> and <!-- persistent-table:end -->     in README.md,
  <!-- stage-result:begin --> and <!-- stage-result:end -->             in stages/*/*/README.md,
  <!-- stage-batch-sweep:begin --> and <!-- stage-batch-sweep:end -->   in stages/*/*/README.md,
(the stage markers where present; stages/<series>/<NN_slug>/README.md is the stage
'<series>/<NN_slug>', compared with the implementations of its own kind in the run
stage_view() picks for it: bench_training.json for a training stage, bench_persistent.json for
a forward stage it measured, else bench.json). Nothing in those tables is typed by hand.

usage: plots/make_plots.py [--results DIR] [--out DIR] [--no-readmes] [--readme-gpu NAME]
                           [--readme-root DIR] [--configs FILE]

notebooks/walkthrough.ipynb imports this module: gpu_folders(), load_results(),
canonical_view(), results_table(), training_table(), persistent_table(), stage_view(),
stage_paragraph(), describe(), registered_stages(), stage_series(), precision_label(),
precisions_text(), display_path() and the figure_*() functions are its API.
"""
import argparse
import itertools
import json
import math
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

if __name__ == "__main__":  # the first import of matplotlib may build its font cache (slow)
    print("plots: loading matplotlib ...", flush=True)

import matplotlib  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import (FixedLocator, FuncFormatter, LogLocator,  # noqa: E402
                               NullFormatter)

ROOT = Path(__file__).resolve().parent.parent
STANDARD_CONFIGS = ROOT / "common" / "standard_configs.json"
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
CUDNN_ORDER = ("cudnn_standard", "cudnn_persist_static", "cudnn_persist_dynamic")
PYTORCH = "pytorch"
PEAK_ENTRY = "fp32_fma_peak"
BARRIER_ENTRY = "grid_sync"  # grid_sync/blocks:N: one grid-wide barrier, counter us_per_barrier
FORWARD = "forward"  # the kind of the forward figures and table, the series of old-schema stages
TRAINING = "training"  # the kind of the training figures and table
TRAINING_SUFFIX = "_training"  # a baseline's training pass: 'cudnn_standard_training'
DEFAULT_KIND, DEFAULT_PRECISION = "forward", "fp32"  # what a record or entry without them is
OLD_STAGE_NAME = re.compile(r"\d\d_[a-z0-9_]+")  # '00_naive': before stages had series
STAGE_NAME = re.compile(r"(?P<series>[a-z0-9_]+)/(?P<slug>\d\d_[a-z0-9_]+)")
# '<implementation>/<group>/H:..': the implementation may hold '/', the group does not.
BENCH_NAME = re.compile(r"(?P<impl>.+?)/(?P<group>[^/]+)/(?P<sizes>H:.*)")


def stage_name(name):
    """The full name of an implementation: an old-schema stage name ('00_naive') is
    'forward/00_naive'; every other name ('forward/00_naive', 'cudnn_standard') is kept."""
    return f"{FORWARD}/{name}" if OLD_STAGE_NAME.fullmatch(name) else name


def is_stage(impl):
    """A stage: '<series>/<NN_slug>', e.g. 'forward/07_persistent_barrier'."""
    return STAGE_NAME.fullmatch(impl) is not None


def stage_series(impl):
    """'forward' of 'forward/07_persistent_barrier'; '' for a baseline."""
    match = STAGE_NAME.fullmatch(impl)
    return match["series"] if match else ""


def stage_slug(impl):
    """'07_persistent_barrier' of 'forward/07_persistent_barrier'; a baseline's name as it is."""
    match = STAGE_NAME.fullmatch(impl)
    return match["slug"] if match else impl


def stage_sort_key(impl):
    """Stages by series (alphabetical), then by number."""
    return (stage_series(impl), stage_slug(impl))


def is_cudnn(impl):
    return impl.startswith("cudnn_")


def cudnn_algorithm(impl):
    """'standard' of 'cudnn_standard' and of its training pass 'cudnn_standard_training' (the
    figures and tables show one kind at a time, which says forward or training)."""
    return impl[len("cudnn_"):].removesuffix(TRAINING_SUFFIX)


def cudnn_sort_key(impl):
    """cuDNN's algorithms in CUDNN_ORDER, an algorithm's training pass in its forward's place
    (so that it keeps its line style), unknown ones after them."""
    base = "cudnn_" + cudnn_algorithm(impl)
    return (CUDNN_ORDER.index(base) if base in CUDNN_ORDER else len(CUDNN_ORDER), impl)


def display_name(impl):
    """How an implementation is named in legends and tables."""
    if impl == PYTORCH:
        return "PyTorch nn.LSTM"
    if is_cudnn(impl):
        return "cuDNN " + cudnn_algorithm(impl)
    return impl


def precision_label(precision):
    """'fp32' -> 'FP32', 'bf16' -> 'BF16', 'fp32_emulated_bf16x9' -> 'FP32 emulated bf16x9'."""
    first, *rest = precision.split("_")
    return " ".join([first.upper(), *rest])


def precisions_text(measurements):
    """The precisions of `measurements` for a title or a sentence: 'FP32', 'FP16 and FP32'."""
    return join_precisions(m.precision for m in measurements)


def join_precisions(precisions):
    """'FP32', 'FP16 and FP32', 'BF16, FP16 and FP32' for precisions such as 'fp32'."""
    labels = sorted({precision_label(p) for p in precisions})
    if not labels:
        return "no precision"
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


# Stages measured under a name their code no longer has: the results keep the name they were
# measured under (results are never rewritten); the plots show it as measured and say so.
RENAMED_STAGES = {"forward/07_persistent": "forward/10_small_batch_registers"}


def registered_stages(root=ROOT):
    """Every stage of the source tree, from its folder stages/<series>/<NN_slug>/, in stage
    order (what the notebook calls 'not measured yet' when the results lack one)."""
    names = [f"{folder.parent.name}/{folder.name}"
             for folder in Path(root).glob("stages/*/*") if folder.is_dir()]
    return sorted((n for n in names if is_stage(n)), key=stage_sort_key)


# ---------------------------------------------------------------------------------------------
# The standard configurations (common/standard_configs.json)
# ---------------------------------------------------------------------------------------------

GROUP_LIST_KEYS = ("hidden", "input_size", "batch", "seq_len", "layers")  # product order
SIZE_SYMBOLS = {"hidden": "H", "input_size": "I", "batch": "B", "seq_len": "T", "layers": "L"}


@dataclass(frozen=True)
class ConfigGroup:
    """One named group of standard configurations: the product of its lists."""

    name: str
    lists: dict  # key -> tuple of ints; no 'input_size' when it equals hidden
    configs: tuple  # Config, hidden outermost, then (input_size,) batch, seq_len, layers

    def __contains__(self, config):
        return config in self.configs

    def fixed_label(self):
        """The sizes the group holds fixed: 'T=100, L=1, I=H' (the batch sweep)."""
        parts = [f"{SIZE_SYMBOLS[key]}={values[0]}" for key, values in self.lists.items()
                 if len(values) == 1 and key != "input_size"]
        if "input_size" not in self.lists:
            parts.append("I=H")
        elif len(self.lists["input_size"]) == 1:
            parts.append(f"I={self.lists['input_size'][0]}")
        return ", ".join(parts)

    def one_layer(self):
        """Whether every config has L=1 (then a step-layer is a time step)."""
        return self.lists["layers"] == (1,)


@dataclass(frozen=True)
class StandardConfigs:
    """common/standard_configs.json: the canonical config and the sweeps, by group name."""

    path: Path
    groups: dict  # name -> ConfigGroup, in the file's order

    @property
    def canonical(self):
        """The one config of the group 'canonical'."""
        return self.groups["canonical"].configs[0]

    def group(self, name):
        """The group `name`, or MissingData naming the file."""
        if name not in self.groups:
            raise MissingData(f"{display_path(self.path)} has no group '{name}'")
        return self.groups[name]


def load_standard_configs(path=None):
    """Reads and checks the standard configurations (default common/standard_configs.json)."""
    path = Path(path) if path else STANDARD_CONFIGS
    document = read_json(path)
    if not isinstance(document, dict) or not isinstance(document.get("groups"), list):
        raise InputError(f"{path}: no 'groups' list")
    groups = {}
    for index, group in enumerate(document["groups"]):
        where = f"{path}: groups[{index}]"
        if not isinstance(group, dict) or not isinstance(group.get("name"), str):
            raise InputError(f"{where}: not an object with a 'name'")
        where = f"{path}: group '{group['name']}'"
        unknown = sorted(set(group) - {"name", *GROUP_LIST_KEYS})
        if unknown:
            raise InputError(f"{where}: unknown key(s) {', '.join(unknown)}")
        lists = {}
        for key in GROUP_LIST_KEYS:
            values = group.get(key)
            if values is None and key == "input_size":
                continue
            if (not isinstance(values, list) or not values or
                    any(isinstance(v, bool) or not isinstance(v, int) or v <= 0
                        for v in values)):
                raise InputError(f"{where}: '{key}' is not a non-empty list of positive "
                                 f"integers (got {values!r})")
            lists[key] = tuple(values)
        if group["name"] in groups:
            raise InputError(f"{where}: the name appears twice")
        configs = tuple(
            Config(hidden=h, input_size=(h if i is None else i), batch=b, seq_len=t, layers=n)
            for h in lists["hidden"] for i in lists.get("input_size", (None,))
            for b in lists["batch"] for t in lists["seq_len"] for n in lists["layers"])
        groups[group["name"]] = ConfigGroup(group["name"], lists, configs)
    if "canonical" not in groups or len(groups["canonical"].configs) != 1:
        raise InputError(f"{path}: needs a group 'canonical' holding exactly one config")
    return StandardConfigs(Path(path), groups)


# ---------------------------------------------------------------------------------------------
# Reading results/<gpu>/
# ---------------------------------------------------------------------------------------------


class InputError(Exception):
    """Malformed or missing input; the message names the file."""


class MissingData(Exception):
    """The data a figure or table needs is not in the results folder; the message says which."""


@dataclass(frozen=True)
class Measurement:
    """One implementation at one config, kind and precision: a bench entry or a JSON Lines
    record."""

    impl: str  # 'forward/00_naive', 'cudnn_standard', 'pytorch'
    group: str  # "canonical", "batch_sweep", "hidden_sweep"; "" for a JSON Lines record
    config: Config
    median_ms: float = math.nan  # for kind "training": forward and backward together
    min_ms: float = math.nan
    max_ms: float = math.nan
    tflops: float = math.nan
    us_per_step_layer: float = math.nan
    runs: int | None = None
    unsupported: str | None = None  # why it was skipped; None when it was measured
    check: str | None = None  # "passed", "FAILED", "not performed" (records only)
    series: str = ""  # 'forward', 'training'; '' for a baseline
    kind: str = DEFAULT_KIND  # 'forward' or 'training'
    precision: str = DEFAULT_PRECISION  # 'fp32', 'fp16', 'bf16', 'fp32_emulated_...'
    phases: tuple = ()  # kind "training": (('forward', median, min, max), ('backward', ...))
    not_checked: tuple = ()  # what the check did not cover, in words (records only)

    @property
    def supported(self):
        return self.unsupported is None

    @property
    def not_measured_label(self):
        """'unsupported' for a size the implementation refused, 'failed' for a run that failed
        (e.g. its outputs held NaN)."""
        return "unsupported" if self.unsupported.startswith("unsupported") else "failed"

    @property
    def not_measured_phrase(self):
        """not_measured_label() in a sentence: 'is unsupported' or 'failed in this run'."""
        return ("is unsupported" if self.not_measured_label == "unsupported"
                else "failed in this run")

    def phase_ms(self, name):
        """The median time of one phase ('forward', 'backward') of a training measurement."""
        return next((median for phase, median, _, _ in self.phases if phase == name), None)


@dataclass
class GpuResults:
    """Everything read from one results/<gpu>/ folder."""

    name: str
    folder: Path
    configs: StandardConfigs
    bench_path: Path | None = None
    pytorch_path: Path | None = None
    checked_path: Path | None = None
    context: dict = field(default_factory=dict)  # bench.json's context
    bench: list = field(default_factory=list)  # Measurement per bench entry (not the peak)
    fp32_peak_tflops: float | None = None
    grid_sync_us: dict = field(default_factory=dict)  # blocks -> µs per grid-wide barrier
    pytorch: list = field(default_factory=list)  # Measurement per config, kind and precision
    pytorch_env: dict = field(default_factory=dict)
    checked: list = field(default_factory=list)  # Measurement per canonical.jsonl record
    checked_env: dict = field(default_factory=dict)  # env of the latest canonical.jsonl record
    ignored: list = field(default_factory=list)  # bench implementations no figure knows
    # The training series' own benchmark run (bench_training.json), where the folder has one:
    # the training table, figures and stage sections use it, so that every training number on
    # them comes from one run; None: they use bench.json like the rest.
    training: "GpuResults | None" = None
    # The persistent forward stages' own benchmark run (bench_persistent.json), where the folder
    # has one: persistent_steps.png, the persistent table and the stage sections of the forward
    # stages it measured use it, beside cuDNN's algorithms of the same run; None: bench.json.
    persistent: "GpuResults | None" = None

    def env(self):
        """The environment the caption and table footers quote (bench first, then records)."""
        return self.context or self.checked_env or self.pytorch_env

    def sources(self):
        """The files read, for captions and footers."""
        return [p for p in (self.bench_path, self.pytorch_path, self.checked_path) if p]

    def measurements(self):
        """Every measurement read (bench entries, PyTorch's and the checked records)."""
        return self.bench + self.pytorch + self.checked

    def stages(self):
        """Every stage name in the folder (any kind, group or file, the training and persistent
        runs included), in stage order: what stage_colors() colours, so that a stage keeps its
        colour in every figure of the folder."""
        names = {m.impl for m in self.measurements() if is_stage(m.impl)}
        for run in (self.training, self.persistent):
            if run is not None:
                names.update(run.stages())
        return sorted(names, key=stage_sort_key)

    def off_standard(self):
        """Bench entries of a group of the standard configurations at a config not in it (left
        out of the figures: common/standard_configs.json changed since the bench ran)."""
        return [m for m in self.bench if m.group in self.configs.groups
                and m.config not in self.configs.groups[m.group]]


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


def parse_label(label, where):
    """A bench entry's label 'series=forward kind=forward precision=fp32' as a dict (words
    without '=' are ignored); {} for an entry without a label (old files)."""
    if label is None:
        return {}
    if not isinstance(label, str):
        raise InputError(f"{where}: 'label' is not a string (got {label!r})")
    return dict(word.split("=", 1) for word in label.split() if "=" in word)


def series_kind_precision(fields, impl, where):
    """(series, kind, precision) of an implementation from a record's or a label's fields; the
    defaults (old schema) where they are absent: the stage name's series (or '' for a
    baseline), kind 'forward', precision 'fp32'."""
    values = {}
    for key, default in (("series", stage_series(impl)), ("kind", DEFAULT_KIND),
                         ("precision", DEFAULT_PRECISION)):
        value = fields.get(key, default)
        if not isinstance(value, str):
            raise InputError(f"{where}: '{key}' is not a string (got {value!r})")
        values[key] = value
    if not values["kind"] or not values["precision"]:
        raise InputError(f"{where}: empty 'kind' or 'precision'")
    if is_stage(impl) and values["series"] != stage_series(impl):
        raise InputError(f"{where}: series '{values['series']}' but the stage {impl} is in "
                         f"series '{stage_series(impl)}'")
    return values["series"], values["kind"], values["precision"]


def config_from_name(sizes, where):
    """A Config from 'H:512/I:512/B:64/T:100/L:4[/...]', or an InputError."""
    values = {}
    for part in sizes.split("/"):
        key, _, value = part.partition(":")
        if key in NAME_SIZE_KEYS and value.isdigit():
            values[NAME_SIZE_KEYS[key]] = int(value)
    if len(values) != len(SIZE_KEYS):
        raise InputError(f"{where}: no sizes: neither the counters {', '.join(SIZE_KEYS)} "
                         "nor H:/I:/B:/T:/L: in the name")
    return Config(**values)


def skip_reason(entry):
    """Why Google Benchmark skipped an entry (1.7: error_occurred, 1.8: also skipped), or None."""
    if entry.get("error_occurred") is True:
        return entry.get("error_message") or "skipped with an error"
    if entry.get("skipped") is True:
        return entry.get("skip_message") or entry.get("error_message") or "skipped"
    return None


def measurement_of_entry(entry, where):
    """A Measurement from one bench entry named '<impl>/<group>/H:../I:../B:../T:../L:..[/...]'
    (the implementation may itself hold '/': 'forward/00_naive/canonical/H:512/...')."""
    match = BENCH_NAME.fullmatch(entry["name"])
    if match is None:
        raise InputError(f"{where}: name is not '<implementation>/<group>/H:../I:../B:../T:../"
                         "L:..'")
    impl, group = stage_name(match["impl"]), match["group"]
    series, kind, precision = series_kind_precision(parse_label(entry.get("label"), where),
                                                    impl, where)
    if all(key in entry for key in SIZE_KEYS):
        config = Config(*(int(number(entry, key, where)) for key in SIZE_KEYS))
    else:  # a skipped entry may have no counters
        config = config_from_name(match["sizes"], where)
    common = dict(series=series, kind=kind, precision=precision)
    reason = skip_reason(entry)
    if reason is not None:
        return Measurement(impl, group, config, unsupported=reason, **common)
    values = {key: number(entry, key, where)
              for key in ("median_ms", "min_ms", "max_ms", "tflops", "us_per_step_layer")}
    phases = tuple((phase, number(entry, f"{phase}_ms", where), math.nan, math.nan)
                   for phase in ("forward", "backward") if f"{phase}_ms" in entry)
    runs = entry.get("iterations")
    return Measurement(impl, group, config, runs=runs if isinstance(runs, int) else None,
                       phases=phases, **values, **common)


def measurement_key(m):
    """What makes two measurements the same point: the later one replaces the earlier."""
    return (m.impl, m.group, m.config, m.kind, m.precision)


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
        (medians if is_aggregate else latest)[measurement_key(measurement)] = measurement
    for key, measurement in medians.items():
        latest.setdefault(key, measurement)
    for measurement in latest.values():
        if is_stage(measurement.impl) or is_cudnn(measurement.impl):
            results.bench.append(measurement)
        elif measurement.impl not in results.ignored:
            results.ignored.append(measurement.impl)


def timing(mapping, where):
    """(median, min, max) of a record's {"median", "min", "max"} object."""
    return tuple(number(mapping, key, where) for key in ("median", "min", "max"))


def measurement_of_record(record, where, impl):
    """A Measurement from one JSON Lines record (the stages' --json schema; old records
    without series, kind and precision are forward, FP32)."""
    config = Config(*(int(number(record, key, where)) for key in SIZE_KEYS))
    series, kind, precision = series_kind_precision(record, impl, where)
    median, low, high = timing(record.get("ms"), f"{where}: ms")
    check = record.get("check") if isinstance(record.get("check"), dict) else {}
    status = ("passed" if check.get("passed") is True else
              "not performed" if check.get("performed") is not True else "FAILED")
    not_checked = check.get("not_checked") or []
    if not isinstance(not_checked, list) or not all(isinstance(n, str) for n in not_checked):
        raise InputError(f"{where}: 'check.not_checked' is not a list of strings")
    return Measurement(impl, "", config, median_ms=median, min_ms=low, max_ms=high,
                       tflops=number(record, "tflops", where),
                       us_per_step_layer=number(record, "us_per_step_layer", where),
                       runs=record.get("iters") if isinstance(record.get("iters"), int) else None,
                       check=status, series=series, kind=kind, precision=precision,
                       phases=record_phases(record, where), not_checked=tuple(not_checked))


PHASES = ("forward", "backward")  # a training pass: forward with stash, then backward


def record_phases(record, where):
    """The phases of a training record: its 'phases' object ({"forward": {"median", "min",
    "max"}, "backward": {...}}, the run records' schema), or else the fields 'forward_ms' and
    'backward_ms', each a number (a median) or such an object; () when it has neither."""
    phases = record.get("phases")
    if phases is not None:
        if not isinstance(phases, dict):
            raise InputError(f"{where}: 'phases' is not a JSON object")
        order = {name: index for index, name in enumerate(PHASES)}
        return tuple((name, *timing(phases[name], f"{where}: phases.{name}"))
                     for name in sorted(phases, key=lambda n: (order.get(n, len(order)), n)))
    found = []
    for name in PHASES:
        value = record.get(f"{name}_ms")
        if value is None:
            continue
        if isinstance(value, dict):
            found.append((name, *timing(value, f"{where}: {name}_ms")))
        else:
            found.append((name, number(record, f"{name}_ms", where), math.nan, math.nan))
    return tuple(found)


def read_pytorch(path, results):
    """Fills `results` from pytorch.jsonl: the last record of each config, kind and precision.
    A training record ('kind': 'training', or a stage named like 'pytorch_training' where the
    kind is absent) is PyTorch's training pass, with its phases (record_phases())."""
    latest = {}
    for line, record in read_jsonl(path):
        if "kind" not in record and str(record.get("stage", "")).endswith(TRAINING_SUFFIX):
            record = dict(record, kind=TRAINING)
        measurement = measurement_of_record(record, f"{path}:{line}", PYTORCH)
        latest[measurement_key(measurement)] = measurement
        results.pytorch_env = record.get("env") or results.pytorch_env
    results.pytorch_path, results.pytorch = Path(path), list(latest.values())


def read_checked(path, results):
    """Fills `results` from canonical.jsonl: every record of a stage, in file order."""
    for line, record in read_jsonl(path):
        where = f"{path}:{line}"
        if not isinstance(record.get("stage"), str):
            raise InputError(f"{where}: 'stage' is missing or not a string")
        results.checked.append(measurement_of_record(record, where,
                                                     stage_name(record["stage"])))
        results.checked_env = record.get("env") or results.checked_env
    results.checked_path = Path(path)


def gpu_folders(results_dir):
    """The folders under `results_dir` that hold bench.json, pytorch.jsonl or canonical.jsonl."""
    return [folder for folder in sorted(Path(results_dir).iterdir())
            if folder.is_dir() and any((folder / name).is_file()
                                       for name in ("bench.json", "pytorch.jsonl",
                                                    "canonical.jsonl"))]


TRAINING_BENCH = "bench_training.json"  # the training series' own run
PERSISTENT_BENCH = "bench_persistent.json"  # the persistent forward stages' own run
FIRST_PERSISTENT_STAGE = 7  # without that run, bench.json's forward stages from 07 on


def training_view(results):
    """The results the training series is shown from: the folder's bench_training.json run
    where it has one, else `results` itself."""
    return results.training if results.training is not None else results


def persistent_view(results):
    """The results the persistent stages are shown from (persistent_steps.png, the persistent
    table): the folder's bench_persistent.json run where it has one, else `results` itself."""
    return results.persistent if results.persistent is not None else results


def is_persistent_stage(results, impl):
    """Whether persistent_steps.png and the persistent table show `impl`: a forward stage of the
    bench_persistent.json run where the folder has one; else (bench.json) a forward stage
    numbered FIRST_PERSISTENT_STAGE or higher."""
    if stage_series(impl) != FORWARD:
        return False
    if results.persistent is not None:
        return True
    return int(stage_slug(impl)[:2]) >= FIRST_PERSISTENT_STAGE


def stage_view(results, stage):
    """The results a stage's README sections (stage_paragraph(), stage_batch_sweep_table()) come
    from: the training run (training_view()) for a training stage; the persistent run for a
    forward stage that run measured (any entry of its own kind), so that the stage is compared
    with cuDNN's algorithms of the same run; `results` (bench.json) for every other stage."""
    stage = stage_name(stage)
    if stage_series(stage) == TRAINING:
        return training_view(results)
    run = results.persistent
    if run is not None and stage_series(stage) == FORWARD and any(
            m.impl == stage and m.kind == FORWARD for m in run.bench):
        return run
    return results


def load_results(folder, configs=None):
    """Everything in one results/<gpu>/ folder, as a GpuResults; `configs` is a
    StandardConfigs (default: common/standard_configs.json). The runs of bench_training.json
    and bench_persistent.json, where there, are GpuResults of their own (.training,
    .persistent), each with the canonical.jsonl records (the check a stage section quotes)."""
    folder = Path(folder)
    configs = configs or load_standard_configs()
    results = GpuResults(name=folder.name, folder=folder, configs=configs)
    if (folder / "bench.json").is_file():
        read_bench(folder / "bench.json", results)
    if (folder / PERSISTENT_BENCH).is_file():
        results.persistent = GpuResults(name=folder.name, folder=folder, configs=configs)
        read_bench(folder / PERSISTENT_BENCH, results.persistent)
        if (folder / "canonical.jsonl").is_file():
            read_checked(folder / "canonical.jsonl", results.persistent)
    if (folder / TRAINING_BENCH).is_file():
        results.training = GpuResults(name=folder.name, folder=folder, configs=configs)
        read_bench(folder / TRAINING_BENCH, results.training)
        if (folder / "pytorch.jsonl").is_file():
            read_pytorch(folder / "pytorch.jsonl", results.training)
        if (folder / "canonical.jsonl").is_file():
            read_checked(folder / "canonical.jsonl", results.training)
    if (folder / "pytorch.jsonl").is_file():
        read_pytorch(folder / "pytorch.jsonl", results)
    if (folder / "canonical.jsonl").is_file():
        read_checked(folder / "canonical.jsonl", results)
    return results


# ---------------------------------------------------------------------------------------------
# Selecting what a figure or a table shows (forward-kind measurements)
# ---------------------------------------------------------------------------------------------


def precision_sort_key(precision):
    """The default precision (fp32) first, then the others alphabetically."""
    return (precision != DEFAULT_PRECISION, precision)


@dataclass
class CanonicalView:
    """The canonical config: every stage (at each precision measured), every cuDNN algorithm
    and PyTorch, one row each, of one kind."""

    config: Config
    stages: list  # Measurement per stage and precision, in stage order
    cudnn: list  # Measurement per cuDNN algorithm (and precision)
    pytorch: Measurement | None
    stage_source: Path | None  # bench.json, or canonical.jsonl where bench.json is missing
    kind: str = FORWARD

    def rows(self):
        """Every measurement of the view: stages, cuDNN, PyTorch."""
        return self.stages + self.cudnn + ([self.pytorch] if self.pytorch else [])

    def stage(self, name, precision=None):
        """The row of stage `name` (its first precision, or `precision`), or None."""
        return next((m for m in self.stages if m.impl == name
                     and precision in (None, m.precision)), None)

    def stage_rows(self, name):
        """Every row of stage `name` (one per precision measured)."""
        return [m for m in self.stages if m.impl == name]

    def base(self):
        """The first stage (its number 00) when measured: the reference of every speedup."""
        first = self.stages[0] if self.stages else None
        return (first if first and stage_slug(first.impl).startswith("00_") and first.supported
                else None)

    def previous(self, name, precision=None):
        """The row of the stage just before `name` in its series (at the same precision where
        that stage has it), when measured."""
        me = self.stage(name, precision)
        if me is None:
            return None
        index = self.stages.index(me)
        earlier = [m for m in self.stages[:index]
                   if m.impl != name and stage_series(m.impl) == stage_series(name)]
        if not earlier:
            return None
        rows = [m for m in earlier if m.impl == earlier[-1].impl]
        before = next((m for m in rows if m.precision == me.precision), rows[0])
        return before if before.supported else None

    def fastest_cudnn(self):
        return fastest(self.cudnn)


def fastest(measurements):
    """The supported measurement with the smallest median time, or None."""
    measured = [m for m in measurements if m.supported]
    return min(measured, key=lambda m: m.median_ms) if measured else None


def row_sort_key(m):
    return (stage_sort_key(m.impl), precision_sort_key(m.precision))


def canonical_view(results, kind=FORWARD):
    """The canonical-config rows of `results` of one kind: stages from bench.json (or, where it
    has none, the latest record of each stage in canonical.jsonl)."""
    config = results.configs.canonical
    bench = [m for m in results.bench
             if m.group == "canonical" and m.config == config and m.kind == kind]
    stages = {(m.impl, m.precision): m for m in bench if is_stage(m.impl)}
    source = results.bench_path if stages else None
    if not stages:
        for m in results.checked:  # the latest checked record of each stage
            if m.config == config and m.kind == kind and is_stage(m.impl):
                stages[(m.impl, m.precision)] = m
        source = results.checked_path if stages else None
    cudnn = sorted((m for m in bench if is_cudnn(m.impl)),
                   key=lambda m: (cudnn_sort_key(m.impl), precision_sort_key(m.precision)))
    pytorch = sorted((m for m in results.pytorch if m.config == config and m.kind == kind),
                     key=lambda m: precision_sort_key(m.precision))
    return CanonicalView(config, sorted(stages.values(), key=row_sort_key), cudnn,
                         pytorch[0] if pytorch else None, source, kind)


def sweep_series(results, group, kind=FORWARD):
    """{(impl, precision): [Measurement, ...]} for one group of the standard configurations:
    bench entries of `group` at its configs, PyTorch's records at its configs; stages first,
    then cuDNN, then PyTorch."""
    configs = results.configs.group(group)
    series = {}
    for m in results.bench:
        if m.group == group and m.kind == kind and m.config in configs:
            series.setdefault((m.impl, m.precision), []).append(m)
    for m in results.pytorch:
        if m.kind == kind and m.config in configs:
            series.setdefault((m.impl, m.precision), []).append(m)
    stages = sorted((k for k in series if is_stage(k[0])),
                    key=lambda k: (stage_sort_key(k[0]), precision_sort_key(k[1])))
    cudnn = sorted((k for k in series if is_cudnn(k[0])),
                   key=lambda k: (cudnn_sort_key(k[0]), precision_sort_key(k[1])))
    pytorch = sorted((k for k in series if k[0] == PYTORCH),
                     key=lambda k: precision_sort_key(k[1]))
    return {key: series[key] for key in stages + cudnn + pytorch}


def checked_records(results, stage, kind=FORWARD, precision=None):
    """canonical.jsonl's canonical-config records of one stage (of one precision, or any), in
    file order."""
    return [m for m in results.checked if m.impl == stage and m.kind == kind
            and m.config == results.configs.canonical and precision in (None, m.precision)]


# ---------------------------------------------------------------------------------------------
# Figures (one function each; each returns a matplotlib Figure or raises MissingData)
# ---------------------------------------------------------------------------------------------

# Stages get the colours of one qualitative colormap per series (series in alphabetical order,
# stages in stage order), without the colours taken by PyTorch (red) and cuDNN (greys); a series
# with more stages than its colormap has colours is spread over a continuous colormap instead.
SERIES_COLORMAPS = ("tab10", "Dark2", "Set1", "Set2")
MANY_STAGES_COLORMAP = "turbo"
CUDNN_STYLES = (("black", "s"), ("dimgray", "^"), ("darkgray", "D"), ("silver", "v"))
PRECISION_MARKERS = ("o", "D", "v", "P", "*")  # a stage's precisions in one figure
PYTORCH_COLOR = "tab:red"
CUDNN_COLOR = "black"
BAR_COLOR = "#4878a8"
MIN_BAR_SLOTS = 6  # bar charts keep room for this many bars, so a lone bar is not a slab


def free_colors(colormap):
    """The colours of a qualitative colormap that neither PyTorch (red) nor cuDNN (greys)
    uses, in the colormap's order."""
    reserved = to_hex(PYTORCH_COLOR)
    return [to_hex(c) for c in matplotlib.colormaps[colormap].colors
            if to_hex(c) != reserved and max(c[:3]) - min(c[:3]) > 0.05]


def stage_colors(stages):
    """{stage: colour} for the stages present: per series a colormap of SERIES_COLORMAPS (the
    series in alphabetical order), its colours in the order of the series' stages."""
    colors = {}
    by_series = itertools.groupby(sorted(set(stages), key=stage_sort_key), key=stage_series)
    for index, (_, names) in enumerate(by_series):
        names = list(names)
        palette = free_colors(SERIES_COLORMAPS[index % len(SERIES_COLORMAPS)])
        if len(names) > len(palette):  # too many for the qualitative map: spread them out
            spread = matplotlib.colormaps[MANY_STAGES_COLORMAP]
            palette = [to_hex(spread(0.05 + 0.9 * i / (len(names) - 1)))
                       for i in range(len(names))]
        colors.update(zip(names, palette))
    return colors


def line_style(key, colors, precisions=(DEFAULT_PRECISION,)):
    """Line properties of one (implementation, precision) in the sweep figures: stages solid,
    coloured by stage_colors() (a stage keeps its colour in every figure of a folder) and marked
    by precision, cuDNN dashed in greys, PyTorch dotted red."""
    impl, precision = key
    marker_index = sorted(precisions, key=precision_sort_key).index(precision) \
        if precision in precisions else 0
    if impl == PYTORCH:
        return dict(color=PYTORCH_COLOR, linestyle=":", marker="x", linewidth=2)
    if is_cudnn(impl):
        color, marker = CUDNN_STYLES[cudnn_sort_key(impl)[0] % len(CUDNN_STYLES)]
        return dict(color=color, linestyle="--", marker=marker, linewidth=1.6)
    return dict(color=colors.get(impl, BAR_COLOR), linestyle="-", linewidth=1.6, markersize=4,
                marker=PRECISION_MARKERS[marker_index % len(PRECISION_MARKERS)])


def series_label(key, precisions):
    """A legend entry: the implementation, with its precision where the figure has several."""
    impl, precision = key
    if len(precisions) > 1:
        return f"{display_name(impl)} · {precision_label(precision)}"
    return display_name(impl)


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
    fig = Figure(figsize=size, dpi=DPI, layout="constrained")  # the PNG's dpi: text placed
    # against the lines (keep_labels_off_lines) is placed at the size it is saved at
    fig.suptitle(title, fontsize=13)
    fig.supxlabel(textwrap.fill(caption(results), int(size[0] * 17), break_on_hyphens=False),
                  x=0.005, ha="left", fontsize=7.5, color="#444444")
    return fig


def stage_tick_label(m, view, width=11):
    """'forward/01_combined_gemms' -> '01 combined\\ngemms' (fits under a bar: lines of at most
    `width` characters), with the series on top where the view holds several, and the precision
    below where it holds several."""
    text = textwrap.fill(stage_slug(m.impl).replace("_", " "), width, break_long_words=False)
    if len({stage_series(s.impl) for s in view.stages}) > 1:
        text = f"{stage_series(m.impl)}/\n{text}"
    if len({s.precision for s in view.stages}) > 1:
        text += f"\n{precision_label(m.precision)}"
    return text


def format_ms(ms):
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}"


def reference_lines(view):
    """[(label, Measurement, style)] for cuDNN's fastest algorithm and PyTorch, when measured;
    the label names the precision where the view holds several."""
    mixed = len({m.precision for m in view.rows()}) > 1

    def named(label, m):
        return f"{label} · {precision_label(m.precision)}" if mixed else label

    lines = []
    best = view.fastest_cudnn()
    if best:
        lines.append((named(f"cuDNN fastest ({cudnn_algorithm(best.impl)})", best), best,
                      dict(color=CUDNN_COLOR, linestyle="--", linewidth=1.5)))
    if view.pytorch:
        lines.append((named("PyTorch nn.LSTM", view.pytorch), view.pytorch,
                      dict(color=PYTORCH_COLOR, linestyle=":", linewidth=2)))
    return lines


VALUE_LABEL_GID = "value-label"  # a bar's value in canonical.png
UNSUPPORTED_LABEL_GID = "unsupported-label"  # the note in place of an unsupported stage's bar
REFERENCE_LINE_GID = "reference-line"  # cuDNN's fastest and PyTorch across canonical.png
LINE_CLEARANCE_PX = 3  # the least distance between a reference line and a value label's box


def draw_speedup_panel(ax_speed, view, base, refs, ms, title):
    """The speedup panel of a canonical figure: a bar per stage (its median `ms`, None where it
    was not measured) over `base`, and the reference lines `refs` (label, measurement, style)."""
    speedups = [base.median_ms / v if v else None for v in ms]
    # The panel is narrow: tick labels in lines of 9 characters, so that neighbours do not touch.
    draw_bars(ax_speed, view, speedups, [f"{s:.2f}×" if s else "" for s in speedups],
              tick_width=9)
    for label, m, style in refs:
        ax_speed.axhline(base.median_ms / m.median_ms, **style, gid=REFERENCE_LINE_GID,
                         label=f"{label}: {base.median_ms / m.median_ms:.2f}× "
                               f"({format_ms(m.median_ms)} ms)")
    ax_speed.set_ylim(0, max([s for s in speedups if s] +
                             [base.median_ms / m.median_ms for _, m, _ in refs]) * 1.15)
    ax_speed.set_ylabel(f"speedup over {base.impl} (×)")
    ax_speed.set_title(title)
    if refs:
        ax_speed.legend(loc="upper left", fontsize=9)


def draw_bars(ax, view, heights, labels, tick_width=11):
    """Bars per stage with a value on top; an unsupported stage gets a note instead of a bar.
    The texts are offset from the bar top in points, so that keep_labels_off_lines() can lift
    one above a reference line."""
    positions = range(len(view.stages))
    for x, m, height, label in zip(positions, view.stages, heights, labels):
        if height is None:
            ax.annotate(m.not_measured_label, (x, 0), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", rotation=90, fontsize=8, color="#aa0000",
                        gid=UNSUPPORTED_LABEL_GID, annotation_clip=False, in_layout=False)
            continue
        ax.bar(x, height, color=BAR_COLOR, width=0.7)
        ax.annotate(label, (x, height), xytext=(0, 3), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8, gid=VALUE_LABEL_GID,
                    annotation_clip=False, in_layout=False, bbox=dict(LABEL_BOX))
    ax.set_xticks(list(positions), [stage_tick_label(m, view, tick_width) for m in view.stages],
                  fontsize=8)
    pad = max(0, (MIN_BAR_SLOTS - len(view.stages)) / 2)  # few stages: narrow bars, centred
    ax.set_xlim(-0.6 - pad, len(view.stages) - 0.4 + pad)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def label_box(text):
    """A value label's box in display pixels: the text and the pad of its background box (the
    box's own extent is only updated when it is drawn)."""
    box = text.get_window_extent()
    patch = text.get_bbox_patch()
    if patch is None:
        return box
    dpi = text.get_figure(root=True).dpi
    return box.padded(patch.get_boxstyle().pad * text.get_size() * dpi / 72)


def lines_crossing(text, line_ys):
    """The display heights of the horizontal lines in `line_ys` that cross `text`'s box or pass
    closer to it than LINE_CLEARANCE_PX."""
    box = label_box(text)
    return [y for y in line_ys
            if box.y0 - LINE_CLEARANCE_PX <= y <= box.y1 + LINE_CLEARANCE_PX]


LABEL_ABOVE = dict(offset=3, va="bottom", color="black", bbox=True)  # on top of the bar
LABEL_INSIDE = dict(offset=-3, va="top", color="white", bbox=False)  # in the bar, at its top
LABEL_BOX = dict(facecolor="white", edgecolor="none", pad=0.5)  # opaque: hides the grid


def place_label(text, place):
    """Puts a value label on top of its bar or inside it (LABEL_ABOVE, LABEL_INSIDE)."""
    text.xyann = (text.xyann[0], place["offset"])
    text.set_verticalalignment(place["va"])
    text.set_color(place["color"])
    text.set_bbox(dict(LABEL_BOX) if place["bbox"] else None)


def keep_tick_labels_apart(fig, axes):
    """Where neighbouring tick labels of a bar panel of `axes` would overlap once the figure is
    laid out (many stages in a narrow panel), writes each on one line, slanted, so that none
    touches the next."""
    for ax in axes:
        if not tick_labels_overlap(fig, ax):
            continue
        labels = [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()]
        ax.set_xticks(ax.get_xticks(), labels, rotation=30, ha="right", rotation_mode="anchor",
                      fontsize=8)


def tick_labels_overlap(fig, ax):
    """Whether two neighbouring tick labels of `ax` overlap, or touch, in the laid-out figure.
    Straight labels: their boxes. Slanted ones (parallel lines of text): the distance between
    two neighbours across their slant against the height of a line."""
    fig.draw_without_rendering()
    ticks = ax.get_xticklabels()
    boxes = [t.get_window_extent() for t in ticks]
    for (left, left_box), (right, right_box) in zip(zip(ticks, boxes), zip(ticks[1:], boxes[1:])):
        angle = math.radians(left.get_rotation())
        if angle == 0:
            if left_box.x1 >= right_box.x0 and left_box.y0 < right_box.y1 and \
                    right_box.y0 < left_box.y1:
                return True
            continue
        spacing_px = ax.transData.transform((right.get_position()[0], 0))[0] - \
            ax.transData.transform((left.get_position()[0], 0))[0]
        line_px = left.get_fontsize() * fig.dpi / 72 * 1.2
        if spacing_px * math.sin(angle) <= line_px:
            return True
    return False


def under_legend(text):
    """Whether the legend of the text's panel covers the text (a value label)."""
    legend = text.axes.get_legend()
    return legend is not None and legend.get_window_extent().overlaps(label_box(text))


def keep_labels_off_lines(fig, axes, attempts=6):
    """Places every value label of `axes` so that no reference line crosses it: on top of its
    bar where no line is in the way; else inside the bar, at its top, where the bar is tall
    enough and no line crosses it there; else on top of the bar, lifted to just above the
    highest line in its way. An 'unsupported' note is lifted likewise. Where a lifted label
    would leave the panel, or sits under the panel's legend, the panel grows upwards and the
    labels are placed again. Runs the figure's layout first (constrained layout fixes where the
    axes are); the labels stay out of the layout, so placing them does not move the axes."""
    for _ in range(attempts):
        fig.draw_without_rendering()
        overflow = False
        for ax in axes:
            line_ys = [ax.transData.transform((0, line.get_ydata()[0]))[1]
                       for line in ax.get_lines() if line.get_gid() == REFERENCE_LINE_GID]
            for text in ax.texts:
                if text.get_gid() not in (VALUE_LABEL_GID, UNSUPPORTED_LABEL_GID):
                    continue
                bar = text.get_gid() == VALUE_LABEL_GID
                if bar:
                    place_label(text, LABEL_ABOVE)
                else:
                    text.xyann = (text.xyann[0], 3)
                if bar and lines_crossing(text, line_ys):
                    place_label(text, LABEL_INSIDE)
                    base_px = ax.transData.transform((0, 0))[1]
                    if (lines_crossing(text, line_ys)
                            or label_box(text).y0 < base_px + LINE_CLEARANCE_PX):
                        place_label(text, LABEL_ABOVE)
                for _ in range(len(line_ys) + 1):
                    hits = lines_crossing(text, line_ys)
                    if not hits:
                        break
                    lift_px = max(hits) + LINE_CLEARANCE_PX + 1 - label_box(text).y0
                    text.xyann = (text.xyann[0], text.xyann[1] + lift_px * 72 / fig.dpi)
                if label_box(text).y1 > ax.bbox.y1 or under_legend(text):
                    overflow = True
            if overflow:
                low, high = ax.get_ylim()
                ax.set_ylim(low, high + (high - low) * 0.1)
        if not overflow:
            return


def series_title(view):
    """'forward series' or 'forward and training series' for the stages of a view."""
    names = sorted({stage_series(m.impl) for m in view.stages})
    return (" and ".join(names) + " series") if names else "no stage"


def figure_canonical(results):
    """canonical.png: median ms per stage (left) and speedup over the first stage (right), with
    cuDNN's fastest algorithm and PyTorch as labelled horizontal reference lines."""
    view = canonical_view(results)
    if not view.stages:
        raise MissingData("no stage measured at the canonical config "
                          "(neither bench.json nor canonical.jsonl has one)")
    fig = new_figure(results, (13, 5.4),
                     f"LSTM {view.kind} pass, {precisions_text(view.rows())}, canonical config "
                     f"({view.config.label()})")
    ax_ms, ax_speed = fig.subplots(1, 2)
    refs = reference_lines(view)

    ms = [m.median_ms if m.supported else None for m in view.stages]
    draw_bars(ax_ms, view, ms, [format_ms(v) if v else "" for v in ms])
    for label, m, style in refs:
        ax_ms.axhline(m.median_ms, label=f"{label}: {format_ms(m.median_ms)} ms",
                      gid=REFERENCE_LINE_GID, **style)
    ax_ms.set_ylim(0, max([v for v in ms if v] + [m.median_ms for _, m, _ in refs] + [1e-3])
                   * 1.15)
    ax_ms.set_ylabel(f"{view.kind} pass, median (ms)")
    ax_ms.set_title(f"time (lower is better), {series_title(view)}")
    if refs:
        ax_ms.legend(loc="upper right", fontsize=9)

    base = view.base()
    if base is None:
        ax_speed.text(0.5, 0.5, "no measured first stage (00) time:\nno speedup to show",
                      ha="center", va="center", transform=ax_speed.transAxes)
        ax_speed.set_axis_off()
        keep_tick_labels_apart(fig, [ax_ms])
        keep_labels_off_lines(fig, [ax_ms])
        return fig
    draw_speedup_panel(ax_speed, view, base, refs, ms,
                       f"speedup over {base.impl} (higher is better)")
    keep_tick_labels_apart(fig, [ax_ms, ax_speed])
    keep_labels_off_lines(fig, [ax_ms, ax_speed])
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


def sweep_precisions(series):
    """The precisions of a sweep's measured series."""
    return {precision for (_, precision), ms in series.items() if any(m.supported for m in ms)}


# A point an implementation does not support (its bench entry was skipped, e.g. 'unsupported:
# the recurrent weights do not fit on chip') is an × in the series' colour in a band along the
# bottom of the panel, one row per series, named once per row; a point without an entry (not
# measured) is not drawn at all.
UNSUPPORTED_POINT_GID = "unsupported-point"
UNSUPPORTED_NOTE_GID = "unsupported-note"
UNSUPPORTED_MARKER = dict(marker="x", markersize=8, markeredgewidth=2, linestyle="none")
UNSUPPORTED_LEGEND = "not supported (stated limit)\nor failed, in the series' colour"
UNSUPPORTED_ROW_Y = (0.04, 0.055)  # the first row's centre and the step between rows (axes)


class UnsupportedRow(NamedTuple):
    """The points of one series a panel marks as not supported."""

    label: str  # the series as the legend names it
    color: str
    xs: tuple  # sorted
    note: str = "not supported"  # or "failed in this run": what the entries of the points say


def plot_series(ax, series, x_of, colors, keep=lambda m: True, markers=None):
    """One line per (implementation, precision) through its measured points (styled by
    line_style(); `markers`, {implementation: marker}, overrides an implementation's marker).
    Returns the x values of the panel (measured or not supported) and an UnsupportedRow per
    series with points it does not support (for mark_unsupported())."""
    xs_all, rows = [], []
    precisions = sweep_precisions(series)
    for key, measurements in series.items():
        style = line_style(key, colors, precisions)
        if markers and key[0] in markers:
            style.update(marker=markers[key[0]], markersize=6.5)
        label = series_label(key, precisions)
        points = sorted((x_of(m), m.us_per_step_layer) for m in measurements
                        if m.supported and keep(m))
        skipped = sorted({x_of(m) for m in measurements if not m.supported and keep(m)})
        if skipped:
            labels = {m.not_measured_label for m in measurements if not m.supported and keep(m)}
            note = {frozenset({"unsupported"}): "not supported",
                    frozenset({"failed"}): "failed in this run"}.get(frozenset(labels),
                                                                    "not supported or failed")
            rows.append(UnsupportedRow(label, style["color"], tuple(skipped), note))
            xs_all += skipped
        if not points:
            continue
        xs, ys = zip(*points)
        xs_all += xs
        ax.plot(xs, ys, label=label, **style)
    return xs_all, rows


def mark_unsupported(ax, rows, xs):
    """Draws each UnsupportedRow as ×s at its x values in the bottom band of the panel (x in
    data, y in axes coordinates: the y limits do not follow them), with the series named
    beside its row, on the side with room (the panel's x values are `xs`)."""
    first, step = UNSUPPORTED_ROW_Y
    for index, row in enumerate(rows):
        y = first + index * step
        ax.plot(row.xs, [y] * len(row.xs), color=row.color, transform=ax.get_xaxis_transform(),
                clip_on=False, zorder=4, gid=UNSUPPORTED_POINT_GID, label="_unsupported",
                **UNSUPPORTED_MARKER)
        text = f"{row.label}: {row.note}"
        note = dict(fontsize=7.5, color=row.color, va="center", gid=UNSUPPORTED_NOTE_GID,
                    xycoords=ax.get_xaxis_transform(), textcoords="offset points")
        if row.xs[0] > min(xs):  # room on the left of the row
            ax.annotate(text, (row.xs[0], y), xytext=(-8, 0), ha="right", **note)
        elif row.xs[-1] < max(xs):  # room on the right
            ax.annotate(text, (row.xs[-1], y), xytext=(8, 0), ha="left", **note)
        else:  # every point of the panel: over the middle of the row
            middle = math.sqrt(row.xs[0] * row.xs[-1])  # log axes
            ax.annotate(text, (middle, y), xytext=(0, 0), ha="center",
                        bbox=dict(facecolor="white", edgecolor="none", pad=0.5), **note)


UNSUPPORTED_BAND_COLOR = "#f0f0f0"


def reserve_unsupported_band(axes, rows):
    """Lowers the bottom of the (shared) log y axis of `axes` so that `rows` rows of
    unsupported marks lie below every measured point, in a grey band that covers the grid and
    has no tick labels: the band is not a range of times. Nothing when `rows` is 0."""
    if not rows:
        return
    first, step = UNSUPPORTED_ROW_Y
    band = first + (rows - 1) * step + first  # the band's top, in axes coordinates
    gap = 0.02  # between the band and the lowest point
    low, high = (math.log10(v) for v in axes[0].get_ylim())
    bottom = (low - (band + gap) * high) / (1 - band - gap)
    axes[0].set_ylim(10 ** bottom, 10 ** high)
    band_top = 10 ** (bottom + band * (high - bottom))  # in data coordinates
    axes[0].yaxis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v:g}" if v >= band_top else ""))
    for ax in axes:
        ax.add_patch(Rectangle((0, 0), 1, band, transform=ax.transAxes, zorder=0.6,
                               facecolor=UNSUPPORTED_BAND_COLOR, edgecolor="none"))


def legend_outside(fig, axes):
    """One legend for all panels, to the right of them (labels in series order, once each),
    with the unsupported mark explained last where a panel has one."""
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if any(line.get_gid() == UNSUPPORTED_POINT_GID for ax in axes for line in ax.get_lines()):
        handles[UNSUPPORTED_LEGEND] = Line2D([], [], color="#555555", **UNSUPPORTED_MARKER)
    fig.legend(list(handles.values()), list(handles), loc="outside right center", fontsize=9)


def measured_sweep(results, group, kind=FORWARD):
    """sweep_series() of one kind, or MissingData when the bench measured nothing of `group`
    in that kind (PyTorch's records alone do not make a sweep figure)."""
    series = sweep_series(results, group, kind)
    if not any(m.supported for key, ms in series.items() if key[0] != PYTORCH for m in ms):
        if results.bench_path is None:
            raise MissingData(f"no bench.json in {display_path(results.folder)} (the {group} "
                              "entries come from it)")
        raise MissingData(f"{display_path(results.bench_path)} has no measured {kind}-kind "
                          f"{group} entry at the configs of "
                          f"{display_path(results.configs.path)}")
    return series


def step_unit(group):
    """'µs per time step' where the group has L=1, else 'µs per step and layer'."""
    return "µs per time step" if group.one_layer() else "µs per step and layer"


def figure_batch_sweep(results):
    """batch_sweep.png: µs per step against batch size (log-log), one panel per hidden size,
    a line per stage, per cuDNN algorithm and PyTorch (L=1: a step is a step-layer)."""
    series = measured_sweep(results, "batch_sweep")
    group = results.configs.group("batch_sweep")
    hiddens = sorted({m.config.hidden for ms in series.values() for m in ms if m.supported})
    fig = new_figure(results, (13, 5.4),
                     f"LSTM {FORWARD}, {precisions_text(m for ms in series.values() for m in ms)}"
                     f": time per step against batch size ({group.fixed_label()})")
    axes = fig.subplots(1, len(hiddens), sharey=True, squeeze=False)[0]
    colors = stage_colors(results.stages())
    most_rows = 0
    for ax, hidden in zip(axes, hiddens):
        xs, rows = plot_series(ax, series, lambda m: m.config.batch, colors,
                               keep=lambda m, h=hidden: m.config.hidden == h)
        mark_unsupported(ax, rows, xs)
        most_rows = max(most_rows, len(rows))
        log_axes(ax, xs)
        ax.set_title(f"H = {hidden}")
        ax.set_xlabel("batch size B")
    reserve_unsupported_band(axes, most_rows)  # the panels share their y axis
    axes[0].set_ylabel(f"{step_unit(group)} (lower is better)")
    legend_outside(fig, axes)
    return fig


def last_stages(series, series_name):
    """The last stage of the series `series_name` with a measured point in `series`, and the
    stage before it (if any): the keys (impl, precision) of their lines, and the last's name."""
    measured = [key for key, ms in series.items() if stage_series(key[0]) == series_name
                and any(m.supported for m in ms)]
    names = sorted({impl for impl, _ in measured}, key=stage_sort_key)
    return [key for key in measured if key[0] in names[-2:]], names[-1:]


def panel_hiddens(series, shown, impls):
    """The hidden sizes of a figure of cuDNN's fastest at each batch size: those with an entry
    (measured or not supported) of one of `impls` in `shown` where something of the panel (a
    line of `shown`, a cuDNN algorithm of `series`) was measured."""
    measured = {m.config.hidden for key, ms in series.items()
                if key in shown or is_cudnn(key[0]) for m in ms if m.supported}
    return sorted({m.config.hidden for key, ms in shown.items() if key[0] in impls
                   for m in ms} & measured)


CUDNN_FASTEST_GID = "cudnn-fastest"  # the dashed line of cuDNN's fastest at each point
CUDNN_FASTEST_POINT_GID = "cudnn-fastest-point"  # its points, marked by algorithm


def draw_cudnn_fastest(ax, series, keep, precisions):
    """cuDNN's fastest algorithm at each batch size of one panel (the measurements of `series`
    that `keep` keeps): a dashed black line through the points, each point marked by the
    algorithm fastest there (the algorithm's marker of the sweep figures, CUDNN_STYLES; one
    legend entry per algorithm). The line's label names cuDNN's precisions where they and the
    panel's `precisions` are not all one. Returns the batch sizes with a cuDNN entry (measured
    or not) and an UnsupportedRow of those no algorithm supports (or None)."""
    fastest_at = {}  # batch -> (µs, algorithm, precision)
    cudnn_batches = set()  # the batches with a cuDNN entry, measured or not supported
    for (impl, _), measurements in series.items():
        if not is_cudnn(impl):
            continue
        for m in measurements:
            if keep(m):
                cudnn_batches.add(m.config.batch)
            if m.supported and keep(m):
                best = fastest_at.get(m.config.batch)
                if best is None or m.us_per_step_layer < best[0]:
                    fastest_at[m.config.batch] = (m.us_per_step_layer, impl, m.precision)
    label = "cuDNN fastest at each point"
    if fastest_at:
        batches = sorted(fastest_at)
        cudnn_precisions = {fastest_at[b][2] for b in batches}
        if len(precisions | cudnn_precisions) > 1:
            label += " · " + join_precisions(cudnn_precisions)
        ax.plot(batches, [fastest_at[b][0] for b in batches], color=CUDNN_COLOR,
                linestyle="--", linewidth=1.6, label=label, gid=CUDNN_FASTEST_GID)
        for impl in sorted({fastest_at[b][1] for b in batches}, key=cudnn_sort_key):
            points = [(b, fastest_at[b][0]) for b in batches if fastest_at[b][1] == impl]
            marker = CUDNN_STYLES[cudnn_sort_key(impl)[0] % len(CUDNN_STYLES)][1]
            ax.plot(*zip(*points), linestyle="none", marker=marker,
                    markersize=9 if marker in ("^", "v") else 7.5,  # triangles look smaller
                    color=CUDNN_COLOR, markeredgecolor="white", markeredgewidth=0.6, zorder=3,
                    label=f"  fastest there: {display_name(impl)}", gid=CUDNN_FASTEST_POINT_GID)
    refused = sorted(cudnn_batches - set(fastest_at))  # no cuDNN algorithm supports them
    row = UnsupportedRow("cuDNN (every algorithm)", CUDNN_COLOR, tuple(refused)) if refused \
        else None
    return cudnn_batches, row


def draw_against_cudnn_fastest(fig, results, series, shown, hiddens, group, markers=None):
    """The panels of persistent.png and persistent_steps.png, one per hidden size of `hiddens`
    (sharing their y axis): the lines of `shown` (part of `series`, a sweep_series() of the
    batch sweep `group`) and cuDNN's fastest algorithm of `series` at each batch size
    (draw_cudnn_fastest()), µs per step against batch size, log-log, the points not supported
    marked (mark_unsupported()); the legend on the right. Stage colours are those of the
    folder `results`; `markers` as plot_series()'s."""
    precisions = {m.precision for ms in shown.values() for m in ms if m.supported}
    axes = fig.subplots(1, len(hiddens), sharey=True, squeeze=False)[0]
    colors = stage_colors(results.stages())
    most_rows = 0
    for ax, hidden in zip(axes, hiddens):
        keep = lambda m, h=hidden: m.config.hidden == h  # noqa: E731
        xs, rows = plot_series(ax, shown, lambda m: m.config.batch, colors, keep=keep,
                               markers=markers)
        cudnn_batches, refused = draw_cudnn_fastest(ax, series, keep, precisions)
        if refused:
            rows.append(refused)
        mark_unsupported(ax, rows, xs + list(cudnn_batches))
        most_rows = max(most_rows, len(rows))
        log_axes(ax, xs + list(cudnn_batches))
        ax.set_title(f"H = {hidden}")
        ax.set_xlabel("batch size B")
    reserve_unsupported_band(axes, most_rows)  # the panels share their y axis
    axes[0].set_ylabel(f"{step_unit(group)} (lower is better)")
    legend_outside(fig, axes)
    return axes


def figure_last_stage_against_cudnn(results, kind):
    """The last stage of the series of `kind` (forward, training) against cuDNN's fastest
    algorithm of that kind at each point of the batch sweep (each point marked by the algorithm
    fastest there), with the stage before it for reference: µs per step against batch size, one
    panel per hidden size."""
    series = measured_sweep(results, "batch_sweep", kind)
    group = results.configs.group("batch_sweep")
    shown_keys, last = last_stages(series, kind)
    if not last:
        raise MissingData(f"no measured stage of the {kind} series in the batch sweep")
    last = last[0]
    shown = {key: series[key] for key in shown_keys}
    # The panels: the hidden sizes with an entry of the last stage (measured or not supported)
    # where something in the panel was measured.
    hiddens = panel_hiddens(series, shown, {last})
    what = "algorithm" if kind == FORWARD else f"{kind} algorithm"
    fig = new_figure(results, (13, 5.4),
                     f"{last} against cuDNN's fastest {what} at each batch size "
                     f"({precisions_text(m for ms in shown.values() for m in ms if m.supported)}"
                     f", {group.fixed_label()})")
    draw_against_cudnn_fastest(fig, results, series, shown, hiddens, group)
    return fig


def figure_persistent(results):
    """persistent.png: the last stage of the forward series (the persistent kernel, today)
    against cuDNN's fastest algorithm at each batch size (figure_last_stage_against_cudnn())."""
    return figure_last_stage_against_cudnn(results, FORWARD)


def figure_training_persistent(results):
    """training_persistent.png: the last stage of the training series against cuDNN's fastest
    training algorithm at each batch size, the training pass's µs per step (the training
    series' run, training_view())."""
    return figure_last_stage_against_cudnn(training_view(results), TRAINING)


STEP_MARKERS = ("o", "v", "P", "*", "h", "p")  # persistent_steps.png: a marker per stage


def persistent_stage_names(results):
    """The stages persistent_steps.png and the persistent table show, in stage order: the
    forward stages with a forward-kind entry in the persistent run (persistent_view(),
    is_persistent_stage())."""
    run = persistent_view(results)
    return sorted({m.impl for m in run.bench if m.kind == FORWARD and is_stage(m.impl)
                   and is_persistent_stage(results, m.impl)}, key=stage_sort_key)


def no_persistent_stage(results):
    """Why persistent_stage_names() is empty, for MissingData."""
    run = results.persistent
    if run is not None:
        return f"{display_path(run.bench_path)} has no forward-kind entry of a {FORWARD} stage"
    where = (f"{display_path(results.bench_path)} has no" if results.bench_path else
             f"no bench.json in {display_path(results.folder)}, so no")
    return (f"{where} {FORWARD} stage numbered {FIRST_PERSISTENT_STAGE:02d} or up, and "
            f"{display_path(results.folder)} has no {PERSISTENT_BENCH}")


def run_label(run):
    """'bench_persistent.json, commit 6705ece4f2bb': the file and commit of one bench run."""
    name = run.bench_path.name if run.bench_path else "no bench run"
    return f"{name}, commit {run.context.get('git_commit', '?')}"


def stage_range(names):
    """'07–10' for stages 07 to 10 (their numbers), '07' for one."""
    numbers = [stage_slug(n)[:2] for n in names]
    return numbers[0] if len(numbers) == 1 else f"{numbers[0]}–{numbers[-1]}"


def figure_persistent_steps(results):
    """persistent_steps.png: every forward stage of the persistent run (bench_persistent.json;
    without it, bench.json's forward stages numbered 07 and up) with cuDNN's fastest algorithm
    of the same run at each point of the batch sweep (each point marked by the algorithm fastest
    there): µs per step against batch size, log-log, one panel per hidden size. The title names
    the run (file, commit)."""
    run = persistent_view(results)
    if run.bench_path is None:
        raise MissingData(f"neither {PERSISTENT_BENCH} nor bench.json in "
                          f"{display_path(results.folder)}")
    names = persistent_stage_names(results)
    if not names:
        raise MissingData(no_persistent_stage(results))
    series = measured_sweep(run, "batch_sweep")
    group = results.configs.group("batch_sweep")
    shown = {key: ms for key, ms in series.items() if key[0] in names}
    hiddens = panel_hiddens(series, shown, set(names))
    if not any(m.supported for ms in shown.values() for m in ms) or not hiddens:
        raise MissingData(f"{display_path(run.bench_path)} has no measured batch-sweep entry of "
                          f"{', '.join(names)}")
    measured = [m for ms in shown.values() for m in ms if m.supported]
    # Neighbouring stages have near colours (one colormap over the whole series): a marker of
    # its own tells each apart, where the markers do not already tell precisions apart.
    markers = (dict(zip(names, itertools.cycle(STEP_MARKERS)))
               if len({m.precision for m in measured}) == 1 else None)
    fig = new_figure(run, (13, 5.6),
                     f"The persistent {FORWARD} stages {stage_range(names)} and cuDNN's fastest "
                     f"algorithm at each batch size ({precisions_text(measured)}, "
                     f"{group.fixed_label()})\none run: {run_label(run)}")
    draw_against_cudnn_fastest(fig, results, series, shown, hiddens, group, markers)
    return fig


def figure_hidden_sweep(results):
    """hidden_sweep.png: µs per step and layer against the hidden size H (log-log), a line per
    stage, per cuDNN algorithm and PyTorch."""
    series = measured_sweep(results, "hidden_sweep")
    group = results.configs.group("hidden_sweep")
    fig = new_figure(results, (11, 5.4),
                     f"LSTM {FORWARD}, {precisions_text(m for ms in series.values() for m in ms)}"
                     f": time per step and layer against hidden size ({group.fixed_label()})")
    ax = fig.subplots()
    xs, rows = plot_series(ax, series, lambda m: m.config.hidden,
                           stage_colors(results.stages()))
    mark_unsupported(ax, rows, xs)
    log_axes(ax, xs)
    reserve_unsupported_band([ax], len(rows))
    ax.set_xlabel("hidden size H")
    ax.set_ylabel("µs per step and layer (lower is better)")
    legend_outside(fig, [ax])
    return fig


def figure_fp32_fraction(results):
    """fp32_fraction.png: each FP32 stage, cuDNN's fastest FP32 algorithm and PyTorch (FP32) at
    the canonical config as a percentage of the GPU's measured FP32 FMA rate (bench entry
    fp32_fma_peak); measurements in other precisions are named as left out."""
    if results.fp32_peak_tflops is None:
        where = (f"{display_path(results.bench_path)} has no" if results.bench_path else
                 f"no bench.json in {display_path(results.folder)}, so no")
        raise MissingData(f"{where} measured FP32 FMA rate (the entry {PEAK_ENTRY})")
    view = canonical_view(results)
    fp32 = "fp32"  # the peak is an FP32 rate: only FP32 measurements are a share of it
    others = [m for m in view.rows() if m.precision != fp32]
    view = CanonicalView(view.config, [m for m in view.stages if m.precision == fp32],
                         [m for m in view.cudnn if m.precision == fp32],
                         view.pytorch if view.pytorch and view.pytorch.precision == fp32
                         else None, view.stage_source, view.kind)
    rows = [(m.impl, m, BAR_COLOR) for m in view.stages]
    rows += [(f"{label}", m, style["color"]) for label, m, style in reference_lines(view)]
    if not rows:
        raise MissingData("no FP32 measurement at the canonical config")
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
    xlabel = "% of the measured FP32 FMA rate (higher is better)"
    if others:
        xlabel += ("\nnot shown (not FP32): " + ", ".join(
            f"{display_name(m.impl)} ({precision_label(m.precision)})" for m in others))
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    return fig


# The training figures: the phases of a training pass, stacked; the baselines' bars hatched.
PHASE_STYLES = {"forward": dict(color=BAR_COLOR, label="forward with stash (median)"),
                "backward": dict(color="#dd8452", label="backward (median)")}
NO_PHASES_COLOR = "#8c8c8c"  # a bar of a training measurement without its phases
BASELINE_HATCH = dict(hatch="///", edgecolor="white", linewidth=0)
TOTAL_MARK = dict(color="black", linewidth=2.2, solid_capstyle="butt")
TOTAL_LABEL = "total, timed on its own (median)"
TOTAL_MARK_GID = "training-total"  # the total's mark across a bar of training_canonical.png


def bar_tick_label(m, view):
    """A bar's name: a stage as stage_tick_label(), a baseline in two lines ('cuDNN\nstandard',
    'PyTorch\nnn.LSTM'), with the precision below where the view holds several."""
    if is_stage(m.impl):
        return stage_tick_label(m, view)
    text = display_name(m.impl).replace(" ", "\n", 1)
    if mixed_precisions(view):
        text += f"\n{precision_label(m.precision)}"
    return text


def draw_phase_bars(ax, view, rows):
    """One bar per measurement of `rows` (a training view's stages, cuDNN, PyTorch): its forward
    with stash and its backward stacked, the baselines hatched, and the total (timed on its
    own, so not always the height of the stack) as a black mark across the bar; above it the
    total and the two phases in ms. An unsupported one gets a note instead of a bar. Returns
    the highest point drawn."""
    top = 0.0
    for x, m in enumerate(rows):
        if not m.supported:
            ax.annotate(m.not_measured_label, (x, 0), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", rotation=90, fontsize=8, color="#aa0000")
            continue
        hatch = {} if is_stage(m.impl) else BASELINE_HATCH
        forward, backward = m.phase_ms("forward"), m.phase_ms("backward")
        if forward is not None and backward is not None:
            ax.bar(x, forward, width=0.7, color=PHASE_STYLES["forward"]["color"], **hatch)
            ax.bar(x, backward, bottom=forward, width=0.7,
                   color=PHASE_STYLES["backward"]["color"], **hatch)
            stack = forward + backward
            label = f"{format_ms(m.median_ms)}\n{format_ms(forward)} + {format_ms(backward)}"
        else:
            ax.bar(x, m.median_ms, width=0.7, color=NO_PHASES_COLOR, **hatch)
            stack, label = m.median_ms, f"{format_ms(m.median_ms)}\nno phases"
        ax.plot([x - 0.42, x + 0.42], [m.median_ms] * 2, gid=TOTAL_MARK_GID, **TOTAL_MARK)
        ax.annotate(label, (x, max(stack, m.median_ms)), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=7.5,
                    linespacing=1.1)
        top = max(top, stack, m.median_ms)
    ax.set_xticks(range(len(rows)), [bar_tick_label(m, view) for m in rows], fontsize=8)
    pad = max(0, (MIN_BAR_SLOTS - len(rows)) / 2)
    ax.set_xlim(-0.6 - pad, len(rows) - 0.4 + pad)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return top


def phase_legend(ax, rows):
    """The legend of draw_phase_bars(): the phases, the total's mark, the hatching."""
    handles = [Rectangle((0, 0), 1, 1, color=style["color"], label=style["label"])
               for style in PHASE_STYLES.values()]
    if any(m.supported and not m.phases for m in rows):
        handles.append(Rectangle((0, 0), 1, 1, color=NO_PHASES_COLOR,
                                 label="total only (no phases measured)"))
    handles.append(Line2D([], [], label=TOTAL_LABEL, **TOTAL_MARK))
    if any(not is_stage(m.impl) for m in rows):
        handles.append(Rectangle((0, 0), 1, 1, facecolor="#bbbbbb", label="baseline (hatched)",
                                 **BASELINE_HATCH))
    ax.legend(handles=handles, loc="upper right", fontsize=8.5,
              title="label: total ms\nforward + backward ms", title_fontsize=8)


def figure_training_canonical(results):
    """training_canonical.png: the training pass at the canonical config. Left: per training
    stage, cuDNN training algorithm and PyTorch's training pass (when measured), the forward
    with stash and the backward stacked (ms), the total marked. Right: each training stage's
    speedup over the series' stage 00, with cuDNN's fastest training algorithm (and PyTorch)
    as reference lines."""
    results = training_view(results)
    view = canonical_view(results, TRAINING)
    rows = view.rows()
    if not rows:
        raise MissingData(f"no {TRAINING}-kind measurement at the canonical config (bench.json, "
                          "canonical.jsonl and pytorch.jsonl have none)")
    fig = new_figure(results, (14, 5.8),
                     f"LSTM {TRAINING} pass (forward with stash, then backward), "
                     f"{precisions_text(rows)}, canonical config ({view.config.label()})")
    ax_ms, ax_speed = fig.subplots(1, 2, width_ratios=(max(len(rows), 4), 4))
    top = draw_phase_bars(ax_ms, view, rows)
    if view.stages and len(view.stages) < len(rows):  # stages | baselines
        ax_ms.axvline(len(view.stages) - 0.5, color="#999999", linestyle=":", linewidth=1)
    ax_ms.set_ylim(0, max(top, 1e-3) * 1.3)
    ax_ms.set_ylabel(f"{TRAINING} pass, median (ms)")
    ax_ms.set_title("time per training pass (lower is better)")
    if not view.pytorch:
        ax_ms.set_xlabel(f"PyTorch's {TRAINING} pass: not measured yet (no {TRAINING}-kind "
                         "record in pytorch.jsonl)", fontsize=8, color="#555555")
    phase_legend(ax_ms, rows)

    base = view.base()
    if base is None:
        ax_speed.text(0.5, 0.5, f"no measured {TRAINING} stage 00:\nno speedup to show",
                      ha="center", va="center", transform=ax_speed.transAxes)
        ax_speed.set_axis_off()
        return fig
    refs = reference_lines(view)
    ms = [m.median_ms if m.supported else None for m in view.stages]
    draw_speedup_panel(ax_speed, view, base, refs, ms,
                       f"speedup over {base.impl}\n(total time; higher is better)")
    keep_tick_labels_apart(fig, [ax_ms, ax_speed])
    keep_labels_off_lines(fig, [ax_speed])
    return fig


def figure_training_sweeps(results):
    """training_sweeps.png: the training pass's time per step against the batch size (the batch
    sweep, a panel per hidden size, sharing their y axis) and per step and layer against the
    hidden size (the hidden sweep), log-log: a line per training stage, cuDNN training algorithm
    and PyTorch's training pass (where measured)."""
    results = training_view(results)
    if results.bench_path is None:
        raise MissingData(f"no bench.json in {display_path(results.folder)} (the sweep entries "
                          "come from it)")
    panels, missing = [], []
    for name in ("batch_sweep", "hidden_sweep"):
        try:
            panels.append((results.configs.group(name), measured_sweep(results, name, TRAINING)))
        except MissingData as why:
            missing.append(str(why))
    if not panels:
        raise MissingData("; ".join(missing))
    layout = []  # (group, series, hidden size of a batch-sweep panel, or None)
    for group, series in panels:
        if group.name == "batch_sweep":
            hiddens = sorted({m.config.hidden for ms in series.values() for m in ms})
            layout += [(group, series, h) for h in hiddens]
        else:
            layout.append((group, series, None))
    everything = [m for _, series in panels for ms in series.values() for m in ms]
    fig = new_figure(results, (4.3 * len(layout) + 3.2, 5.6),
                     f"LSTM {TRAINING} pass (forward with stash and backward), "
                     f"{precisions_text(everything)}: time per step, median")
    axes = list(fig.subplots(1, len(layout), squeeze=False)[0])
    colors = stage_colors(results.stages())
    batch_axes = [ax for ax, (group, _, _) in zip(axes, layout) if group.name == "batch_sweep"]
    for ax in batch_axes[1:]:
        ax.sharey(batch_axes[0])
    rows_of = {}
    for ax, (group, series, hidden) in zip(axes, layout):
        if hidden is None:
            x_of, keep = (lambda m: m.config.hidden), (lambda m: True)
            ax.set_title(f"hidden sweep\n({group.fixed_label()})", fontsize=10)
            ax.set_xlabel("hidden size H")
        else:
            x_of, keep = (lambda m: m.config.batch), (lambda m, h=hidden: m.config.hidden == h)
            ax.set_title(f"batch sweep, H = {hidden}\n({group.fixed_label()})", fontsize=10)
            ax.set_xlabel("batch size B")
        xs, rows = plot_series(ax, series, x_of, colors, keep=keep)
        mark_unsupported(ax, rows, xs)
        log_axes(ax, xs)
        rows_of[ax] = len(rows)
        if ax is batch_axes[0] or ax not in batch_axes:
            ax.set_ylabel(f"{step_unit(group)} (lower is better)")
        else:
            ax.tick_params(labelleft=False)
    if batch_axes:  # they share their y axis
        reserve_unsupported_band(batch_axes, max(rows_of[ax] for ax in batch_axes))
    for ax in axes:
        if ax not in batch_axes:
            reserve_unsupported_band([ax], rows_of[ax])
    legend_outside(fig, axes)
    return fig


FIGURES = {
    "canonical.png": figure_canonical,
    "batch_sweep.png": figure_batch_sweep,
    "persistent.png": figure_persistent,
    "persistent_steps.png": figure_persistent_steps,
    "hidden_sweep.png": figure_hidden_sweep,
    "fp32_fraction.png": figure_fp32_fraction,
    "training_canonical.png": figure_training_canonical,
    "training_sweeps.png": figure_training_sweeps,
    "training_persistent.png": figure_training_persistent,
}


def save(fig, path):
    """Writes a figure as PNG with a fixed dpi and no Software tag (reproducible bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})


# ---------------------------------------------------------------------------------------------
# Tables and paragraphs (README.md, stages/*/*/README.md, the notebook)
# ---------------------------------------------------------------------------------------------


def ratio(a, b):
    """a / b formatted as '1.23×', or '–' when either is missing."""
    return f"{a / b:.2f}×" if a and b else "–"


def mixed_precisions(view):
    """Whether the rows of a view are in more than one precision."""
    return len({m.precision for m in view.rows()}) > 1


def footer(results, view):
    """The line under a results table: sources, GPU, date, commit, kind and precision."""
    env = results.env()
    files = [display_path(p) for p in (view.stage_source,
                                       results.pytorch_path if view.pytorch else None,
                                       results.bench_path if view.cudnn else None) if p]
    files = list(dict.fromkeys(files))
    text = (f"Generated by `plots/make_plots.py` from {' and '.join(f'`{f}`' for f in files)} "
            f"({env.get('gpu', '?')}, {str(env.get('date_utc', '?'))[:10]}, "
            f"commit {env.get('git_commit', '?')}")
    if view.pytorch and results.pytorch_env.get("torch"):
        text += f"; PyTorch {results.pytorch_env['torch']}"
    precision = ("in the precision of each row" if mixed_precisions(view)
                 else precisions_text(view.rows()))
    text += (f"). Canonical config {view.config.label()}, {view.kind} pass, {precision}; "
             "speedups and ratios are of median times.")
    if view.kind == TRAINING:
        text += (" The forward with stash and the backward are each timed on their own: their "
                 "medians need not add up to the total's. TFLOP/s count a training pass as 3× "
                 "the forward's FLOPs.")
        if not view.pytorch:
            text += (" No PyTorch training measurement yet (it comes from pytorch.jsonl, kind "
                     "training).")
    if not view.cudnn:
        text += " No cuDNN measurement yet (it comes from bench.json)."
    skipped = [m for m in view.stages + view.cudnn if not m.supported]
    for m in skipped:
        text += f" `{m.impl}` {m.not_measured_phrase} here: {m.unsupported}."
    text += same_shape_notes(results, view.stages + view.cudnn)
    return text


# Two entries of one implementation at one shape in one run that differ by more than this
# fraction are named under the table: the ratios use the canonical entry, and a reader should
# know when the other entry would tell a different story.
SAME_SHAPE_SPREAD = 0.10


def same_shape_notes(results, measurements):
    """Sentences naming each measured row whose implementation has another entry at the same
    shape (config, kind, precision) in another group of the same run (e.g. the hidden sweep's
    point at the canonical shape) that differs by more than SAME_SHAPE_SPREAD."""
    text = ""
    for m in measurements:
        if not m.supported:
            continue
        for other in results.bench:
            if (other.impl, other.config, other.kind, other.precision) != (
                    m.impl, m.config, m.kind, m.precision) or other.group == m.group:
                continue
            if not other.supported or abs(other.median_ms / m.median_ms - 1) <= SAME_SHAPE_SPREAD:
                continue
            text += (f" `{m.impl}` took {other.median_ms:.2f} ms at this same shape as a point of "
                     f"the {other.group.replace('_', ' ')} in the same run, against "
                     f"{m.median_ms:.2f} ms here: its time moves between entries (the ratios "
                     "use the canonical entry).")
    return text


def results_table(results):
    """Markdown table of the canonical config (forward kind): one row per stage (and
    precision), per cuDNN algorithm (the fastest marked) and PyTorch, and the footer line. A
    'precision' column appears where the rows are in more than one precision; otherwise the
    footer names the one precision."""
    view = canonical_view(results)
    if not (view.stages or view.cudnn or view.pytorch):
        raise MissingData(f"{display_path(results.folder)}: nothing measured at the canonical "
                          "config")
    base, best = view.base(), view.fastest_cudnn()
    base_ms, best_ms = (base.median_ms if base else None), (best.median_ms if best else None)
    mixed = mixed_precisions(view)
    lines = ["| stage |" + (" precision |" if mixed else "") +
             " ms (median) | TFLOP/s | speedup over 00 | speedup over previous stage "
             "| time ÷ cuDNN's fastest |",
             "|---|" + ("---|" if mixed else "") + "--:|--:|--:|--:|--:|"]

    def row(name, m, previous="–"):
        name += f" | {precision_label(m.precision)}" if mixed else ""
        if not m.supported:
            return f"| {name} | {m.not_measured_label} | – | – | – | – |"
        return (f"| {name} | {m.median_ms:.3f} | {m.tflops:.2f} | {ratio(base_ms, m.median_ms)} "
                f"| {previous} | {ratio(m.median_ms, best_ms)} |")

    lines += table_rows(view, best, row)
    return "\n".join(lines) + "\n\n" + footer(results, view)


def table_rows(view, best, row):
    """The rows of a results table, in its order: the stages (each with its speedup over the
    previous stage), the cuDNN algorithms (`best` marked fastest), then PyTorch; `row(name, m,
    previous="–")` formats one."""
    rows = []
    for m in view.stages:
        before = view.previous(m.impl, m.precision)
        rows.append(row(m.impl, m, ratio(before.median_ms, m.median_ms) if before else "–"))
    for m in view.cudnn:
        mark = " **(fastest cuDNN)**" if m is best else ""
        rows.append(row(f"{display_name(m.impl)}{mark}", m))
    if view.pytorch:
        failed = " (check FAILED)" if view.pytorch.check == "FAILED" else ""
        rows.append(row(f"{display_name(PYTORCH)}{failed}", view.pytorch))
    return rows


def format_phase(m, phase):
    """A training measurement's phase median in ms for a table, or '–' where it has none."""
    value = m.phase_ms(phase)
    return "–" if value is None else f"{value:.3f}"


def training_table(results):
    """Markdown table of the canonical config, training kind: one row per training stage (and
    precision), per cuDNN training algorithm (the fastest marked) and PyTorch's training pass
    where pytorch.jsonl has one; the total (median), the forward with stash and the backward
    (each timed on its own), TFLOP/s, the speedups over the series' stage 00 and over the
    previous stage, and the ratio to cuDNN's fastest training algorithm; then the footer line."""
    results = training_view(results)
    view = canonical_view(results, TRAINING)
    if not view.rows():
        raise MissingData(f"{display_path(results.folder)}: no {TRAINING}-kind measurement at "
                          "the canonical config")
    base, best = view.base(), view.fastest_cudnn()
    base_ms, best_ms = (base.median_ms if base else None), (best.median_ms if best else None)
    mixed = mixed_precisions(view)
    over = f"`{base.impl}`" if base else "stage 00"
    lines = ["| implementation |" + (" precision |" if mixed else "") +
             " total ms (median) | forward with stash ms | backward ms | TFLOP/s "
             f"| speedup over {over} | speedup over previous stage "
             "| time ÷ cuDNN's fastest |",
             "|---|" + ("---|" if mixed else "") + "--:|--:|--:|--:|--:|--:|--:|"]

    def row(name, m, previous="–"):
        name += f" | {precision_label(m.precision)}" if mixed else ""
        if not m.supported:
            return f"| {name} | {m.not_measured_label} | – | – | – | – | – | – |"
        return (f"| {name} | {m.median_ms:.3f} | {format_phase(m, 'forward')} "
                f"| {format_phase(m, 'backward')} | {m.tflops:.2f} "
                f"| {ratio(base_ms, m.median_ms)} | {previous} | {ratio(m.median_ms, best_ms)} |")

    lines += table_rows(view, best, row)
    return "\n".join(lines) + "\n\n" + footer(results, view)


# The batch-sweep points of the persistent table: (H, B), each a column where the batch sweep
# of the standard configurations holds it.
PERSISTENT_TABLE_POINTS = ((512, 1), (1024, 4))


def persistent_table(results):
    """Markdown table of the persistent run (persistent_view(): bench_persistent.json, else
    bench.json's forward stages from 07 on): one row per persistent stage (and precision) and
    one for cuDNN's fastest algorithm of the same run, with the canonical config's median ms,
    µs per step at the batch-sweep points PERSISTENT_TABLE_POINTS (cuDNN's fastest there named,
    as it can differ from point to point) and the canonical time ÷ cuDNN's fastest; then the
    footer (file, GPU, date, commit)."""
    run = persistent_view(results)
    names = persistent_stage_names(results)
    if not names:
        raise MissingData(no_persistent_stage(results))
    config = results.configs.canonical
    canonical = {(m.impl, m.precision): m for m in run.bench if m.group == "canonical"
                 and m.config == config and m.kind == FORWARD}
    try:
        group = results.configs.group("batch_sweep")
        points = [point for point in PERSISTENT_TABLE_POINTS
                  if any((c.hidden, c.batch) == point for c in group.configs)]
        sweep = sweep_series(run, "batch_sweep")
    except MissingData:
        group, points, sweep = None, [], {}

    def at(measurements, point):
        return next((m for m in measurements if (m.config.hidden, m.config.batch) == point),
                    None)

    keys = sorted({key for key in list(canonical) + list(sweep) if key[0] in names},
                  key=lambda k: (stage_sort_key(k[0]), precision_sort_key(k[1])))
    cudnn_canonical = [m for (impl, _), m in canonical.items() if is_cudnn(impl)]
    cudnn_sweep = [m for (impl, _), ms in sweep.items() if is_cudnn(impl) for m in ms]
    best = fastest(cudnn_canonical)
    mixed = len({precision for _, precision in keys} |
                ({best.precision} if best else set())) > 1

    def cell(m, value):
        if m is None:
            return "–"
        return m.not_measured_label if not m.supported else value(m)

    def ms_cell(m):
        return cell(m, lambda m: f"{m.median_ms:.3f}")

    def us_cell(m):
        return cell(m, lambda m: f"{m.us_per_step_layer:.1f}")

    unit = step_unit(group) if group else ""
    lines = ["| stage |" + (" precision |" if mixed else "") + " canonical ms (median) |"
             + "".join(f" {unit}, H={h} B={b} |" for h, b in points)
             + " canonical time ÷ cuDNN's fastest |",
             "|---|" + ("---|" if mixed else "") + "--:|" + "--:|" * len(points) + "--:|"]
    for impl, precision in keys:
        m = canonical.get((impl, precision))
        ratio_text = (ratio(m.median_ms, best.median_ms) if m is not None and m.supported
                      else "–")
        lines.append(f"| {impl} |" + (f" {precision_label(precision)} |" if mixed else "")
                     + f" {ms_cell(m)} |"
                     + "".join(f" {us_cell(at(sweep.get((impl, precision), ()), p))} |"
                               for p in points)
                     + f" {ratio_text} |")
    row = "| cuDNN's fastest |" + (f" {precision_label(best.precision) if best else '–'} |"
                                   if mixed else "")
    row += f" {ms_cell(best)}" + (f" ({cudnn_algorithm(best.impl)})" if best else "") + " |"
    for point in points:
        here = fastest([m for m in cudnn_sweep if (m.config.hidden, m.config.batch) == point])
        other = (f", {precision_label(here.precision)}" if here and mixed
                 and best and here.precision != best.precision else "")
        row += (f" {us_cell(here)}" + (f" ({cudnn_algorithm(here.impl)}{other})" if here else "")
                + " |")
    lines.append(row + (" 1.00× |" if best else " – |"))

    env = run.env()
    text = (f"Generated by `plots/make_plots.py` from `{display_path(run.bench_path)}` "
            f"({env.get('gpu', '?')}, {str(env.get('date_utc', '?'))[:10]}, "
            f"commit {env.get('git_commit', '?')}): one run, the stages and cuDNN's algorithms "
            f"side by side. Canonical config {config.label()}, {FORWARD} pass, "
            f"{'in the precision of each row' if mixed else join_precisions(p for _, p in keys)}"
            "; medians.")
    if points:
        text += (f" The H, B columns are the batch sweep's ({group.fixed_label()}): "
                 f"{unit}, the median time ÷ T ÷ L.")
    text += (" cuDNN's fastest is the fastest of its algorithms in this run at each config, "
             "named in parentheses.")
    if best is None:
        text += " No cuDNN measurement at the canonical config in this run."
    for m in sorted(canonical.values(), key=row_sort_key):
        if not m.supported and (m.impl in names or is_cudnn(m.impl)):
            text += f" `{m.impl}` {m.not_measured_phrase} here: {m.unsupported}."
    shown = [m for m in sorted(canonical.values(), key=row_sort_key)
             if m.impl in names or m is best]
    text += same_shape_notes(run, shown)
    return "\n".join(lines) + "\n\n" + text


def stage_kind(results, stage):
    """The kind of a stage's measurements: 'training' for a training stage; 'forward' for a
    forward stage and for one with no measurement."""
    kinds = {m.kind for m in results.measurements() if m.impl == stage}
    return FORWARD if FORWARD in kinds or not kinds else sorted(kinds)[0]


def stage_paragraph(results, stage):
    """One paragraph on a stage at the canonical config (one per precision it was measured
    in): its time (median, min, max; for a training stage also its forward and backward),
    TFLOP/s, µs per step-layer, speedups over the first stage and the previous stage of its
    series, ratio to cuDNN's fastest algorithm of the same kind, the check of its checked run,
    and the source, all from the run stage_view() picks for the stage (where that run has no
    stage 00, no speedup over it is claimed). `stage` is '<series>/<NN_slug>' (an old name
    '00_naive' means 'forward/...')."""
    results = stage_view(results, stage)
    stage = stage_name(stage)
    view = canonical_view(results, stage_kind(results, stage))
    rows = view.stage_rows(stage)
    if not rows:
        return (f"Not measured yet: `{display_path(results.folder)}` has no canonical-config "
                f"result of `{stage}`.")
    return "\n\n".join(precision_paragraph(results, view, m) for m in rows)


def precision_paragraph(results, view, m):
    """stage_paragraph() of one row (stage and precision)."""
    env = results.env()
    where = (f"the canonical config ({view.config.label()}, {precision_label(m.precision)}) on "
             f"the {env.get('gpu', '?')}")
    if not m.supported:
        return f"At {where} this stage {m.not_measured_phrase}: {m.unsupported}."
    runs = f" of {m.runs} runs" if m.runs else ""
    what = ", a training pass (forward with stash and backward): " if m.kind == TRAINING else ": "
    text = (f"Measured at {where}{what}**{m.median_ms:.2f} ms** median{runs} (min "
            f"{m.min_ms:.2f}, max {m.max_ms:.2f}), {m.tflops:.2f} TFLOP/s, "
            f"{m.us_per_step_layer:.1f} µs per step and layer.")
    if m.phase_ms("forward") is not None and m.phase_ms("backward") is not None:
        text += (f" Its forward with stash takes {m.phase_ms('forward'):.2f} ms and its backward "
                 f"{m.phase_ms('backward'):.2f} ms (medians, each timed on its own).")
    base, before, best = view.base(), view.previous(m.impl, m.precision), view.fastest_cudnn()
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
    if base is None and view.stage_source and not stage_slug(m.impl).startswith("00_"):
        text += (f" `{view.stage_source.name}` has no measured stage 00 of the "
                 f"{stage_series(m.impl)} series: no speedup over it from that run.")
    if best:
        precision = (f"{precision_label(best.precision)}, " if best.precision != m.precision
                     else "")
        algorithm = "training algorithm" if m.kind == TRAINING else "algorithm"
        text += (f" Its time is {ratio(m.median_ms, best.median_ms)} that of cuDNN's fastest "
                 f"{algorithm} (`{best.impl}`, {precision}{best.median_ms:.2f} ms).")
    checked = checked_records(results, m.impl, kind=m.kind, precision=m.precision)
    if checked:
        text += (f" Check against the CPU reference (latest run in "
                 f"`{results.checked_path.name}`): {checked[-1].check}")
        text += (f" on what it covered; {'; '.join(checked[-1].not_checked)}."
                 if checked[-1].not_checked else ".")
    source = view.stage_source
    text += (f" Source: `{display_path(source)}` (commit {env.get('git_commit', '?')}, "
             f"{str(env.get('date_utc', '?'))[:10]}).")
    if source == results.checked_path and len(checked) > 1:
        medians = [r.median_ms for r in checked]
        text += (f" Across the {len(checked)} committed runs of this stage the median ranged "
                 f"from {min(medians):.2f} to {max(medians):.2f} ms.")
    return text


def stage_batch_sweep_table(results, stage):
    """Markdown table: a stage's µs per step at each batch size of the batch sweep, beside
    cuDNN's fastest algorithm at the same point of the same run, stage_view()'s (one table per
    precision of the stage)."""
    results = stage_view(results, stage)
    stage = stage_name(stage)
    try:
        group = results.configs.group("batch_sweep")
    except MissingData as why:
        return f"No batch sweep: {why}."
    series = sweep_series(results, "batch_sweep", stage_kind(results, stage))
    mine = {key: ms for key, ms in series.items() if key[0] == stage}
    if not any(mine.values()):
        return (f"Not measured yet: `{display_path(results.folder)}` has no batch-sweep result "
                f"of `{stage}`.")
    cudnn = [m for (impl, _), ms in series.items() if is_cudnn(impl) for m in ms]
    return "\n\n".join(sweep_table(results, group, stage, precision, ms, cudnn)
                       for (_, precision), ms in mine.items())


def sweep_table(results, group, stage, precision, measurements, cudnn):
    """stage_batch_sweep_table() of one precision."""
    mine = {(m.config.hidden, m.config.batch): m for m in measurements}
    hiddens = sorted({h for h, _ in mine})
    batches = sorted({b for _, b in mine})

    def cell(m):
        return "–" if m is None else (m.not_measured_label if not m.supported
                                      else f"{m.us_per_step_layer:.1f}")

    header = "| B |" + "".join(f" H={h}: {stage} | H={h}: cuDNN fastest |" for h in hiddens)
    lines = [header, "|--:|" + "--:|--:|" * len(hiddens)]
    for b in batches:
        row = f"| {b} |"
        for h in hiddens:
            best = fastest([m for m in cudnn if (m.config.hidden, m.config.batch) == (h, b)])
            note = ""
            if best:
                other = (f", {precision_label(best.precision)}" if best.precision != precision
                         else "")
                note = f" ({cudnn_algorithm(best.impl)}{other})"
            row += f" {cell(mine.get((h, b)))} | {cell(best)}{note} |"
        lines.append(row)
    training = any(m.kind == TRAINING for m in measurements)
    unit = step_unit(group) + (" of the training pass" if training else "")
    return ("\n".join(lines) + f"\n\n{unit} ({group.fixed_label()}, "
            f"{precision_label(precision)}), median; from `{display_path(results.bench_path)}` "
            f"(commit {results.context.get('git_commit', '?')}).")


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
    """Rewrites the results table, the training table and the persistent table of README.md
    (the last two where it has their markers) and the stage sections of
    stages/<series>/<NN_slug>/README.md (the stage '<series>/<NN_slug>'); returns the (path,
    marker) pairs rewritten."""
    readme = Path(readme_root) / "README.md"
    if not readme.is_file():
        raise InputError(f"{readme}: missing")
    try:
        table = results_table(results)
    except MissingData as why:
        raise InputError(f"the README table cannot be made: {why}") from None
    replace_between_markers(readme, "results-table", table, required=True)
    written = [(readme, "results-table")]
    try:
        training = training_table(results)
    except MissingData as why:
        training = f"Not measured yet: {why}."
    if replace_between_markers(readme, "training-table", training):
        written.append((readme, "training-table"))
    try:
        persistent = persistent_table(results)
    except MissingData as why:
        persistent = f"Not measured yet: {why}."
    if replace_between_markers(readme, "persistent-table", persistent):
        written.append((readme, "persistent-table"))
    for stage_readme in sorted((Path(readme_root) / "stages").glob("*/*/README.md")):
        stage = f"{stage_readme.parent.parent.name}/{stage_readme.parent.name}"
        if replace_between_markers(stage_readme, "stage-result", stage_paragraph(results, stage)):
            written.append((stage_readme, "stage-result"))
        if replace_between_markers(stage_readme, "stage-batch-sweep",
                                   stage_batch_sweep_table(results, stage)):
            written.append((stage_readme, "stage-batch-sweep"))
        if replace_between_markers(stage_readme, "grid-barrier", barrier_table(results)):
            written.append((stage_readme, "grid-barrier"))
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


def describe(results):
    """Console lines on what a folder holds, per kind: implementations and precisions; the
    persistent run (bench_persistent.json) and what it feeds; what the figures leave out
    (other kinds, configs off the standard ones, stages not measured in any run)."""
    folder = display_path(results.folder)
    lines = []
    by_kind = {}
    for m in results.measurements():
        by_kind.setdefault(m.kind, []).append(m)
    for kind in sorted(by_kind, key=lambda k: (k != FORWARD, k)):
        measurements = by_kind[kind]
        impls = sorted({m.impl for m in measurements},
                       key=lambda i: (not is_stage(i), i == PYTORCH, stage_sort_key(i)))
        text = (f"plots: {folder}: {kind} kind, {precisions_text(measurements)}: "
                f"{len(measurements)} measurements of {len(impls)} "
                f"implementation{'s' if len(impls) > 1 else ''} ({', '.join(impls)})")
        if kind == TRAINING:
            text += (" -- in the training table and the training figures "
                     f"({', '.join(n for n in FIGURES if n.startswith(TRAINING))})")
        elif kind != FORWARD:
            text += (f" -- read, not drawn (the figures and tables show the {FORWARD} and "
                     f"{TRAINING} kinds)")
        lines.append(text)
    run = results.persistent
    if run is not None:
        impls = sorted({m.impl for m in run.bench}, key=lambda i: (not is_stage(i),
                                                                    stage_sort_key(i)))
        names = persistent_stage_names(results)
        lines.append(f"plots: {folder}: {run_label(run)}: {len(run.bench)} measurements of "
                     f"{', '.join(impls)} -- in persistent_steps.png, the persistent table and "
                     f"the stage sections of {', '.join(names) or 'no stage'}")
    measured = {m.impl for m in results.measurements()}
    for other in (results.training, results.persistent):
        measured |= {m.impl for m in other.measurements()} if other is not None else set()
    not_yet = [name for name in registered_stages() if name not in measured
               and name not in {RENAMED_STAGES.get(m) for m in measured}]
    if not_yet:
        lines.append(f"plots: {folder}: not measured yet, so not in its figures and tables: "
                     + ", ".join(not_yet))
    renamed = sorted(old for old in RENAMED_STAGES if old in measured)
    if renamed:
        lines.append(f"plots: {folder}: measured under an earlier name, shown under that name: "
                     + ", ".join(f"{old} (its code is {RENAMED_STAGES[old]} now)"
                                 for old in renamed))
    off = results.off_standard()
    if off:
        lines.append(f"plots: {folder}: {len(off)} bench entries at configs that "
                     f"{display_path(results.configs.path)} does not list in their group, left "
                     "out: " + ", ".join(sorted({f"{m.group} {m.config.label()}" for m in off})))
    return lines


def progress(line):
    """One console line, out at once (the run takes seconds; a pipe would hold it back)."""
    print(line, flush=True)


def draw_folder(results, out_dir):
    """Draws every figure the folder's data allows; prints a line before each figure and one
    per file written or not."""
    for line in describe(results):
        progress(line)
    for name, function in FIGURES.items():
        path = out_dir / name
        progress(f"plots: drawing {name} ...")
        try:
            fig = function(results)
        except MissingData as why:
            progress(f"plots: {display_path(path)} not drawn: {why}")
            continue
        save(fig, path)
        progress(f"plots: wrote {display_path(path)}")
    if results.ignored:
        progress(f"plots: {display_path(results.bench_path)}: not plotted (not a stage nor "
                 f"cuDNN): {', '.join(results.ignored)}")


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
                        help="where README.md and stages/*/*/README.md are (default: the "
                             "repository; the tests point it at a copy)")
    parser.add_argument("--configs", default=str(STANDARD_CONFIGS),
                        help="the standard configurations (default: "
                             "common/standard_configs.json)")
    return parser.parse_args(argv)


def run(args):
    progress(f"plots: reading {display_path(args.configs)} ...")
    configs = load_standard_configs(args.configs)
    results_dir = Path(args.results)
    if not results_dir.is_dir():
        raise InputError(f"{results_dir}: no such results folder")
    folders = gpu_folders(results_dir)
    if not folders:
        progress(f"plots: no bench.json, pytorch.jsonl or canonical.jsonl in any folder of "
                 f"{display_path(results_dir)}: nothing to draw")
    loaded = {}
    for number, folder in enumerate(folders, 1):
        progress(f"plots: reading {display_path(folder)} ({number} of {len(folders)}) ...")
        loaded[folder] = load_results(folder, configs)
        out_dir = Path(args.out) / folder.name if args.out else folder / "plots"
        draw_folder(loaded[folder], out_dir)
    if not args.no_readmes:
        folder = results_dir / args.readme_gpu
        if folder not in folders:
            raise InputError(f"{folder}: no results there; the README tables are made from it "
                             "(--readme-gpu)")
        progress(f"plots: rewriting the README tables from {display_path(folder)} ...")
        for path, marker in update_readmes(loaded[folder], args.readme_root):
            progress(f"plots: rewrote {display_path(path)} ({marker})")
    progress("plots: done")


def main(argv=None):
    try:
        run(parse_args(argv))
    except InputError as error:
        print(f"make_plots: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
