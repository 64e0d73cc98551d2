#!/usr/bin/env python3
"""Draws the figures and rewrites the generated README sections from results/<gpu>/.

Reads each results/<gpu>/ with a bench.json: it, bench_reduced.json, bench_training.json,
bench_training_reduced.json (Google Benchmark JSON of lstm_bench, scripts/bench.sh's four parts),
pytorch.jsonl, canonical.jsonl (checked runs) and error_vs_seq.jsonl (all optional but
bench.json). A time is the MEDIAN of the repetitions' median_ms; error bars span their min to
max. Writes the FIGURES into <gpu>/plots/ (OUT/<gpu>/ with --out) and, unless --no-readmes, the
sections of readme_sections() from --readme-gpu. Bad input writes nothing and exits 1.
"""
import argparse
import json
import math
import re
import statistics
import sys
import textwrap
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

ROOT = Path(__file__).resolve().parent.parent
CUDNN = ("standard", "persist_static", "persist_dynamic")  # cudnn_<algorithm>[_training]
PYTORCH = "pytorch"
SIZES = ("hidden", "input_size", "batch", "seq_len", "layers")
NAME = re.compile(r"(?P<impl>.+?)/(?P<group>[a-z_]+)/H:(\d+)/I:(\d+)/B:(\d+)/T:(\d+)/L:(\d+)\b")
STAGE = re.compile(r"(?P<series>[a-z0-9_]+)/(?P<number>\d\d)_[a-z0-9_]+")
RANK = {"fp32": 0, "fp16": 1, "bf16": 2}  # the precisions' order in a figure or table
FIRST_PERSISTENT = 7  # the forward stages numbered 07 and up are the persistent ones
SWEEP_LAST = 4  # batch_sweep, hidden_sweep: the last 4 stages of each precision (sweep_stages())
TABLE_POINTS = ((512, 1), (1024, 4))  # (H, B): the persistent table's batch-sweep columns
DPI = 110

class InputError(Exception):
    """Missing or malformed input; the message names the file."""

class MissingData(Exception):
    """What a figure or table needs is not in the folder; the message says what."""

# --- Reading ---------------------------------------------------------------------------------

@dataclass(eq=False)
class Run:
    """One implementation at one shape, kind and precision: counters per repetition."""
    impl: str
    group: str  # 'canonical', 'batch_sweep', 'hidden_sweep'; '' for a PyTorch record
    shape: tuple  # (H, I, B, T, L)
    kind: str  # 'forward' or 'training'
    precision: str  # 'fp32', 'fp16', ...
    source: Path
    reps: list = field(default_factory=list)  # a dict of counters each (one for PyTorch)
    error: str = ""  # why the bench skipped it: 'unsupported: ...' (refused), else a failure

    def med(self, key):
        """The median of a counter over the repetitions (None where absent)."""
        values = [rep[key] for rep in self.reps if key in rep]
        return statistics.median(values) if values else None

    def span(self, key):  # (median, min, max) of a counter over the repetitions; 0s if refused
        values = [rep[key] for rep in self.reps]
        return (0, 0, 0) if self.error else (self.med(key), min(values), max(values))
    # What a skipped run is called: refused by the implementation, or run and failed (its check).
    outcome = property(lambda self: "unsupported" if self.error.startswith("unsupported")
                       else "failed")
    ms = property(lambda self: self.med("median_ms"))
    us = property(lambda self: self.med("us_per_step_layer"))
    H = property(lambda self: self.shape[0])
    B = property(lambda self: self.shape[2])
    T = property(lambda self: self.shape[3])

@dataclass
class Results:  # everything read from one results/<gpu>/ folder
    folder: Path
    runs: list = field(default_factory=list)  # Run per bench entry and PyTorch record
    other: dict = field(default_factory=dict)  # fp32_fma_peak, grid_sync/, exchange_* -> Run
    context: dict = field(default_factory=dict)  # bench file -> its "context"
    checks: dict = field(default_factory=dict)  # (stage, kind, precision, shape) -> [status..]
    errors: list = field(default_factory=list)  # Run per error_vs_seq.jsonl record: y's error
    torch: str = "?"

def rel(path):  # relative to the repository where inside it
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)

def read_json(path, lines=False):
    """The JSON document in `path`; with `lines`, its records as ('path:line', object)."""
    try:
        text = Path(path).read_text()
        found = [(f"{path}:{n}", json.loads(line)) for n, line in enumerate(text.splitlines(), 1)
                 if line.strip()] if lines else json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: not readable as JSON: {error}") from None
    if lines and not all(isinstance(record, dict) for _, record in found):
        raise InputError(f"{path}: a line that is not a JSON object")
    return found

def number(mapping, key, where):
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{where}: '{key}' is missing or not a finite number (got {value!r})")
    return float(value)

def an_object(value, key, where):
    """`value` (a JSON object, or nothing: {}); else InputError naming `key` at `where`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{where}: '{key}' is not a JSON object (got {value!r})")
    return value

def read_bench(path, res):
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise InputError(f"{path}: not Google Benchmark JSON (no 'benchmarks' list)")
    res.context[path], by_run = an_object(doc.get("context"), "context", path), {}
    for entry in doc["benchmarks"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise InputError(f"{path}: a benchmark entry without a name")
        if entry.get("run_type", "iteration") == "iteration":
            by_run.setdefault(entry.get("run_name", entry["name"]), []).append(entry)
    for name, entries in by_run.items():
        where, match = f"{path}: {name}", NAME.match(name)
        if name.startswith(("fp32_fma_peak", "grid_sync/", "exchange_")):  # ceilings and floors
            key = {"f": "tflops", "g": "us_per_barrier", "e": "us_per_step"}[name[0]]
            measured = [e for e in entries if not (e.get("error_occurred") or e.get("skipped"))]
            if measured:  # a floor this GPU refused (too few SMs, no clusters) has no value
                res.other[name.split("/iterations")[0]] = Run(name, "", (), "", "fp32", path, [
                    {key: number(e, key, where)} for e in measured])
            continue
        label = dict(w.split("=", 1) for w in str(entries[0].get("label", "")).split() if "=" in w)
        if not match or not label.get("kind") or not label.get("precision"):
            raise InputError(f"{where}: not named '<impl>/<group>/H:../I:../B:../T:../L:..' or "
                             f"not labelled 'kind=.. precision=..' ({entries[0].get('label')!r})")
        error = next((e.get("error_message") or e.get("skip_message") or "skipped"
                      for e in entries if e.get("error_occurred") or e.get("skipped")), "")
        keys = ["median_ms", "min_ms", "max_ms", "tflops", "us_per_step_layer"]
        keys += [k for k in ("forward_ms", "backward_ms") if k in entries[0]]
        res.runs.append(Run(match["impl"], match["group"], tuple(map(int, match.groups()[2:])),
                            label["kind"], label["precision"], path, [] if error else [
                                {k: number(e, k, where) for k in keys} for e in entries], error))

def read_pytorch(path, res):  # the last record of each shape, kind and precision counts
    runs = {}
    for where, rec in read_json(path, lines=True):
        shape = tuple(int(number(rec, key, where)) for key in SIZES)
        rep = {k: number(rec, k, where) for k in ("tflops", "us_per_step_layer")}
        for s in ("median", "min", "max"):
            rep[f"{s}_ms"] = number(rec.get("ms"), s, f"{where}: ms")
        for phase, times in an_object(rec.get("phases"), "phases", where).items():
            rep[f"{phase}_ms"] = number(times, "median", f"{where}: phases.{phase}")
        kind, precision = rec.get("kind", "forward"), rec.get("precision", rec.get("dtype", "fp32"))
        runs[(shape, kind, precision)] = Run(PYTORCH, "", shape, kind, precision, path, [rep])
        res.torch = an_object(rec.get("env"), "env", where).get("torch", res.torch)
    res.runs += runs.values()

def read_checks(path, res):  # canonical.jsonl: the latest check of each stage at each shape
    for where, rec in read_json(path, lines=True):
        shape = tuple(int(number(rec, key, where)) for key in SIZES)
        check = rec.get("check") if isinstance(rec.get("check"), dict) else {}
        status = ("passed" if check.get("passed") is True else
                  "not performed" if check.get("performed") is not True else "FAILED")
        key = (rec.get("stage"), rec.get("kind", "forward"), rec.get("precision", "fp32"), shape)
        if not isinstance(not_checked := check.get("not_checked") or [], list):
            raise InputError(f"{where}: 'check.not_checked' is not a list (got {not_checked!r})")
        res.checks[key] = [status] + not_checked

def read_errors(path, res):  # error_vs_seq.jsonl: y's error; the last record of each point
    runs = {}
    for where, rec in read_json(path, lines=True):
        check = rec.get("check")
        y = check.get("tensors") if isinstance(check, dict) else None
        y = y.get("y") if isinstance(y, dict) else None
        if not isinstance(rec.get("stage"), str) or rec.get("precision") not in RANK:
            raise InputError(f"{where}: no 'stage', or 'precision' not one of {', '.join(RANK)}")
        key = (rec["stage"], rec["precision"], tuple(int(number(rec, k, where)) for k in SIZES))
        y_where = f"{where}: check.tensors.y"
        runs[key] = Run(key[0], "error_vs_seq", key[2], rec.get("kind", "forward"), key[1], path, [{
            "y": number(y, "relative_norm", y_where), "passed": check.get("passed") is True,
            "bound": number(y.get("bound"), "relative_norm", y_where + ".bound")}])
        res.context[path] = an_object(rec.get("env"), "env", where)
    res.errors += runs.values()

def load(folder):
    """Reads one results/<gpu>/ folder (bench.json required)."""
    res = Results(Path(folder))
    for name, read in (("bench.json", read_bench), ("bench_training.json", read_bench),
                       ("bench_reduced.json", read_bench), ("bench_training_reduced.json",
                                                            read_bench),
                       ("pytorch.jsonl", read_pytorch),
                       ("canonical.jsonl", read_checks), ("error_vs_seq.jsonl", read_errors)):
        if name == "bench.json" or (res.folder / name).is_file():
            read(res.folder / name, res)
    return res

# --- Selecting -------------------------------------------------------------------------------

def is_stage(impl):
    return STAGE.fullmatch(impl) is not None
def series(impl):
    return STAGE.fullmatch(impl)["series"] if is_stage(impl) else ""
def stage_number(impl):
    return int(STAGE.fullmatch(impl)["number"])
def is_cudnn(impl):
    return impl.startswith("cudnn_")
def algorithm(impl):
    """'persist_static' of 'cudnn_persist_static' and of 'cudnn_persist_static_training'."""
    return impl.removeprefix("cudnn_").removesuffix("_training")
def display(impl):
    return ("PyTorch nn.LSTM" if impl == PYTORCH else
            f"cuDNN {algorithm(impl)}" if is_cudnn(impl) else impl)

def order(run):
    """Table order: stages by series and number, cuDNN's algorithms, PyTorch; FP32 first."""
    rank = ((0, run.impl) if is_stage(run.impl) else (2, "") if run.impl == PYTORCH else
            (1, (CUDNN + (algorithm(run.impl),)).index(algorithm(run.impl)), run.impl))
    return rank, run.precision != "fp32", run.precision

def rows(res, kind, group):
    """The bench runs of one kind and group, with PyTorch's records at the group's shapes."""
    bench = [r for r in res.runs if r.kind == kind and r.group == group]
    return sorted(bench + [r for r in res.runs if r.impl == PYTORCH and r.kind == kind
                           and r.shape in {b.shape for b in bench}], key=order)

def measured(runs, missing):
    """`runs`, where a stage among them was measured; else MissingData(`missing`)."""
    if not any(is_stage(r.impl) and not r.error for r in runs):
        raise MissingData(missing)
    return runs

def canonical(res, kind):  # rows() at the canonical config, with a measured stage
    return measured(rows(res, kind, "canonical"),
                    f"no {kind} stage measured at the canonical config")

def stages_of(runs, name, first=0):
    """The stages of the series `name` numbered `first` or up among `runs`, by number."""
    return sorted({r.impl for r in runs if series(r.impl) == name
                   and stage_number(r.impl) >= first}, key=stage_number)

def cudnn_best(runs, like):
    """cuDNN's fastest at `like`'s shape, kind and precision, from `like`'s bench file."""
    found = [r for r in runs if is_cudnn(r.impl) and not r.error
             and (r.shape, r.kind, r.precision) == (like.shape, like.kind, like.precision)
             and (like.impl == PYTORCH or r.source == like.source)]
    return min(found, key=lambda r: r.ms, default=None)

def previous(runs, run):
    """The measured stage before `run` in its series, at its shape and precision."""
    before = [r for r in runs if series(r.impl) == series(run.impl) and not r.error
              and (r.shape, r.precision) == (run.shape, run.precision)
              and stage_number(r.impl) < stage_number(run.impl)]
    return max(before, key=lambda r: stage_number(r.impl), default=None)

def fixed_sizes(runs):
    """The sizes that `runs` hold fixed, e.g. 'T=100, L=1, I=H'."""
    parts = [f"{s}={v.pop()}" for s, v in zip("HIBTL", map(set, zip(*(r.shape for r in runs))))
             if len(v) == 1 and s != "I"]
    return ", ".join(parts + ["I=H"] * all(r.shape[0] == r.shape[1] for r in runs))

def shape_label(run):  # 'H=512 I=512 B=64 T=100 L=4'
    return " ".join(f"{s}={v}" for s, v in zip("HIBTL", run.shape))
def step_unit(runs):
    return "µs per time step" if all(r.shape[4] == 1 for r in runs) else "µs per step and layer"
def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "–"

def origin(res, runs):  # 'From `file` (commit c, date) on the GPU': where `runs` come from
    files = [f"`{rel(source)}` (commit {ctx.get('git_commit', '?')}, "
             f"{str(ctx.get('date_utc', ctx.get('date', '?')))[:10]})" for source, ctx in
             ((s, res.context[s]) for s in sorted({r.source for r in runs}))]
    gpu = next((c["gpu"] for c in res.context.values() if c.get("gpu")), "?")
    return f"From {' and '.join(files)} on the {gpu}"

def provenance(res, runs):
    """The one line under a table or figure: the files, commit, date, GPU, repetitions."""
    bench = [r for r in runs if r.impl != PYTORCH]
    n = sorted({len(r.reps) for r in bench if r.reps}) or [0]
    text = (f"{origin(res, bench)}, median of "
            f"{'–'.join(map(str, sorted({n[0], n[-1]})))} repetition{'s' * (n != [1])}")
    text += "; cuDNN from the same run" if any(is_cudnn(r.impl) for r in bench) else ""
    pytorch = [r.source for r in runs if r.impl == PYTORCH]
    return text + (f"; PyTorch {res.torch} from `{rel(pytorch[0])}`." if pytorch else ".")

# --- Figures: each takes a Results and returns a Figure, or raises MissingData ---------------

BAR, BACKWARD, PYTORCH_COLOR = "#4878a8", "#dd8452", "tab:red"
PALETTE = [c for i, c in enumerate(colormaps["tab10"].colors) if i not in (3, 7)]  # no red, grey
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">", "p")

def style(line, i, precision):  # a panel's i-th line: cuDNN's fastest, PyTorch or a stage
    if line == "cuDNN":
        return dict(color="black", linestyle="--", label=f"cuDNN fastest {precision.upper()}")
    return dict(color=PYTORCH_COLOR, marker="x", linestyle=":", label=display(line)) if (
        line == PYTORCH) else dict(color=PALETTE[i % len(PALETTE)], label=display(line),
                                   marker=MARKERS[i % len(MARKERS)], markersize=5)

def new_figure(res, runs, title, size, note=None, lead=""):  # note, if not provenance; lead
    fig = Figure(figsize=size, dpi=DPI, layout="constrained")
    fig.suptitle(title, fontsize=12)
    fig.supxlabel("\n".join(textwrap.fill(t.replace("`", ""), int(size[0] * 16)) for t in (
        lead, note or provenance(res, runs) + " Error bars, where drawn: their min to max.") if t),
                  fontsize=7.5, color="#555555", x=0.01, ha="left")
    return fig

def errorbar(ax, xs, runs, key, **kw):
    """Points at the repetitions' median of `key`, their bars from its min to its max."""
    ys, low, high = map(list, zip(*(r.span(key) for r in runs)))
    return ax.errorbar(xs, ys, yerr=[[y - v for y, v in zip(ys, low)],
                                     [v - y for y, v in zip(ys, high)]], capsize=2, **kw)

def sweep_stages(runs, last=SWEEP_LAST):
    """{(stage, precision)} that a sweep draws: each precision's `last` stages and its fastest
    earlier one (geometric mean over the points where no earlier one was refused)."""
    shown = set()
    for p in {r.precision for r in runs}:
        mine = [r for r in runs if r.precision == p and is_stage(r.impl)]
        names = sorted({r.impl for r in mine}, key=stage_number)
        shown |= {(n, p) for n in names[-last:]}
        if older := names[:-last]:
            fine = {r.shape for r in mine} - {r.shape for r in mine if r.error and r.impl in older}
            shown.add((min(older, key=lambda n: statistics.geometric_mean(
                [r.us for r in mine if r.impl == n and r.shape in fine] or [math.inf])), p))
    return shown

def refusals(panels):
    """A sentence per place and reason of what the bench refused ('Not supported at H=2048 (why):
    forward 09-16, cuDNN persist_static.', precisions named where not all are) or ran and failed."""
    said, every = {}, {r.precision for p in panels for r in p[1]}
    for name, panel, x, xlabel in panels:
        bad = {}  # an implementation (a stage's FP16 and BF16 twins as one) -> its refused runs
        for r in (r for r in panel if r.error):
            bad.setdefault(display(r.impl).removesuffix("_" + r.precision), []).append(r)
        for impl, runs in bad.items():
            where = f"{xlabel[-1]}={', '.join(f'{v:g}' for v in sorted({x(r) for r in runs}))}"
            why = runs[0].error.removeprefix("unsupported: ").split(": ")[0]
            ps, place = {r.precision for r in runs}, ", ".join(filter(None, (name, where)))
            said.setdefault((runs[0].outcome, place, why), []).append(
                impl if is_stage(impl) or ps == every else
                f"{impl} in {', '.join(p.upper() for p in RANK if p in ps)}")
    verb = {"unsupported": "Not supported", "failed": "Failed"}
    return " ".join(f"{verb[outcome]} at {where} ({why}): {spans(names)}."
                    for (outcome, where, why), names in said.items())

def spans(names):  # [forward/09_a, forward/10_b, forward/11_c, cuDNN x]: 'forward 09-11, cuDNN x'
    n = sorted({stage_number(s) for s in names if is_stage(s)})
    stages = (f"{n[0]:02d}-{n[-1]:02d}" if len(n) > 1 and n[-1] - n[0] == len(n) - 1 else
              ", ".join(f"{v:02d}" for v in n))
    return ", ".join([f"{series(max(names, key=is_stage))} {stages}"] * bool(n)
                     + [s for s in names if not is_stage(s)])

def sweep_figure(res, panels, title, lead=""):
    """µs per step, log-log: a row per precision, a panel per (title, runs, x, x label), a line per
    stage, PyTorch and cuDNN's fastest (algorithm marked); refusals below; same x label, same y."""
    runs = [r for p in panels for r in p[1]]
    precisions = sorted({r.precision for r in runs}, key=RANK.get)
    fig = new_figure(res, runs, title, (5.6 + 4.3 * len(panels), 2 + 3.3 * len(precisions)),
                     lead=" ".join(filter(None, (lead, refusals(panels)))))
    grid, firsts = fig.subplots(len(precisions), len(panels), squeeze=False), {}
    for row, precision in zip(grid, precisions):
        handles = {}
        for ax, (name, panel, x, xlabel) in zip(row, panels):
            if (first := firsts.setdefault(xlabel, ax)) is not ax:
                ax.sharey(first)
            lines = {}  # in rows() order: the stages, cuDNN, PyTorch
            for r in sorted((r for r in panel if r.precision == precision), key=x):
                lines.setdefault("cuDNN" if is_cudnn(r.impl) else r.impl, []).append(r)
            ax.set(title=", ".join(filter(None, (precision.upper(), name))), xscale="log",
                   yscale="log", xlabel=xlabel,
                   ylabel=f"{step_unit(panel)} (lower is better)" if ax is row[0] else "")
            for i, (impl, group) in enumerate(lines.items()):
                ok = [r for r in group if not r.error]
                if impl == "cuDNN":  # the fastest algorithm at each x
                    ok = [min(g, key=lambda r: r.ms) for _, g in groupby(ok, key=x)]
                if ok:
                    errorbar(ax, [x(r) for r in ok], ok, "us_per_step_layer",
                             **style(impl, i, precision))
                for algo, marker in zip(CUDNN, "s^D") if impl == "cuDNN" else ():  # its mark
                    at = [r for r in ok if algorithm(r.impl) in (algo, f"{algo}_{precision}")]
                    ax.errorbar([x(r) for r in at], [r.us for r in at], linestyle="none",
                                marker=marker, markersize=8, color="black",
                                label=f"   fastest there: cuDNN {algo}")
            ax.set_xticks(*zip(*((v, f"{v:g}") for v in sorted({x(r) for r in panel}))))
            ax.minorticks_off()
            ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.grid(alpha=0.3)
            handles |= {k: v for v, k in zip(*ax.get_legend_handles_labels()) if k not in handles}
        row[-1].legend(handles.values(), handles.keys(), loc="center left", fontsize=8,
                       bbox_to_anchor=(1.02, 0.5))
    for ax in grid.flat:  # errorbar()'s data limits are wrong on log axes; its lines' are right
        ax.relim()
        ax.autoscale_view()
    return fig

def by_hidden(runs, what=""):  # batch-sweep panels, one per hidden size
    return [(f"{what}H={h}", [r for r in runs if r.H == h], lambda r: r.B, "batch size B")
            for h in sorted({r.H for r in runs})]

def against_cudnn(res, kind, group, title, pick, lead="", pytorch=False):
    """The stages pick(runs) chooses ({(stage, precision)}) beside cuDNN (and PyTorch)."""
    runs = rows(res, kind, group)
    shown = pick([r for r in runs if is_stage(r.impl)])
    mine = measured([r for r in runs if (r.impl, r.precision) in shown or is_cudnn(r.impl)
                     or pytorch and r.impl == PYTORCH], f"no measured {kind} stage in the {group}")
    return sweep_figure(res, by_hidden(mine) if group == "batch_sweep" else [
        ("", mine, lambda r: r.H, "hidden size H")], f"{title} ({fixed_sizes(mine)})", lead)

SWEEP_RULE = f"Stages: each precision's last {SWEEP_LAST} and its fastest earlier one."
def figure_batch_sweep(res):
    return against_cudnn(res, "forward", "batch_sweep", "LSTM forward: time per step against "
                         "batch size", sweep_stages, SWEEP_RULE, pytorch=True)
def figure_hidden_sweep(res):
    return against_cudnn(res, "forward", "hidden_sweep", "LSTM forward: time per step and layer"
                         " against hidden size", sweep_stages, SWEEP_RULE, pytorch=True)
def figure_training_sweeps(res):
    batch, hidden = (rows(res, "training", group) for group in ("batch_sweep", "hidden_sweep"))
    shown = sweep_stages([r for r in batch + hidden if is_stage(r.impl)])
    batch, hidden = ([r for r in runs if (r.impl, r.precision) in shown or not is_stage(r.impl)]
                     for runs in (batch, hidden))
    panels = by_hidden(measured(batch, "no measured training batch sweep"), "batch sweep, ") + [
        (f"hidden sweep ({fixed_sizes(hidden)})", hidden, lambda r: r.H, "hidden size H")
    ] * bool(hidden)
    return sweep_figure(res, panels, "LSTM training pass (forward with stash and backward): "
                        f"time per step ({fixed_sizes(batch)})", SWEEP_RULE)

def figure_persistent_steps(res):
    return against_cudnn(res, "forward", "batch_sweep", "The persistent forward stages against "
                         "cuDNN", lambda runs: {(r.impl, r.precision) for r in runs
                                                 if stage_number(r.impl) >= FIRST_PERSISTENT})

def bar_panel(ax, runs, values, texts, tops=None, **kw):
    """A bar per run (`values`: (median, min, max)), labelled on a white box above `tops`."""
    spread = [[v[0] - v[1] for v in values], [v[2] - v[0] for v in values]]
    ax.bar(range(len(runs)), [v[0] for v in values], width=0.7, capsize=2, **kw,
           yerr=spread if any(map(any, spread)) else None)  # no bars where nothing spreads
    narrow = ax.figure.get_figwidth() * ax.get_position().width / len(runs) < 0.45  # inches
    for x, (run, top, text) in enumerate(zip(runs, tops or [v[2] for v in values], texts)):
        ax.annotate("not\nsupported" if run.error else text, (x, top), xytext=(0, 3), zorder=5,
                    textcoords="offset points", ha="center", va="bottom", fontsize=8,
                    rotation=90 * narrow, bbox=dict(fc="white", ec="none", pad=0.3))
    labels = [(r.impl.split("/")[-1].replace("_", " ") if is_stage(r.impl) else display(r.impl))
              + f" ({r.precision.upper()})" * (r.precision != "fp32") for r in runs]
    ax.set_xticks(range(len(runs)), labels, ha="center" if narrow else "right", fontsize=8.5,
                  rotation=90 if narrow else 30, rotation_mode="default" if narrow else "anchor")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)

def references(runs, stages):
    """[(label, run, line style)]: cuDNN's fastest and PyTorch at each precision of `stages`."""
    refs = []
    for stage in {s.precision: s for s in reversed(stages) if not s.error}.values():
        tag = f" ({stage.precision.upper()})" * (stage.precision != "fp32")
        if best := cudnn_best(runs, stage):
            refs.append((f"cuDNN's fastest ({algorithm(best.impl)}){tag}", best,
                         dict(color="black", linestyle="--")))
        for pt in [r for r in runs if r.impl == PYTORCH and r.precision == stage.precision]:
            refs.append((f"PyTorch nn.LSTM{tag}", pt, dict(color=PYTORCH_COLOR, linestyle=":")))
    return refs

def canonical_figure(res, kind, title, size, left_out=(), lead=""):
    """Two panels: the first for the caller, then each stage's speedup over the first stage (side
    by side; one above the other for the training pass). Precisions in `left_out` are not drawn."""
    outside = f" outside {', '.join(p.upper() for p in left_out)}" if left_out else ""
    runs = measured([r for r in rows(res, kind, "canonical") if r.precision not in left_out],
                    f"no {kind} stage measured at the canonical config{outside}")
    stages = [r for r in runs if is_stage(r.impl)]
    fig = new_figure(res, runs, f"{title} at the canonical config ({shape_label(stages[0])})", size,
                     lead=lead)
    ax_ms, ax = fig.subplots(2, 1) if kind == "training" else fig.subplots(
        1, 2, width_ratios=(len(stages), len(stages)))
    base = next(s for s in stages if not s.error)
    speedups = [0 if s.error else base.ms / s.ms for s in stages]
    bar_panel(ax, stages, [(v,) * 3 for v in speedups], [f"{v:.2f}×" for v in speedups], color=BAR)
    for label, r, st in references(runs, stages):
        ax.axhline(base.ms / r.ms, label=f"{label}: {base.ms / r.ms:.2f}×", **st)
    ax.set(title=f"speedup over {base.impl} (higher is better)", ylabel="speedup (×)",
           ylim=(0, max(speedups) * 1.25))
    ax.legend(loc="upper left", fontsize=8.5)
    return fig, ax_ms, runs, stages

def figure_canonical(res):
    fig, ax, runs, stages = canonical_figure(res, "forward", "LSTM forward pass", (14, 7))
    values = [s.span("median_ms") for s in stages]
    bar_panel(ax, stages, values, [f"{v[0]:.3g}" for v in values], color=BAR)
    for label, r, st in references(runs, stages):
        ax.axhline(r.ms, label=f"{label}: {r.ms:.2f} ms", **st)
    ax.set(title="time (lower is better)", ylabel="forward pass, median (ms)",
           ylim=(0, max(v[2] for v in values) * 1.12))
    ax.legend(loc="upper right", fontsize=8.5)
    return fig

def figure_training_canonical(res):
    fig, ax, runs, _ = canonical_figure(
        res, "training", "LSTM training pass (forward with stash, then backward)", (18, 13),
        left_out=("bf16",), lead="BF16 (each stage's BF16 twin, cuDNN and PyTorch in BF16): in the "
        "table of README.md, not drawn here.")
    forward, backward = ([r.med(k) or 0 for r in runs] for k in ("forward_ms", "backward_ms"))
    hatch = dict(hatch=["" if is_stage(r.impl) else "///" for r in runs], ec="white", lw=0)
    ax.bar(range(len(runs)), backward, bottom=forward, width=0.7, color=BACKWARD,
           label="backward (median)", **hatch)
    totals = [r.span("median_ms") for r in runs]  # the total, timed on its own
    bar_panel(ax, runs, [(f, f, f) for f in forward], [f"{t[0]:.3g}" for t in totals],
              [max(f + b, t[2]) for f, b, t in zip(forward, backward, totals)], color=BAR,
              label="forward with stash (median)", **hatch)
    ok = [r for r in runs if not r.error]
    errorbar(ax, [runs.index(r) for r in ok], ok, "median_ms", linestyle="none", marker="_",
             markersize=22, markeredgewidth=2.5, color="black", label="total, timed on its own")
    ax.set(title="time per training pass (lower is better); hatched: the baselines",
           ylabel="training pass (ms)")
    ax.legend(loc="upper right", fontsize=8.5)
    return fig

def figure_fp32_fraction(res):
    if (peak := res.other.get("fp32_fma_peak")) is None:
        raise MissingData("bench.json has no fp32_fma_peak entry")
    runs, peak = canonical(res, "forward"), peak.med("tflops")
    fp32 = [r for r in runs if r.precision == "fp32" and is_stage(r.impl) and not r.error]
    shown = fp32 + [r for _, r, _ in references(runs, fp32)]
    fig = new_figure(res, shown, f"Share of the measured FP32 FMA rate ({peak:.1f} TFLOP/s) at the "
                     f"canonical config ({shape_label(runs[0])})", (13, 5.4))
    ax, shares = fig.subplots(), [r.span("tflops") for r in shown]
    bar_panel(ax, shown, [[100 * v / peak for v in s] for s in shares],
              [f"{100 * s[0] / peak:.1f} %\n{s[0]:.1f} TF/s" for s in shares],
              color=[BAR if is_stage(r.impl) else "black" if is_cudnn(r.impl) else PYTORCH_COLOR
                     for r in shown])
    ax.set(ylabel="% of the measured FP32 FMA rate (higher is better)",
           ylim=(0, max(100 * s[2] / peak for s in shares) * 1.2))
    return fig

def error_lines(res):  # {'forward/13_tensor_cores FP16': its runs by T, ...}, all, their note
    if not res.errors:
        raise MissingData(f"no error_vs_seq.jsonl in {rel(res.folder)}")
    lines = {}
    for r in sorted(res.errors, key=lambda r: (RANK[r.precision], is_cudnn(r.impl), r.impl, r.T)):
        name = display(r.impl).removesuffix("_" + r.precision)
        lines.setdefault(f"{name} {r.precision.upper()}", []).append(r)
    runs = sum(lines.values(), [])
    return lines, runs, (f"{origin(res, runs)}: one checked run per point ({fixed_sizes(runs)});"
                         " y's relative-norm error against the FP64 CPU reference on the same "
                         "inputs (in FP16 and BF16 rounded to 16 bits).")

def figure_error_vs_seq(res):
    lines, runs, note = error_lines(res)
    fig = new_figure(res, runs, "Error of y against the FP64 reference versus the sequence length "
                     f"T ({fixed_sizes(runs)})", (10, 5.6), note)
    ax = fig.subplots()
    for label, group in lines.items():  # one colour per precision; cuDNN dashed, hollow squares
        cudnn, color = is_cudnn(group[0].impl), PALETTE[RANK[group[0].precision]]
        ax.plot([r.T for r in group], [r.med("y") for r in group], label=label, color=color,
                linestyle="--" if cudnn else "-", marker="s" if cudnn else "o",
                markersize=8 if cudnn else 6, mfc="white" if cudnn else color)
    for r in {(r.precision, r.med("bound")): r for r in runs}.values():
        ax.axhline(r.med("bound"), color=PALETTE[RANK[r.precision]], linestyle=":", linewidth=1,
                   label=f"the check's bound, {r.precision.upper()}")
    if failed := [r for r in runs if not r.med("passed")]:
        ax.scatter([r.T for r in failed], [r.med("y") for r in failed], s=250, linewidths=2,
                   facecolors="none", edgecolors="red", label="check FAILED", zorder=5)
    ax.set(xscale="log", yscale="log", xlabel="sequence length T",
           ylabel="relative norm of y's error (lower is better)")
    ax.set_xticks(*zip(*((v, f"{v:g}") for v in sorted({r.T for r in runs}))))
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right center", fontsize=8.5)
    return fig

FIGURES = {f"{name}.png": globals()[f"figure_{name}"] for name in (  # name.png: figure_name()
    "canonical", "batch_sweep", "persistent_steps", "hidden_sweep", "fp32_fraction",
    "training_canonical", "training_sweeps", "error_vs_seq")}

def scaling_points(folder):
    """scaling.jsonl's {('strong', global B) or ('weak', B per GPU): {G: median ms}}; last wins."""
    path = Path(folder) / "scaling.jsonl"
    if not path.is_file():
        raise MissingData(f"no scaling.jsonl in {rel(folder)}")
    points = {}
    for where, rec in read_json(path, lines=True):
        if rec.get("scaling") not in ("strong", "weak"):
            continue  # the inner stage alone, for the README's comparison
        gpus, batch = int(number(rec, "gpus", where)), int(number(rec, "batch", where))
        if gpus < 1:
            raise InputError(f"{where}: 'gpus' is {gpus}, not 1 or more")
        key = (rec["scaling"], batch if rec["scaling"] == "strong" else batch // gpus)
        if (ms := number(rec.get("ms"), "median", f"{where}: ms")) <= 0:
            raise InputError(f"{where}: ms: 'median' is {ms:g}, not a positive time")
        points.setdefault(key, {})[gpus] = ms
    return points

def figure_scaling(res, points=None):  # speedup over one GPU against G, beside the ideal line
    points = scaling_points(res.folder) if points is None else points  # main() read them
    fig = Figure(figsize=(11, 4.8), layout="constrained")
    for ax, kind in zip(fig.subplots(1, 2), ("strong", "weak")):
        curves = [(batch, by) for (what, batch), by in sorted(points.items())
                  if what == kind and 1 in by]  # those with a one-GPU time to compare with
        for batch, by_gpus in curves:
            gpus = sorted(by_gpus)  # weak: G times the work, so the speedup is G·t(1)/t(G)
            ax.plot(gpus, [by_gpus[1] / by_gpus[g] * (g if kind == "weak" else 1) for g in gpus],
                    marker="o", label=f"{'global' if kind == 'strong' else 'per GPU'} B = {batch}")
        top = max((max(by) for _, by in curves), default=1)
        ax.plot([1, top], [1, top], "k--", linewidth=1, label="ideal")
        ax.set_xticks(sorted({g for (what, _), by in points.items() if what == kind for g in by}))
        ax.set(xlabel="GPUs G", title=f"{kind} scaling", ylabel="speedup over one GPU" + (
            " (throughput)" if kind == "weak" else ""))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8.5)
    fig.suptitle("Data-parallel LSTM training (multigpu/00_data_parallel), H = 1024, L = 4, "
                 f"T = 100, from {rel(res.folder / 'scaling.jsonl')}")
    return fig

# --- Each stage against cuDNN in the latest file that times it (every bench*.json of a folder) ---

LATEST_POINTS = ((512, 1), (1024, 4), (1024, 32))  # (H, B): the batch-sweep columns and lines

def load_every_bench(folder):
    """Every bench*.json of a folder, each file its own run (cudnn_best() keeps to the file)."""
    res = Results(Path(folder))
    for path in sorted(res.folder.glob("bench*.json")):
        read_bench(path, res)
    return res

def on_main(impl, root):  # a stage whose folder is in `root`'s tree (not an experiment's name)
    return any((Path(root) / "stages" / f"{name}").is_dir()
               for name in (impl, re.sub(r"_(bf16|fp16)$", "", impl)))

def latest_stages(res, root):
    """{(stage, precision): its runs from the latest file (by the file's date) that times it at
    the canonical config}, stages in series and number order; only stages in `root`'s tree."""
    date = {path: str(ctx.get("date_utc", ctx.get("date", ""))) for path, ctx in
            res.context.items()}
    source = {}
    for r in res.runs:
        if is_stage(r.impl) and r.group == "canonical" and not r.error and on_main(r.impl, root):
            key = (r.impl, r.precision)
            source[key] = max(source.get(key, r.source), r.source, key=lambda p: (date[p], p))
    return {key: [r for r in res.runs if (r.impl, r.precision) == key and r.source == path]
            for key, path in sorted(source.items(), key=lambda kv: (
                series(kv[0][0]), stage_number(kv[0][0]), RANK[kv[0][1]]))}

def against_best(runs, everything):
    """[(run, its time ÷ cuDNN's fastest in the same file and group)], a shape once: the hidden
    sweep's point of the canonical shape is left to the canonical group."""
    canonical_shapes = {r.shape for r in runs if r.group == "canonical"}
    return [(r, r.ms / best.ms) for r in runs if not r.error
            and (r.group == "canonical" or r.shape not in canonical_shapes)
            and (best := cudnn_best([e for e in everything if e.group == r.group], r)) is not None]

def latest_points(runs, everything):  # {'canonical' or (H, B): ratio}, and the worst point
    ratios = against_best(runs, everything)
    at = {("canonical" if r.group == "canonical" else (r.H, r.B)): x for r, x in ratios
          if r.group == "canonical" or (r.group == "batch_sweep" and (r.H, r.B) in LATEST_POINTS)}
    return at, max(ratios, key=lambda rx: rx[1], default=None), len(ratios)

def short_label(run):  # shape_label() without I where I = H: 'H=512 B=1 T=100 L=1'
    return " ".join(f"{s}={v}" for s, v in zip("HIBTL", run.shape) if s != "I" or v != run.H)

def against_cudnn_table(res, root):
    """A row per stage (and precision) of the folder: its canonical time, its ratios to cuDNN's
    fastest at the canonical config and LATEST_POINTS, its worst ratio, and its file."""
    chosen = latest_stages(res, root)
    if not chosen:
        raise MissingData(f"no stage of this tree timed at the canonical config in "
                          f"{rel(res.folder)}/bench*.json")
    body = []
    for (impl, precision), runs in chosen.items():
        at, worst, n = latest_points(runs, res.runs)
        canonical_run = next(r for r in runs if r.group == "canonical")
        ctx = res.context[canonical_run.source]
        body.append([impl, precision.upper(), f"{canonical_run.ms:.3f}"] + [
            f"{at[p]:.2f}×" if p in at else "–" for p in ("canonical", *LATEST_POINTS)] + [
            f"{worst[1]:.2f}× at {short_label(worst[0])}, of {n}" if worst else "–",
            f"`{canonical_run.source.name}` ({ctx.get('git_commit', '?')[:7]})"])
    header = ["implementation", "precision", "canonical ms (median)",
              "÷ cuDNN's fastest, canonical", *(f"÷, H={h} B={b}" for h, b in LATEST_POINTS),
              "worst ÷, of the file's configurations", "file (commit)"]
    gpu = next((c["gpu"] for c in res.context.values() if c.get("gpu")), "?")
    return markdown(header, body, (
        f"On the {gpu}. Each stage from the latest file of `{rel(res.folder)}` that times it at "
        "the canonical config; each ratio is its time over the fastest cuDNN algorithm in the "
        "same precision, from the same file (one run); \"–\": that file has no such point."))

def against_cudnn_sections(every, root):
    """{(README.md, 'against-cudnn-<folder>'): its table} for each {folder: load_every_bench()}."""
    sections = {}
    for folder, res in every.items():
        try:
            text = against_cudnn_table(res, root)
        except MissingData as why:
            text = f"Not measured yet: {why}."
        sections[(Path(root) / "README.md", f"against-cudnn-{Path(folder).name}")] = text
    return sections

def figure_against_cudnn(res, root=ROOT):
    """A panel per kind and precision: each stage's ratios to cuDNN's fastest, in stage order."""
    panels = {}
    for (impl, precision), runs in latest_stages(res, root).items():
        panels.setdefault((runs[0].kind, precision), []).append((impl, runs))
    if not panels:
        raise MissingData("no stage of this tree timed at the canonical config")
    runs = [r for stages in panels.values() for _, group in stages for r in group]
    sweep = [r for r in runs if r.group == "batch_sweep"] or runs
    fig = new_figure(res, runs, "Each stage's time ÷ cuDNN's fastest in the same run (lower is "
                     "better)", (15, 3.6 * math.ceil(len(panels) / 3) + 1), note=(
                         f"Each stage from the latest file of {rel(res.folder)} that times it at "
                         "the canonical config, against cuDNN's fastest of that precision in the "
                         f"same file; the batch-sweep points at {fixed_sizes(sweep)}; 'worst': the "
                         "largest ratio over every configuration of that file."))
    axes = fig.subplots(math.ceil(len(panels) / 3), 3, sharey=True, squeeze=False).flat
    lines = [("canonical", "canonical config")] + [(p, f"H={p[0]} B={p[1]}") for p in LATEST_POINTS]
    for (kind, precision), ax in zip(sorted(panels, key=lambda k: (k[0], RANK[k[1]])), axes):
        stages = panels[(kind, precision)]
        points = [latest_points(group, res.runs) for _, group in stages]
        for i, (key, label) in enumerate(lines):
            xs = [x for x, (at, _, _) in enumerate(points) if key in at]
            ax.plot(xs, [points[x][0][key] for x in xs], marker=MARKERS[i], color=PALETTE[i],
                    label=label)
        xs = [x for x, (_, worst, _) in enumerate(points) if worst]
        ax.plot(xs, [points[x][1][1] for x in xs], "k_", markersize=14, markeredgewidth=2,
                label="worst configuration of the file")
        ax.axhline(1, color="black", linestyle="--", linewidth=1, label="cuDNN's fastest")
        ax.set_xticks(range(len(stages)), [f"{stage_number(i):02d}" for i, _ in stages],
                      fontsize=7 if len(stages) > 12 else 9)
        ax.set(title=f"{kind}, {precision.upper()}", xlabel="stage", yscale="log",
               ylabel="time ÷ cuDNN's fastest")
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.grid(alpha=0.3)
    for ax in axes:  # the panels left over
        ax.set_axis_off()
    fig.legend(*fig.axes[0].get_legend_handles_labels(), loc="outside right center", fontsize=8.5)
    return fig

# --- Tables and paragraphs (README.md, stages/*/*/README.md, the notebook) -------------------

def markdown(header, body, footer):
    align = ["---" if h in ("implementation", "precision") else "--:" for h in header]
    return "\n".join([f"| {' | '.join(header)} |", f"|{'|'.join(align)}|"]
                     + [f"| {' | '.join(row)} |" for row in body] + ["", footer])

def cell(run, value, name_algorithm=False):
    text = "–" if run is None else run.outcome if run.error else value(run)
    return text + (f" ({algorithm(run.impl)})" if name_algorithm and run else "")

def canonical_table(res, kind):
    """Every stage, cuDNN algorithm and PyTorch of one kind at the canonical config."""
    runs = canonical(res, kind)
    base = next(r for r in runs if is_stage(r.impl) and not r.error)
    phases = ("forward_ms", "backward_ms") if kind == "training" else ()
    header = ["implementation", "precision", "ms (median)", *["forward with stash ms",
              "backward ms"][:len(phases)], "TFLOP/s", f"speedup over `{base.impl}`",
              "speedup over previous stage", "time ÷ cuDNN's fastest"]
    body = []
    for r in runs:
        best, before = cudnn_best(runs, r), previous(runs, r) if is_stage(r.impl) else None
        name = display(r.impl) + " **(fastest cuDNN)**" * (best is r)
        body.append([name, r.precision.upper(), r.outcome] + ["–"] * (len(header) - 3)
                    if r.error else [name, r.precision.upper(), f"{r.ms:.3f}"]
                    + [f"{r.med(k):.3f}" if r.med(k) is not None else "–" for k in phases]
                    + [f"{r.med('tflops'):.2f}", ratio(base.ms, r.ms),
                       ratio(before and before.ms, r.ms), ratio(r.ms, best and best.ms)])
    return markdown(header, body, provenance(res, runs))

def persistent_table(res):
    """The persistent stages at the canonical config and TABLE_POINTS, and cuDNN's fastest."""
    runs, sweep = canonical(res, "forward"), rows(res, "forward", "batch_sweep")
    if not (stages := stages_of(runs + sweep, "forward", FIRST_PERSISTENT)):
        raise MissingData(f"no forward stage numbered {FIRST_PERSISTENT:02d} or up")
    points = [p for p in TABLE_POINTS if any((r.H, r.B) == p for r in sweep)]
    columns = [runs] + [[r for r in sweep if (r.H, r.B) == p] for p in points]
    values = [lambda r: f"{r.ms:.3f}"] + [lambda r: f"{r.us:.1f}"] * len(points)  # per column
    body = []
    for precision in sorted({r.precision for r in runs + sweep if r.impl in stages},
                            key=lambda p: (p != "fp32", p)):
        fastest = [None] * len(columns)  # cuDNN's, beside the first stage measured there
        for impl in stages:
            if any(here := [next((r for r in column if (r.impl, r.precision) == (impl, precision)),
                                 None) for column in columns]):
                fastest = [f or (r and cudnn_best(c, r)) for f, c, r in zip(fastest, columns, here)]
                best = cudnn_best(runs, here[0]) if here[0] else None
                body.append([impl, precision.upper(), *map(cell, here, values),
                             ratio(here[0].ms, best.ms) if best else "–"])
        body.append(["cuDNN's fastest", precision.upper(),
                     *(cell(f, value, True) for f, value in zip(fastest, values)),
                     "1.00×" if fastest[0] else "–"])
    header = ["implementation", "precision", "canonical ms (median)", *(
        f"{step_unit(sweep)}, H={h} B={b}" for h, b in points), "canonical time ÷ cuDNN's fastest"]
    return markdown(header, body, provenance(res, [r for r in runs + sweep if r.impl in stages
                                                   or is_cudnn(r.impl)]))

def stage_rows(res, stage, group):  # the runs of the stage's kind in `group`, and its own
    runs = rows(res, next((r.kind for r in res.runs if r.impl == stage), "forward"), group)
    return runs, [r for r in runs if r.impl == stage]

def stage_paragraph(res, stage):
    """A paragraph per precision of a stage at the canonical config: time, ratios, check."""
    runs, mine = stage_rows(res, stage, "canonical")
    if not mine:
        return f"Not measured yet: `{rel(res.folder)}` has no canonical-config result of `{stage}`."
    texts = []
    for r in mine:
        text, best = f"At the canonical config ({shape_label(r)}, {r.precision.upper()})", None
        if r.error:
            text += f" this stage is not supported: {r.error}."
        else:
            phases = (f"; its forward with stash {r.med('forward_ms'):.2f} ms and its backward "
                      f"{r.med('backward_ms'):.2f} ms, each timed on its own"
                      if r.med("backward_ms") is not None else "")
            text += (f"{', a training pass' * (r.kind == 'training')}: **{r.ms:.2f} ms** "
                     f"(fastest run {r.span('min_ms')[1]:.2f}, slowest "
                     f"{r.span('max_ms')[2]:.2f}), {r.med('tflops'):.2f} TFLOP/s, "
                     f"{r.us:.1f} µs per step and layer{phases}.")
            first = next(s for s in runs if series(s.impl) == series(r.impl) and not s.error)
            said = [f"{ratio(s.ms, r.ms)} over `{s.impl}`" for s in
                    dict.fromkeys((first, previous(runs, r))) if s is not None and s is not r]
            text += f" Speedup {', '.join(said)} (below 1× is a slowdown)." if said else ""
            if best := cudnn_best(runs, r):
                text += (f" Its time is {ratio(r.ms, best.ms)} that of cuDNN's fastest "
                         f"(`{best.impl}`, {best.ms:.2f} ms).")
        if check := res.checks.get((r.impl, r.kind, r.precision, r.shape)):
            text += (" Check against the CPU reference (latest run in `canonical.jsonl`): "
                     f"{'; '.join(check)}.")
        texts.append(f"{text} {provenance(res, [r] + [best] * bool(best))}")
    return "\n\n".join(texts)

def stage_batch_sweep(res, stage):
    """The stage's µs per step over the batch sweep beside cuDNN's fastest at each point."""
    runs, mine = stage_rows(res, stage, "batch_sweep")
    if not mine:
        return f"Not measured yet: `{rel(res.folder)}` has no batch-sweep result of `{stage}`."
    at, hiddens = {(r.H, r.B, r.precision): r for r in mine}, sorted({r.H for r in mine})
    body = [[str(b), p.upper()] + [c for run in (at.get((h, b, p)) for h in hiddens) for c in (
        cell(run, lambda r: f"{r.us:.1f}"),
        cell(run and cudnn_best(runs, run), lambda r: f"{r.us:.1f}", True))]
        for p, b in sorted({(r.precision, r.B) for r in mine}, key=lambda k: (k[0] != "fp32", k))]
    header = ["B", "precision"] + [f"H={h}: {n}" for h in hiddens for n in (stage, "cuDNN fastest")]
    return markdown(header, body, f"{step_unit(mine)} ({fixed_sizes(mine)}). " + provenance(
        res, [r for r in runs if r.impl == stage or is_cudnn(r.impl)]))

def barrier_table(res):  # the grid-wide barrier's cost per block count (grid_sync/blocks:N)
    barriers = {int(k.split(":")[1]): run for k, run in res.other.items()
                if k.startswith("grid_sync/")}  # not the exchange_*/blocks:N floors
    if not barriers:
        return "Not measured yet: no grid_sync entries in bench.json."
    return markdown(["blocks", "µs per barrier"], [
        [str(b), f"{barriers[b].med('us_per_barrier'):.2f}"] for b in sorted(barriers)[::-1]],
        provenance(res, barriers.values())[:-1] + "; each repetition 10,000 barriers of "
        "`cooperative_groups::this_grid().sync()`, 128 threads a block.")

def error_table(res):  # y's error per T (rows) and implementation and precision (columns)
    if not res.errors:
        return f"Not measured yet: no error_vs_seq.jsonl in {rel(res.folder)}."
    (lines, runs, note), value = error_lines(res), lambda r: f"{r.med('y'):.1e}" + (
        " (check FAILED)" * (not r.med("passed")))  # 2 significant digits
    at = {(label, r.T): r for label, group in lines.items() for r in group}
    return markdown(["T", *lines], [[str(t)] + [cell(at.get((label, t)), value) for label in lines]
                                    for t in sorted({r.T for r in runs})], note)

# --- README sections and the command line ----------------------------------------------------

def readme_sections(res, root):
    """{(path, marker): text} of every generated section under `root`; writes nothing."""
    readme = Path(root) / "README.md"
    if "<!-- results-table:begin -->" not in (readme.read_text() if readme.is_file() else ""):
        raise InputError(f"{readme}: missing, or without the results-table markers")
    sections = {}
    for marker, table in (("results-table", lambda res: canonical_table(res, "forward")),
                          ("persistent-table", persistent_table),
                          ("training-table", lambda res: canonical_table(res, "training"))):
        try:
            sections[(readme, marker)] = table(res)
        except MissingData as why:
            sections[(readme, marker)] = f"Not measured yet: {why}."
    barriers, errors = barrier_table(res), error_table(res)  # where a stage's README has them
    for path in sorted(Path(root).glob("stages/*/*/README.md")):
        stage = f"{path.parent.parent.name}/{path.parent.name}"
        sections[(path, "stage-result")] = stage_paragraph(res, stage)
        sections[(path, "stage-batch-sweep")] = stage_batch_sweep(res, stage)
        sections[(path, "grid-barrier")], sections[(path, "error-vs-seq")] = barriers, errors
    return sections

def replace_sections(sections):
    """Writes each section between its markers where its file has them, and says so."""
    texts = {}
    for (path, marker), text in sections.items():
        source = texts.setdefault(path, path.read_text())
        pattern = re.compile(rf"(<!-- {marker}:begin -->\n).*?(<!-- {marker}:end -->)", re.S)
        if pattern.search(source):
            texts[path] = pattern.sub(lambda m: m[1] + text + "\n" + m[2], source)
            print(f"plots: rewrote {rel(path)} ({marker})")
    for path, text in texts.items():
        path.write_text(text)

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", default=str(ROOT / "results"), help="default: results/")
    parser.add_argument("--out", help="PNGs into OUT/<gpu>/ (default: <results>/<gpu>/plots/)")
    parser.add_argument("--no-readmes", action="store_true", help="only draw the figures")
    parser.add_argument("--readme-gpu", default="h100-sxm", help="the folder the READMEs show")
    parser.add_argument("--readme-root", default=str(ROOT), help="where README.md, stages/ are")
    args = parser.parse_args(argv)
    results = Path(args.results)
    try:
        if not results.is_dir():
            raise InputError(f"{results}: no such results folder")
        loaded = {f: load(f) for f in sorted(results.iterdir()) if (f / "bench.json").is_file()}
        every = {f: load_every_bench(f) for f in sorted(results.iterdir())
                 if any(f.glob("bench*.json"))}
        sections = {} if args.no_readmes else readme_sections(
            loaded.get(results / args.readme_gpu) or load(results / args.readme_gpu),
            args.readme_root)
        sections |= {} if args.no_readmes else against_cudnn_sections(every, args.readme_root)
        # Every figure where bench.json is; against_cudnn.png where any bench*.json is;
        # scaling.png where scaling.jsonl is (read here, so that bad input draws nothing).
        folders = sorted(f for f in results.iterdir()
                         if f in every or (f / "scaling.jsonl").is_file())
        if not folders:
            raise InputError(f"{results}: no folder with a bench*.json or scaling.jsonl")
        outs = {f: Path(args.out) / f.name if args.out else f / "plots" for f in folders}
        scaling = {f: scaling_points(f) for f in folders if (f / "scaling.jsonl").is_file()}
        for out in outs.values():
            try:
                out.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise InputError(f"{out}: cannot create this output folder: "
                                 f"{error.strerror}") from None
    except InputError as error:
        print(f"make_plots: error: {error}", file=sys.stderr)
        return 1
    for folder, out in outs.items():
        res = loaded.get(folder) or Results(folder)
        figures = (FIGURES if folder in loaded else {}) | {
            "scaling.png": lambda r, f=folder: figure_scaling(r, scaling.get(f))}
        figures |= {"against_cudnn.png": lambda _: figure_against_cudnn(
            every[folder], args.readme_root)} if folder in every else {}
        for name, figure in figures.items():
            try:
                figure(res).savefig(out / name, dpi=DPI, metadata={"Software": None})
                print(f"plots: wrote {rel(out / name)}")
            except MissingData as why:
                print(f"plots: {rel(out / name)} not drawn: {why}")
    replace_sections(sections)
    return 0

if __name__ == "__main__":
    sys.exit(main())
