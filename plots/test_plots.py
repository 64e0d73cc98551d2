#!/usr/bin/env python3
"""Tests of plots/make_plots.py, run by CTest (label cpu; no GPU needed).

1. The committed results/: every figure its data allows is written (non-empty PNG), every other
   one is reported as not drawn, and results/ itself is left untouched.
   The README table is what the committed results make (nothing typed by hand).
2. The SYNTHETIC fixture (plots/testdata/synthetic/, made by make_synthetic.py; never read by
   the real pipeline): every figure, the README table and the stage sections, written to a
   temporary copy of README.md and stages/*/*/README.md (--readme-root). Its synthetic-gpu
   folder has the current schema (names with '/', an FP16 stage, training entries), its
   synthetic-no-bench folder the old one.
3. Names with '/' and old names in bench.json; training entries read and ignored by the
   forward figures; the precision in the table; stage colours from the stages present; the
   standard configurations from common/standard_configs.json (or --configs).
   The training series: its table (every training implementation of the results, the ratios
   of a tiny hand-made folder computed right), its figures (training kind only), PyTorch's
   training records in either shape or absent; the forward table and figures hold no training
   measurement.
4. Reproducible PNG bytes; malformed input exits non-zero with a message naming the file.
5. What a reader sees: a point the bench skipped as unsupported is an × in the series' colour
   at the bottom of the sweep panels (with a legend entry), a point without an entry is not
   drawn; no reference line of canonical.png crosses a bar's value label; the script prints a
   line before each step (reading, drawing each figure, rewriting the READMEs).

usage: .venv/bin/python plots/test_plots.py [-v]
"""
import dataclasses
import hashlib
import json
import math
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from require_modules import require  # noqa: E402

require("numpy", "matplotlib")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "plots" / "make_plots.py"
FIXTURE = ROOT / "plots" / "testdata" / "synthetic"
FORWARD_FIGURES = ("canonical.png", "batch_sweep.png", "persistent.png", "persistent_steps.png",
                   "hidden_sweep.png", "fp32_fraction.png")
TRAINING_FIGURES = ("training_canonical.png", "training_sweeps.png", "training_persistent.png")
ALL_FIGURES = FORWARD_FIGURES + TRAINING_FIGURES
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


sys.path.insert(0, str(ROOT / "plots"))
import make_plots as mp  # noqa: E402


def make_plots(*args, cwd=ROOT):
    """Runs make_plots.py; returns the CompletedProcess (text output)."""
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def tree_digest(folder):
    """{relative path: sha256} of every file under `folder`."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def readme_copy(destination):
    """A copy of README.md and stages/*/*/README.md, plus made-up stage READMEs with both stage
    markers (for stages the fixture measured and one it did not)."""
    shutil.copy(ROOT / "README.md", destination / "README.md")
    for readme in (ROOT / "stages").glob("*/*/README.md"):
        folder = destination / "stages" / readme.parent.parent.name / readme.parent.name
        folder.mkdir(parents=True)
        shutil.copy(readme, folder / "README.md")
    markers = ("# made up by plots/test_plots.py\n\n<!-- stage-result:begin -->\nstale\n"
               "<!-- stage-result:end -->\n\n<!-- stage-batch-sweep:begin -->\nstale\n"
               "<!-- stage-batch-sweep:end -->\n")
    for stage in ("forward/10_small_batch_registers", "forward/11_half_precision",
                  "forward/99_not_measured", "training/01_combined_gemms",
                  "training/99_not_measured"):
        (destination / "stages" / stage).mkdir(parents=True, exist_ok=True)
        (destination / "stages" / stage / "README.md").write_text(markers)


def bench_document(entries):
    return json.dumps({"context": {}, "benchmarks": entries})


def row_order(impl):
    """The order of a table's rows: stages, then cuDNN's algorithms, then PyTorch."""
    return (2 if impl == mp.PYTORCH else 1 if mp.is_cudnn(impl) else 0,
            mp.cudnn_sort_key(impl) if mp.is_cudnn(impl) else mp.stage_sort_key(impl))


def training_row_names(table):
    """The first cell of every row of a Markdown table (not the header), without the marks."""
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]
    return [row.split(" | ")[0][2:].replace(" **(fastest cuDNN)**", "")
            .replace(" (check FAILED)", "") for row in rows]


class PlotTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="test_plots_"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assert_ok(self, result):
        self.assertEqual(result.returncode, 0, f"make_plots failed:\n{result.stdout}\n"
                                               f"{result.stderr}")

    def assert_png(self, path):
        self.assertTrue(path.is_file(), f"{path} was not written")
        data = path.read_bytes()
        self.assertGreater(len(data), 10_000, f"{path} is (nearly) empty")
        self.assertEqual(data[:8], PNG_SIGNATURE, f"{path} is not a PNG")

    def assert_fails_naming(self, result, name):
        self.assertNotEqual(result.returncode, 0, f"expected a failure:\n{result.stdout}")
        self.assertIn(name, result.stderr, "the error message does not name the file")


class CommittedResults(PlotTestCase):
    def test_every_expected_png_is_written_and_results_untouched(self):
        before = tree_digest(ROOT / "results")
        result = make_plots("--out", self.tmp, "--no-readmes")
        self.assert_ok(result)
        self.assertEqual(tree_digest(ROOT / "results"), before, "results/ was modified")
        folders = [f for f in sorted((ROOT / "results").iterdir()) if f.is_dir() and any(
            (f / n).is_file() for n in ("bench.json", "pytorch.jsonl", "canonical.jsonl"))]
        self.assertTrue(folders, "no results folder found")
        for folder in folders:
            # bench.json makes the five forward figures, and the two training figures where it
            # holds training entries; without it, the stages' checked runs or PyTorch's record
            # make canonical.png and the rest is reported as not drawn.
            expected = FORWARD_FIGURES if (folder / "bench.json").is_file() else ("canonical.png",)
            results = mp.load_results(folder)
            if not mp.persistent_stage_names(results):  # no persistent run, no stage 07 or up
                expected = tuple(n for n in expected if n != "persistent_steps.png")
            if any(m.kind == "training" for m in mp.training_view(results).bench):
                expected += TRAINING_FIGURES
            for name in ALL_FIGURES:
                png = self.tmp / folder.name / name
                if name in expected:
                    self.assert_png(png)
                    self.assertRegex(result.stdout, rf"wrote .*{folder.name}/{name}\n")
                else:
                    self.assertFalse(png.exists())
                    self.assertRegex(result.stdout, rf"{folder.name}/{name} not drawn: .+")

    def test_readme_table_is_what_the_committed_results_make(self):
        readme = (ROOT / "README.md").read_text()
        committed = readme.split("<!-- results-table:begin -->\n")[1].split(
            "\n<!-- results-table:end -->")[0]
        results = mp.load_results(ROOT / "results" / "h100-sxm")
        self.assertEqual(mp.results_table(results), committed,
                         "README.md's table is not what plots/make_plots.py makes of "
                         "results/h100-sxm/: run it")
        training = readme.split("<!-- training-table:begin -->\n")[1].split(
            "\n<!-- training-table:end -->")[0]
        self.assertEqual(mp.training_table(results), training,
                         "README.md's training table is not what plots/make_plots.py makes of "
                         "results/h100-sxm/: run it")

    def test_committed_tables_keep_the_kinds_apart(self):
        """Every training implementation of the committed results has its row in the training
        table, and no forward row; the forward table has no training row and no training
        time."""
        readme = (ROOT / "README.md").read_text()
        forward = readme.split("<!-- results-table:begin -->")[1].split(
            "<!-- results-table:end -->")[0]
        training = readme.split("<!-- training-table:begin -->")[1].split(
            "<!-- training-table:end -->")[0]
        results = mp.load_results(ROOT / "results" / "h100-sxm")
        trained = {m.impl for m in mp.training_view(results).bench if m.kind == "training"
                   and m.group == "canonical"}
        # PyTorch's training pass, where pytorch.jsonl has one at the canonical config
        trained |= {mp.PYTORCH for m in mp.training_view(results).pytorch
                    if m.kind == "training" and m.config == results.configs.canonical}
        self.assertIn("training/00_naive", trained)
        self.assertTrue(any(mp.is_cudnn(i) for i in trained))
        self.assertEqual(training_row_names(training),
                         [mp.display_name(i) for i in sorted(trained, key=row_order)])
        self.assertNotIn("forward/", training)
        self.assertNotIn("training", forward)
        for m in results.bench:  # bench.json's training entries stay out of the forward table
            if m.kind == "training" and m.group == "canonical":
                self.assertNotIn(f"{m.median_ms:.3f}", forward)
        for m in mp.training_view(results).bench:  # the training table's own run
            if m.kind == "training" and m.group == "canonical" and m.supported:
                self.assertNotIn(f"{m.median_ms:.3f}", forward)
                self.assertIn(f"| {m.median_ms:.3f} | {m.phase_ms('forward'):.3f} | "
                              f"{m.phase_ms('backward'):.3f} |", training)


class StagesNotMeasuredYet(PlotTestCase):
    def test_every_stage_without_results_is_named_and_left_out(self):
        """A stage of the source tree with no measurement in a folder (a new stage) is named in
        one printed note and drawn nowhere; a stage measured under an earlier name
        (RENAMED_STAGES) is shown under that name, and the note says what it is now."""
        for folder in mp.gpu_folders(ROOT / "results"):
            results = mp.load_results(folder)
            measured = {m.impl for m in results.measurements()}
            lines = mp.describe(results)
            note = next((line for line in lines if "not measured yet" in line), "")
            renamed_to = {mp.RENAMED_STAGES[old] for old in measured if old in mp.RENAMED_STAGES}
            for name in mp.registered_stages():
                if name in measured or name in renamed_to:
                    self.assertNotIn(name + ",", note + ",")
                else:
                    self.assertIn(name, note, f"{folder.name}: {name} is not named as not measured")
            for old in sorted(set(mp.RENAMED_STAGES) & measured):
                self.assertTrue(any(f"{old} (its code is {mp.RENAMED_STAGES[old]} now)" in line
                                    for line in lines), lines)
        result = make_plots("--out", self.tmp, "--no-readmes")
        self.assert_ok(result)
        if any("not measured yet" in line for folder in mp.gpu_folders(ROOT / "results")
               for line in mp.describe(mp.load_results(folder))):
            self.assertIn("not measured yet, so not in its figures and tables:", result.stdout)
        else:  # every stage of the source tree is measured somewhere
            self.assertNotIn("not measured yet", result.stdout)


class SyntheticResults(PlotTestCase):
    def run_fixture(self, out, readme_root):
        return make_plots("--results", FIXTURE, "--out", out, "--readme-gpu", "synthetic-gpu",
                          "--readme-root", readme_root)

    def test_fixture_matches_its_generator(self):
        subprocess.run([sys.executable, str(FIXTURE.parent / "make_synthetic.py"), self.tmp],
                       check=True, capture_output=True)
        self.assertEqual(tree_digest(self.tmp), tree_digest(FIXTURE),
                         "plots/testdata/synthetic/ differs from make_synthetic.py's output: "
                         "run plots/testdata/make_synthetic.py")

    def test_figures_table_and_stage_sections(self):
        readmes = self.tmp / "readmes"
        readmes.mkdir()
        readme_copy(readmes)
        result = self.run_fixture(self.tmp / "out", readmes)
        self.assert_ok(result)
        for name in ALL_FIGURES:
            self.assert_png(self.tmp / "out" / "synthetic-gpu" / name)
        self.assert_png(self.tmp / "out" / "synthetic-no-bench" / "canonical.png")
        self.assertIn("synthetic-no-bench/batch_sweep.png not drawn: no bench.json",
                      result.stdout)

        table = (readmes / "README.md").read_text()
        for row in ("| stage | precision | ms (median) |",
                    "| forward/00_naive | FP32 | 73.099 | 1.47 | 1.00× | – | 18.93× |",
                    "| forward/01_combined_gemms | FP32 | 29.871 | 3.59 | 2.45× | 2.45× | 7.73× |",
                    "| forward/10_small_batch_registers | FP32 | 3.320 | 32.34 | 22.02× | 1.73× | 0.86× |",
                    "| forward/11_half_precision | FP16 | 1.582 | 67.88 | 46.21× | 2.10× | 0.41× |",
                    "| cuDNN persist_static **(fastest cuDNN)** | FP32 | 3.862 | 27.80 | 18.93× "
                    "| – | 1.00× |",
                    "| cuDNN persist_dynamic | FP32 | unsupported | – | – | – | – |",
                    # the last record of a config wins (the first one is 3× slower)
                    "| PyTorch nn.LSTM | FP32 | 6.862 | 15.65 | 10.65× | – | 1.78× |",
                    "forward pass, in the precision of each row;",
                    "`plots/testdata/synthetic/synthetic-gpu/bench.json`"):
            self.assertIn(row, table)
        self.assertEqual(table.count("<!-- results-table:begin -->"), 1)
        self.assertNotIn("training", table.split("<!-- results-table:begin -->")[1].split(
            "<!-- results-table:end -->")[0])

        training = table.split("<!-- training-table:begin -->")[1].split(
            "<!-- training-table:end -->")[0]
        for row in ("| implementation | total ms (median) | forward with stash ms | backward ms "
                    "| TFLOP/s | speedup over `training/00_naive` | speedup over previous stage "
                    "| time ÷ cuDNN's fastest |",
                    "| training/00_naive | 208.332 | 73.099 | 146.198 | 1.55 | 1.00× | – "
                    "| 23.66× |",
                    "| training/01_combined_gemms | 79.456 | 29.871 | 53.767 | 4.05 | 2.62× "
                    "| 2.62× | 9.02× |",
                    "| cuDNN persist_static **(fastest cuDNN)** | 8.806 | 3.862 | 5.407 | 36.58 "
                    "| 23.66× | – | 1.00× |",
                    # PyTorch's training record, not its forward one (6.862 ms)
                    "| PyTorch nn.LSTM | 16.298 | 6.862 | 10.293 | 19.76 | 12.78× | – | 1.85× |",
                    "training pass, FP32;", "each timed on their own"):
            self.assertIn(row, training)
        self.assertEqual(training_row_names(training), [
            "training/00_naive", "training/01_combined_gemms", "cuDNN standard",
            "cuDNN persist_static", "cuDNN persist_dynamic", "PyTorch nn.LSTM"])

        naive_training = (readmes / "stages" / "training" / "00_naive" / "README.md").read_text()
        self.assertIn("a training pass (forward with stash and backward): **208.33 ms** median "
                      "of 20 runs", naive_training)
        self.assertIn("Its forward with stash takes 73.10 ms and its backward 146.20 ms",
                      naive_training)
        self.assertIn("23.66× that of cuDNN's fastest training algorithm "
                      "(`cudnn_persist_static_training`, 8.81 ms)", naive_training)
        self.assertIn("passed on what it covered; the gradients were NOT checked",
                      naive_training)
        self.assertIn("µs per time step of the training pass (T=100, L=1, I=H, FP32)",
                      naive_training)
        combined = (readmes / "stages" / "training" / "01_combined_gemms" /
                    "README.md").read_text()
        self.assertIn("Speedup 2.62× over `training/00_naive`.", combined)
        self.assertIn("| 256 | 299.8 | 90.0 (persist_static) | 704.5 | 332.8 (persist_static) |",
                      combined)
        self.assertNotIn("stale", combined)
        self.assertEqual((readmes / "stages" / "training" / "99_not_measured" /
                          "README.md").read_text().count("Not measured yet"), 2)

        naive = (readmes / "stages" / "forward" / "00_naive" / "README.md").read_text()
        self.assertIn("(H=512 I=512 B=64 T=100 L=4, FP32)", naive)
        self.assertIn("**73.10 ms** median of 20 runs (min 70.91, max 77.49), 1.47 TFLOP/s, "
                      "182.7 µs per step and layer", naive)
        self.assertIn("(latest run in `canonical.jsonl`): passed", naive)
        # Stage 10 is in the fixture's persistent run (bench_persistent.json, 1.1× bench.json's
        # times): its sections come from that run, with that run's cuDNN and previous stage.
        persistent = (readmes / "stages" / "forward" / "10_small_batch_registers" /
                      "README.md").read_text()
        self.assertIn("**3.65 ms** median", persistent)
        self.assertIn("Speedup 1.05× over the previous stage `forward/09_register_tiled`.",
                      persistent)
        self.assertIn("`bench_persistent.json` has no measured stage 00 of the forward series: "
                      "no speedup over it from that run.", persistent)
        self.assertNotIn("over `forward/00_naive`", persistent)
        self.assertIn("0.86× that of cuDNN's fastest algorithm (`cudnn_persist_static`, "
                      "4.25 ms)", persistent)
        self.assertIn("Source: `plots/testdata/synthetic/synthetic-gpu/bench_persistent.json` "
                      "(commit synthetic-persistent, 2000-01-02).", persistent)
        self.assertIn("| 256 | 38.8 | 43.4 (persist_static) | unsupported | 160.6 "
                      "(persist_static) |", persistent)
        self.assertIn("µs per time step (T=100, L=1, I=H, FP32), median; from "
                      "`plots/testdata/synthetic/synthetic-gpu/bench_persistent.json` "
                      "(commit synthetic-persistent).", persistent)
        self.assertNotIn("stale", persistent)
        barrier = (readmes / "stages" / "forward" / "07_persistent_barrier" /
                   "README.md").read_text().split("<!-- stage-result:begin -->")[1].split(
                       "<!-- stage-batch-sweep:end -->")[0]
        self.assertIn("**5.23 ms** median", barrier)
        self.assertNotIn("previous stage", barrier)  # 06 is not in the persistent run
        self.assertIn("(latest run in `canonical.jsonl`): passed", barrier)
        self.assertIn("| 1 | 6.8 | 4.6 (persist_static) | 7.3 | 5.0 (persist_static) |", barrier)
        self.assertNotIn("Not measured yet", barrier)
        graph = (readmes / "stages" / "forward" / "06_cuda_graph" / "README.md").read_text()
        self.assertIn("Source: `plots/testdata/synthetic/synthetic-gpu/bench.json` (commit "
                      "synthetic, 2000-01-01)", graph)
        steps = table.split("<!-- persistent-table:begin -->\n")[1].split(
            "\n<!-- persistent-table:end -->")[0]
        self.assertEqual(steps, mp.persistent_table(mp.load_results(FIXTURE / "synthetic-gpu")))
        half = (readmes / "stages" / "forward" / "11_half_precision" / "README.md").read_text()
        self.assertIn("(H=512 I=512 B=64 T=100 L=4, FP16)", half)
        self.assertIn("over the previous stage `forward/10_small_batch_registers`", half)
        self.assertIn("(`cudnn_persist_static`, FP32, 3.86 ms)", half)
        self.assertIn("(T=100, L=1, I=H, FP16)", half)
        self.assertIn("(persist_static, FP32) |", half)
        missing = (readmes / "stages" / "forward" / "99_not_measured" / "README.md").read_text()
        self.assertEqual(missing.count("Not measured yet"), 2)

    def test_old_schema_folder(self):
        """synthetic-no-bench is in the old schema: '00_naive', no series, kind, precision."""
        lines = (FIXTURE / "synthetic-no-bench" / "canonical.jsonl").read_text().splitlines()
        self.assertNotIn('"series"', lines[0])
        self.assertIn('"stage": "00_naive"', lines[0])
        results = mp.load_results(FIXTURE / "synthetic-no-bench")
        view = mp.canonical_view(results)
        self.assertEqual([m.impl for m in view.stages],
                         ["forward/00_naive", "forward/01_combined_gemms"])
        self.assertEqual({(m.series, m.kind, m.precision) for m in view.rows()},
                         {("forward", "forward", "fp32"), ("", "forward", "fp32")})
        table = mp.results_table(results)
        self.assertIn("| forward/00_naive | 73.099 |", table)  # one precision: no column
        self.assertIn("forward pass, FP32;", table)
        # The older record of a stage is superseded; both are quoted as committed runs.
        self.assertIn("Across the 2 committed runs", mp.stage_paragraph(results, "00_naive"))

    def test_png_bytes_are_reproducible(self):
        for out in ("a", "b"):
            self.assert_ok(make_plots("--results", FIXTURE, "--out", self.tmp / out,
                                      "--no-readmes"))
        self.assertEqual(tree_digest(self.tmp / "a"), tree_digest(self.tmp / "b"))


class BenchCase(PlotTestCase):
    """A bench.json made of given entries, read by make_plots."""

    def load_results(self, entries):
        folder = self.tmp / "gpu"
        folder.mkdir(exist_ok=True)
        (folder / "bench.json").write_text(bench_document(entries))
        return mp.load_results(folder)

    def load(self, entries):
        return mp.canonical_view(self.load_results(entries)).stage("forward/00_naive")

    def naive_entry(self, **changes):
        bench = json.loads((FIXTURE / "synthetic-gpu" / "bench.json").read_text())
        entry = next(e for e in bench["benchmarks"]
                     if e["name"].startswith("forward/00_naive/canonical/"))
        return dict(entry, **changes)


class BenchParsing(BenchCase):
    """Google Benchmark's repetitions: aggregates beside the runs, or the aggregates alone."""

    def test_runs_win_over_aggregates(self):
        run = self.naive_entry()
        mean = self.naive_entry(name=run["name"] + "_mean", run_type="aggregate",
                                aggregate_name="mean", median_ms=999.0)
        median = self.naive_entry(name=run["name"] + "_median", run_type="aggregate",
                                  aggregate_name="median", median_ms=998.0)
        self.assertEqual(self.load([run, mean, median]).median_ms, run["median_ms"])

    def test_median_aggregate_alone(self):
        median = self.naive_entry(run_type="aggregate", aggregate_name="median", median_ms=42.0)
        mean = self.naive_entry(run_type="aggregate", aggregate_name="mean", median_ms=999.0)
        self.assertEqual(self.load([mean, median]).median_ms, 42.0)


class NotMeasured(BenchCase):
    """A refused size reads 'unsupported'; a run that failed (lstm_bench's own check of the
    outputs) reads 'failed', in the table and the sentences."""

    def test_refused_and_failed_entries_are_told_apart(self):
        refused = self.naive_entry(error_occurred=True, error_message="unsupported: too large")
        failed = self.naive_entry(error_occurred=True,
                                  error_message="the pass left NaN/Inf or unwritten elements in y")
        for entry, label, phrase in ((refused, "unsupported", "is unsupported"),
                                     (failed, "failed", "failed in this run")):
            m = self.load([entry])
            self.assertFalse(m.supported)
            self.assertEqual((m.not_measured_label, m.not_measured_phrase), (label, phrase))


class Names(BenchCase):
    """'<implementation>/<group>/H:..' with '/' in the implementation; old names; labels."""

    def test_name_with_slashes(self):
        results = self.load_results([self.naive_entry()])
        [m] = results.bench
        self.assertEqual((m.impl, m.group, m.series, m.kind, m.precision),
                         ("forward/00_naive", "canonical", "forward", "forward", "fp32"))
        self.assertEqual(m.config, mp.Config(512, 512, 64, 100, 4))

    def test_skipped_entry_sizes_from_a_name_with_slashes(self):
        name = "forward/10_small_batch_registers/batch_sweep/H:1024/I:1024/B:256/T:100/L:1/manual_time"
        results = self.load_results([{"name": name, "skipped": True, "skip_message": "no",
                                      "label": "series=forward kind=forward precision=bf16"}])
        [m] = results.bench
        self.assertEqual((m.impl, m.group, m.config, m.precision, m.supported),
                         ("forward/10_small_batch_registers", "batch_sweep",
                          mp.Config(1024, 1024, 256, 100, 1), "bf16", False))

    def test_old_name_without_label(self):
        entry = self.naive_entry(name="00_naive/canonical/H:512/I:512/B:64/T:100/L:4/"
                                      "iterations:20/manual_time")
        del entry["label"]
        [m] = self.load_results([entry]).bench
        self.assertEqual((m.impl, m.series, m.kind, m.precision),
                         ("forward/00_naive", "forward", "forward", "fp32"))

    def test_baseline_names_stay_flat(self):
        bench = json.loads((FIXTURE / "synthetic-gpu" / "bench.json").read_text())
        results = self.load_results(bench["benchmarks"])
        cudnn = {m.impl: (m.series, m.kind) for m in results.bench if mp.is_cudnn(m.impl)}
        self.assertEqual(cudnn, {f"cudnn_{algo}{suffix}": ("", kind)
                                 for algo in ("standard", "persist_static", "persist_dynamic")
                                 for suffix, kind in (("", "forward"),
                                                      ("_training", "training"))})
        self.assertEqual(results.fp32_peak_tflops, 60.5)

    def test_name_without_group_and_sizes(self):
        path = self.tmp / "results" / "gpu" / "bench.json"
        path.parent.mkdir(parents=True)
        path.write_text(bench_document([self.naive_entry(name="forward/00_naive/canonical")]))
        result = make_plots("--results", self.tmp / "results", "--out", self.tmp / "out",
                            "--no-readmes")
        self.assert_fails_naming(result, str(path))
        self.assertIn("<implementation>/<group>/H:", result.stderr)

    def test_label_series_must_match_the_name(self):
        entry = self.naive_entry(label="series=training kind=forward precision=fp32")
        with self.assertRaisesRegex(mp.InputError, "series 'training' but the stage "
                                                   "forward/00_naive"):
            self.load_results([entry])


class Kinds(PlotTestCase):
    """Training entries are read (with their phases) and left out of every forward figure."""

    def test_training_entries_are_read(self):
        results = mp.load_results(FIXTURE / "synthetic-gpu")
        training = [m for m in results.measurements() if m.kind == "training"]
        self.assertTrue(any(m.group == "canonical" for m in training))
        entry = next(m for m in training if m.group == "canonical")
        self.assertEqual(entry.impl, "training/00_naive")
        bench = json.loads((FIXTURE / "synthetic-gpu" / "bench.json").read_text())
        raw = next(e for e in bench["benchmarks"]
                   if e["name"].startswith("training/00_naive/canonical/"))
        self.assertEqual((entry.median_ms, entry.phase_ms("forward"), entry.phase_ms("backward")),
                         (raw["median_ms"], raw["forward_ms"], raw["backward_ms"]))
        # Each phase is timed on its own: the total is not their sum (in the fixture as on the
        # H100), and nothing may assume it is.
        self.assertNotAlmostEqual(entry.phase_ms("forward") + entry.phase_ms("backward"),
                                  entry.median_ms, places=1)
        record = next(m for m in results.checked if m.kind == "training")
        self.assertEqual([phase for phase, *_ in record.phases], ["forward", "backward"])
        self.assertTrue(record.not_checked)
        pytorch = [m for m in results.pytorch if m.kind == "training"]
        self.assertTrue(pytorch and all(m.phases for m in pytorch))

    def test_forward_views_hold_no_training_entry(self):
        results = mp.load_results(FIXTURE / "synthetic-gpu")
        self.assertTrue(all(m.kind == "forward" for m in mp.canonical_view(results).rows()))
        for group in ("batch_sweep", "hidden_sweep"):
            for ms in mp.sweep_series(results, group).values():
                self.assertTrue(all(m.kind == "forward" for m in ms))
        self.assertNotIn("training", mp.results_table(results))
        for m in results.measurements():  # not one training time in the forward table
            if m.kind == "training" and m.config == results.configs.canonical:
                self.assertNotIn(f"{m.median_ms:.3f}", mp.results_table(results))

    def test_training_views_hold_only_training_entries(self):
        results = mp.load_results(FIXTURE / "synthetic-gpu")
        view = mp.canonical_view(results, "training")
        self.assertTrue(view.rows())
        self.assertTrue(all(m.kind == "training" for m in view.rows()))
        self.assertEqual({m.impl for m in view.stages},
                         {"training/00_naive", "training/01_combined_gemms"})
        self.assertNotIn("forward/", mp.training_table(results))
        for group in ("batch_sweep", "hidden_sweep"):
            for ms in mp.sweep_series(results, group, "training").values():
                self.assertTrue(all(m.kind == "training" for m in ms))

    def test_figures_are_the_same_without_the_training_entries(self):
        """The forward figures of the fixture, byte for byte, with and without its training
        entries and record (two copies at the same relative path: the caption names it)."""
        for run in ("with", "without"):
            shutil.copytree(FIXTURE / "synthetic-gpu", self.tmp / run / "results" / "gpu")
        copy = self.tmp / "without" / "results" / "gpu"
        bench = json.loads((copy / "bench.json").read_text())
        kept = [e for e in bench["benchmarks"] if "kind=training" not in e.get("label", "")]
        self.assertLess(len(kept), len(bench["benchmarks"]), "the fixture has no training entry")
        (copy / "bench.json").write_text(json.dumps(dict(bench, benchmarks=kept)))
        for name in ("canonical.jsonl", "pytorch.jsonl"):
            lines = (copy / name).read_text().splitlines(keepends=True)
            kept_lines = [line for line in lines if '"kind": "training"' not in line]
            self.assertLess(len(kept_lines), len(lines), f"the fixture's {name} has no training "
                                                         "record")
            (copy / name).write_text("".join(kept_lines))
        outputs = {}
        for run in ("with", "without"):
            result = make_plots("--results", "results", "--out", "out", "--no-readmes",
                                cwd=self.tmp / run)
            self.assert_ok(result)
            outputs[run] = result.stdout
        self.assertRegex(outputs["with"],
                         r"results/gpu: training kind, FP32: .*training/00_naive.* -- in the "
                         r"training table and the training figures")
        self.assertRegex(outputs["without"], r"training_canonical.png not drawn: no "
                                             r"training-kind measurement")
        digests = {run: tree_digest(self.tmp / run / "out" / "gpu") for run in outputs}
        self.assertEqual(sorted(digests["with"]), sorted(mp.FIGURES))
        self.assertEqual(sorted(digests["without"]), sorted(FORWARD_FIGURES))
        self.assertEqual({name: digests["with"][name] for name in FORWARD_FIGURES},
                         digests["without"])


CANONICAL_NAME = "canonical/H:512/I:512/B:64/T:100/L:4/iterations:20/manual_time"


def tiny_entry(impl, kind, median, forward=None, backward=None, skip=None):
    """A bench entry at the canonical config with round numbers (a hand-made folder)."""
    series = impl.split("/")[0] if "/" in impl else ""
    entry = {"name": f"{impl}/{CANONICAL_NAME}", "run_type": "iteration",
             "label": f"series={series} kind={kind} precision=fp32"}
    if skip:
        return dict(entry, error_occurred=True, error_message=skip)
    entry.update(iterations=20, hidden=512, input_size=512, batch=64, seq_len=100, layers=4,
                 median_ms=median, min_ms=median * 0.9, max_ms=median * 1.1,
                 tflops=round(100 / median, 4), us_per_step_layer=median * 1000 / 400)
    if forward is not None:
        entry.update(forward_ms=forward, backward_ms=backward)
    return entry


def tiny_record(median, **fields):
    """A PyTorch run record at the canonical config."""
    return dict({"stage": "pytorch", "hidden": 512, "input_size": 512, "batch": 64,
                 "seq_len": 100, "layers": 4, "ms": {"median": median, "min": median,
                                                     "max": median},
                 "tflops": 1.0, "us_per_step_layer": median * 1000 / 400}, **fields)


TINY_ENTRIES = [
        tiny_entry("training/00_naive", "training", 100.0, 40.0, 70.0),
        tiny_entry("training/01_combined_gemms", "training", 40.0, 15.0, 28.0),
        tiny_entry("training/02_slower", "training", 48.0, 18.0, 33.0),
        tiny_entry("cudnn_standard_training", "training", 20.0, 8.0, 13.0),
        tiny_entry("cudnn_persist_static_training", "training", 16.0, 6.0, 11.0),
        tiny_entry("cudnn_persist_dynamic_training", "training", 0, skip="unsupported: no"),
        tiny_entry("forward/00_naive", "forward", 30.0),
        tiny_entry("cudnn_standard", "forward", 5.0),
]


def tiny_folder(tmp, entries=TINY_ENTRIES, pytorch=()):
    """results 'gpu' under `tmp`: a bench.json of `entries` and a pytorch.jsonl of `pytorch`."""
    folder = tmp / "gpu"
    folder.mkdir(exist_ok=True)
    (folder / "bench.json").write_text(bench_document(list(entries)))
    if pytorch:
        (folder / "pytorch.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pytorch))
    return mp.load_results(folder)


# ---------------------------------------------------------------------------------------------
# The persistent run (bench_persistent.json): stage sections, persistent_steps.png, the table
# ---------------------------------------------------------------------------------------------

PERSISTENT_STEPS = ("forward/07_persistent_barrier", "forward/08_published_h",
                    "forward/09_register_tiled", "forward/10_small_batch_registers")


def sweep_entry(impl, hidden, batch, median, skip=None):
    """A forward-kind bench entry of the batch sweep (T=100, L=1) with round numbers."""
    series = impl.split("/")[0] if "/" in impl else ""
    entry = {"name": f"{impl}/batch_sweep/H:{hidden}/I:{hidden}/B:{batch}/T:100/L:1/manual_time",
             "run_type": "iteration", "label": f"series={series} kind=forward precision=fp32"}
    if skip:
        return dict(entry, error_occurred=True, error_message=skip)
    return dict(entry, iterations=20, hidden=hidden, input_size=hidden, batch=batch, seq_len=100,
                layers=1, median_ms=median, min_ms=median, max_ms=median, tflops=1.0,
                us_per_step_layer=median * 1000 / 100)


def line_labels(ax):
    """The labels of a panel's lines, without the cuDNN points' (marked by algorithm) and the
    unsupported marks."""
    return {line.get_label() for line in ax.get_lines()
            if line.get_gid() not in (mp.CUDNN_FASTEST_POINT_GID, mp.UNSUPPORTED_POINT_GID)}


class PersistentRun(PlotTestCase):
    """A folder's bench_persistent.json is a run of its own: the forward stages it measured are
    shown from it, beside cuDNN's algorithms of the same run; without it, bench.json."""

    def fixture_without_persistent_run(self):
        folder = self.tmp / "gpu"
        shutil.copytree(FIXTURE / "synthetic-gpu", folder)
        (folder / "bench_persistent.json").unlink()
        return mp.load_results(folder)

    def test_the_view_of_each_stage(self):
        for folder in (FIXTURE / "synthetic-gpu", ROOT / "results" / "h100-sxm"):
            results = mp.load_results(folder)
            # the committed folder may have no persistent run of its own (bench.json then holds
            # every forward stage); the fixture has one
            self.assertEqual(results.persistent is None,
                             not (folder / "bench_persistent.json").is_file(), folder)
            self.assertIsNotNone(mp.load_results(FIXTURE / "synthetic-gpu").persistent)
            for stage in PERSISTENT_STEPS:
                self.assertIs(mp.stage_view(results, stage), results.persistent or results, stage)
            for slug in ("00_naive", "01_combined_gemms", "02_streams", "03_fused_pointwise",
                         "04_transposed_weights", "05_layer_wavefront", "06_cuda_graph"):
                self.assertIs(mp.stage_view(results, f"forward/{slug}"), results, slug)
            self.assertIs(mp.stage_view(results, "forward/99_not_measured"), results)
            self.assertIs(mp.stage_view(results, "training/00_naive"),
                          mp.training_view(results))
        synthetic = mp.load_results(FIXTURE / "synthetic-gpu")
        self.assertIs(mp.stage_view(synthetic, "forward/11_half_precision"), synthetic)
        self.assertIs(mp.stage_view(synthetic, "11_half_precision"), synthetic)

    def test_stage_sections_name_their_run(self):
        """With a persistent run (the fixture), stages 07-10 are shown from it, without a
        speedup over stage 00, which it did not measure; without one (the committed folder, whose
        bench.json holds every forward stage), from bench.json like every other stage."""
        for folder in (FIXTURE / "synthetic-gpu", ROOT / "results" / "h100-sxm"):
            results = mp.load_results(folder)
            bench_commit = results.context["git_commit"]
            graph = mp.stage_paragraph(results, "forward/06_cuda_graph")
            self.assertIn(f"Source: `{mp.display_path(folder / 'bench.json')}` (commit "
                          f"{bench_commit},", graph)
            self.assertIn("over `forward/00_naive`", graph)
            self.assertIn("over the previous stage `forward/07_persistent_barrier`",
                          mp.stage_paragraph(results, "forward/08_published_h"))
            run = results.persistent or results
            best = mp.canonical_view(run).fastest_cudnn()
            source = mp.display_path(folder / ("bench_persistent.json" if results.persistent
                                               else "bench.json"))
            commit = run.context["git_commit"]
            for stage in PERSISTENT_STEPS:
                text = mp.stage_paragraph(results, stage)
                self.assertIn(f"Source: `{source}` (commit {commit},", text)
                self.assertIn(f"(`{best.impl}`, {best.median_ms:.2f} ms)", text)
                if folder == ROOT / "results" / "h100-sxm":  # every stage's checked run is there
                    self.assertIn("(latest run in `canonical.jsonl`)", text)
                if results.persistent:
                    self.assertNotEqual(commit, bench_commit)
                    self.assertNotIn("forward/00_naive", text)  # not in that run
                    self.assertIn("no speedup over it from that run", text)
                else:
                    self.assertIn("over `forward/00_naive`", text)
                sweep = mp.stage_batch_sweep_table(results, stage)
                self.assertIn(f"from `{source}` (commit {commit}).", sweep)
            if results.persistent:
                self.assertNotIn("previous stage",
                                 mp.stage_paragraph(results, PERSISTENT_STEPS[0]))

    def test_figure_a_line_per_stage_and_cudnn_per_panel(self):
        for folder in (FIXTURE / "synthetic-gpu", ROOT / "results" / "h100-sxm"):
            results = mp.load_results(folder)
            run = mp.persistent_view(results)
            fig = mp.figure_persistent_steps(results)
            hiddens = sorted({m.config.hidden for m in run.bench
                              if m.group == "batch_sweep"})
            self.assertEqual([ax.get_title() for ax in fig.axes], [f"H = {h}" for h in hiddens])
            for ax in fig.axes:
                self.assertEqual(line_labels(ax), set(PERSISTENT_STEPS)
                                 | {"cuDNN fastest at each point"}, folder)
                [cudnn] = [line for line in ax.get_lines()
                           if line.get_gid() == mp.CUDNN_FASTEST_GID]
                self.assertEqual(cudnn.get_linestyle(), "--")
                self.assertEqual(mp.to_hex(cudnn.get_color()), "#000000")
                hidden = int(ax.get_title().split("= ")[1])
                fastest = {}  # the persistent run's cuDNN entries (where it has one)
                for m in run.bench:
                    if (mp.is_cudnn(m.impl) and m.supported and m.group == "batch_sweep"
                            and m.config.hidden == hidden):
                        fastest[m.config.batch] = min(fastest.get(m.config.batch, math.inf),
                                                      m.us_per_step_layer)
                self.assertEqual(list(zip(cudnn.get_xdata(), cudnn.get_ydata())),
                                 sorted(fastest.items()))
            source = "bench_persistent.json" if results.persistent else "bench.json"
            self.assertIn(f"{source}, commit {run.context['git_commit']}", fig.get_suptitle())
            self.assertIn("07–10", fig.get_suptitle())
            # a stage keeps its colour of the folder's other figures
            colors = mp.stage_colors(results.stages())
            for line in fig.axes[0].get_lines():
                if line.get_label() in PERSISTENT_STEPS:
                    self.assertEqual(mp.to_hex(line.get_color()), colors[line.get_label()])

    def test_figure_marks_unsupported_points(self):
        results = mp.load_results(FIXTURE / "synthetic-gpu")
        fig = mp.figure_persistent_steps(results)
        panels = {ax.get_title(): ax for ax in fig.axes}
        color = mp.stage_colors(results.stages())["forward/10_small_batch_registers"]
        self.assertEqual(unsupported_marks(panels["H = 1024"]), {(color, 256.0)})
        self.assertEqual(unsupported_marks(panels["H = 512"]), set())
        self.assertIn(mp.UNSUPPORTED_LEGEND, legend_labels(fig))
        notes = [t.get_text() for t in panels["H = 1024"].texts
                 if t.get_gid() == mp.UNSUPPORTED_NOTE_GID]
        self.assertEqual(notes, ["forward/10_small_batch_registers: not supported"])

    def tiny_persistent_folder(self, extra=()):
        """bench.json with stage 00, 10 and a fast cuDNN; bench_persistent.json with 07, 08
        and cuDNN's algorithms (every number chosen by hand), and the `extra` entries."""
        folder = self.tmp / "gpu"
        folder.mkdir()
        (folder / "bench.json").write_text(bench_document([
            tiny_entry("forward/00_naive", "forward", 30.0),
            tiny_entry("forward/10_small_batch_registers", "forward", 5.0),
            tiny_entry("cudnn_standard", "forward", 2.0),
            sweep_entry("cudnn_persist_static", 512, 1, 0.01)]))
        entries = [
            tiny_entry("forward/07_persistent_barrier", "forward", 20.0),
            tiny_entry("forward/08_published_h", "forward", 10.0),
            tiny_entry("cudnn_standard", "forward", 8.0),
            tiny_entry("cudnn_persist_static", "forward", 0, skip="unsupported: no"),
            tiny_entry("cudnn_persist_dynamic", "forward", 16.0),
            sweep_entry("forward/07_persistent_barrier", 512, 1, 0.5),
            sweep_entry("forward/08_published_h", 512, 1, 0.4),
            sweep_entry("cudnn_standard", 512, 1, 0.6),
            sweep_entry("cudnn_persist_static", 512, 1, 0.3),
            sweep_entry("cudnn_persist_dynamic", 512, 1, 0.35),
            sweep_entry("forward/07_persistent_barrier", 1024, 4, 0.9),
            sweep_entry("forward/08_published_h", 1024, 4, 0, skip="unsupported: too big"),
            sweep_entry("cudnn_standard", 1024, 4, 1.2),
            sweep_entry("cudnn_persist_static", 1024, 4, 0, skip="unsupported: no"),
            sweep_entry("cudnn_persist_dynamic", 1024, 4, 1.0), *extra]
        context = {"gpu": "TINY GPU", "date_utc": "2000-01-03T00:00:00Z", "git_commit": "abc123"}
        (folder / "bench_persistent.json").write_text(json.dumps({"context": context,
                                                                  "benchmarks": entries}))
        return mp.load_results(folder)

    def test_table_rows_and_ratios(self):
        table = mp.persistent_table(self.tiny_persistent_folder())
        rows = [line for line in table.splitlines() if line.startswith("| ")]
        self.assertEqual(rows, [
            "| stage | canonical ms (median) | µs per time step, H=512 B=1 "
            "| µs per time step, H=1024 B=4 | canonical time ÷ cuDNN's fastest |",
            "| forward/07_persistent_barrier | 20.000 | 5.0 | 9.0 | 2.50× |",
            "| forward/08_published_h | 10.000 | 4.0 | unsupported | 1.25× |",
            "| cuDNN's fastest | 8.000 (standard) | 3.0 (persist_static) "
            "| 10.0 (persist_dynamic) | 1.00× |"])
        footer = table.split("\n\n")[1]
        self.assertIn("from `", footer)
        self.assertIn("gpu/bench_persistent.json` (TINY GPU, 2000-01-03, commit abc123)", footer)
        self.assertNotIn("bench.json`", footer)
        self.assertIn("`cudnn_persist_static` is unsupported here: unsupported: no.", footer)
        # bench.json's stage 10 and its faster cuDNN are not in it
        self.assertNotIn("10_small_batch_registers", table)
        self.assertNotIn("2.000", table)

    def test_an_entry_at_the_same_shape_that_differs_is_named(self):
        standard = tiny_entry("cudnn_standard", "forward", 12.0)
        hidden_sweep = dict(standard, name=standard["name"].replace("/canonical/",
                                                                    "/hidden_sweep/"))
        footer = mp.persistent_table(self.tiny_persistent_folder([hidden_sweep]))
        self.assertIn("`cudnn_standard` took 12.00 ms at this same shape as a point of the hidden "
                      "sweep in the same run, against 8.00 ms here", footer)
        shutil.rmtree(self.tmp / "gpu")
        self.assertNotIn("at this same shape", mp.persistent_table(self.tiny_persistent_folder()))

    def test_readme_gets_the_table_between_its_markers(self):
        results = self.tiny_persistent_folder()
        readmes = self.tmp / "readmes"
        readmes.mkdir()
        (readmes / "README.md").write_text(
            "<!-- results-table:begin -->\nold\n<!-- results-table:end -->\n"
            "<!-- persistent-table:begin -->\nold\n<!-- persistent-table:end -->\n")
        written = mp.update_readmes(results, readmes)
        self.assertIn((readmes / "README.md", "persistent-table"), written)
        text = (readmes / "README.md").read_text()
        self.assertIn("<!-- persistent-table:begin -->\n" + mp.persistent_table(results)
                      + "\n<!-- persistent-table:end -->", text)
        # without the markers it is not an error: the table is just not written
        (readmes / "README.md").write_text("<!-- results-table:begin -->\nold\n"
                                           "<!-- results-table:end -->\n")
        written = mp.update_readmes(results, readmes)
        self.assertNotIn((readmes / "README.md", "persistent-table"), written)

    def test_without_the_persistent_run(self):
        """No bench_persistent.json: every stage from bench.json, the figure and the table of
        its forward stages from 07 on (here 10, and 11 in FP16)."""
        results = self.fixture_without_persistent_run()
        self.assertIsNone(results.persistent)
        for stage in PERSISTENT_STEPS:
            self.assertIs(mp.stage_view(results, stage), results)
        self.assertIn("Not measured yet", mp.stage_paragraph(results,
                                                             "forward/07_persistent_barrier"))
        paragraph = mp.stage_paragraph(results, "forward/10_small_batch_registers")
        self.assertIn("over the previous stage `forward/06_cuda_graph`", paragraph)
        self.assertIn("bench.json` (commit synthetic,", paragraph)
        self.assertEqual(mp.persistent_stage_names(results),
                         ["forward/10_small_batch_registers", "forward/11_half_precision"])
        fig = mp.figure_persistent_steps(results)
        self.assertIn("bench.json, commit synthetic", fig.get_suptitle())
        for ax in fig.axes:
            self.assertEqual(line_labels(ax), {"forward/10_small_batch_registers · FP32",
                                               "forward/11_half_precision · FP16",
                                               "cuDNN fastest at each point · FP32"})
        table = mp.persistent_table(results)
        self.assertIn("| forward/10_small_batch_registers | FP32 | 3.320 |", table)
        self.assertIn("| forward/11_half_precision | FP16 | 1.582 |", table)
        self.assertIn("gpu/bench.json` (SYNTHETIC TEST DATA", table)

    def test_nothing_persistent_to_show(self):
        """bench.json without a stage from 07 on and no bench_persistent.json: the figure is
        not drawn, saying why; the README's table says not measured yet; nothing fails."""
        results = tiny_folder(self.tmp)  # forward/00_naive only
        with self.assertRaisesRegex(mp.MissingData, "no forward stage numbered 07 or up.*"
                                                    "bench_persistent.json"):
            mp.figure_persistent_steps(results)
        with self.assertRaisesRegex(mp.MissingData, "no forward stage numbered 07 or up"):
            mp.persistent_table(results)
        readmes = self.tmp / "readmes"
        readmes.mkdir()
        (readmes / "README.md").write_text(
            "<!-- results-table:begin -->\nold\n<!-- results-table:end -->\n"
            "<!-- persistent-table:begin -->\nold\n<!-- persistent-table:end -->\n")
        result = make_plots("--results", self.tmp, "--out", self.tmp / "out", "--readme-gpu",
                            "gpu", "--readme-root", readmes)
        self.assert_ok(result)
        self.assertRegex(result.stdout, r"gpu/persistent_steps.png not drawn: .*no forward "
                                        r"stage numbered 07 or up")
        self.assertIn("<!-- persistent-table:begin -->\nNot measured yet: ",
                      (readmes / "README.md").read_text())


class TrainingTable(PlotTestCase):
    """The training table of a tiny hand-made folder: every ratio worked out by hand."""

    def folder(self, pytorch=()):
        return tiny_folder(self.tmp, pytorch=pytorch)

    def test_an_entry_at_the_same_shape_that_differs_is_named(self):
        """cuDNN's hidden-sweep entry at the canonical shape 25% below its canonical entry: the
        footer names it; one within 10%: not named."""
        def at_hidden_sweep(entry, median):
            name = entry["name"].replace("/canonical/", "/hidden_sweep/")
            return dict(entry, name=name, median_ms=median)
        standard = tiny_entry("cudnn_standard_training", "training", 20.0, 8.0, 13.0)
        for other, named in ((15.0, True), (19.0, False)):
            with self.subTest(other=other):
                results = tiny_folder(self.tmp, entries=TINY_ENTRIES + [
                    at_hidden_sweep(standard, other)])
                footer = mp.training_table(results).splitlines()[-1]
                sentence = ("`cudnn_standard_training` took 15.00 ms at this same shape as a "
                            "point of the hidden sweep in the same run, against 20.00 ms here")
                if named:
                    self.assertIn(sentence, footer)
                else:
                    self.assertNotIn("at this same shape", footer)

    def test_rows_and_ratios(self):
        results = self.folder(pytorch=[
            tiny_record(9.0, kind="forward"),
            tiny_record(25.0, stage="pytorch_training",  # no kind: the name says training
                        forward_ms=10.0, backward_ms={"median": 14.0, "min": 13.0, "max": 15.0})])
        table = mp.training_table(results)
        rows = [line for line in table.splitlines() if line.startswith("| ")][1:]
        self.assertEqual(rows, [
            "| training/00_naive | 100.000 | 40.000 | 70.000 | 1.00 | 1.00× | – | 6.25× |",
            "| training/01_combined_gemms | 40.000 | 15.000 | 28.000 | 2.50 | 2.50× | 2.50× "
            "| 2.50× |",
            "| training/02_slower | 48.000 | 18.000 | 33.000 | 2.08 | 2.08× | 0.83× | 3.00× |",
            "| cuDNN standard | 20.000 | 8.000 | 13.000 | 5.00 | 5.00× | – | 1.25× |",
            "| cuDNN persist_static **(fastest cuDNN)** | 16.000 | 6.000 | 11.000 | 6.25 "
            "| 6.25× | – | 1.00× |",
            "| cuDNN persist_dynamic | unsupported | – | – | – | – | – | – |",
            "| PyTorch nn.LSTM | 25.000 | 10.000 | 14.000 | 1.00 | 4.00× | – | 1.56× |"])
        self.assertIn("pytorch.jsonl", table)
        self.assertNotIn("No PyTorch training measurement", table)
        # and the forward table has the forward rows only
        forward = mp.results_table(results)
        self.assertEqual(training_row_names(forward.split("\n\n")[0]),
                         ["forward/00_naive", "cuDNN standard", "PyTorch nn.LSTM"])
        self.assertIn("| PyTorch nn.LSTM | 9.000 |", forward)
        for text in ("training", "100.000", "25.000", "16.000"):
            self.assertNotIn(text, forward)

    def test_without_pytorch_training(self):
        """No PyTorch training record: no row, the footer says so, pytorch.jsonl is not named
        as a source of the table (its forward record is not a training time)."""
        results = self.folder(pytorch=[tiny_record(9.0, kind="forward")])
        table = mp.training_table(results)
        self.assertNotIn("PyTorch nn.LSTM |", table)
        self.assertNotIn("9.000", table)
        self.assertNotIn("pytorch.jsonl`", table)
        self.assertIn("No PyTorch training measurement yet", table)

    def test_no_training_measurement(self):
        results = tiny_folder(self.tmp, entries=TINY_ENTRIES[-2:])  # forward entries only
        with self.assertRaisesRegex(mp.MissingData, "no training-kind measurement"):
            mp.training_table(results)
        with self.assertRaises(mp.MissingData):
            mp.figure_training_canonical(results)
        with self.assertRaises(mp.MissingData):
            mp.figure_training_sweeps(results)
        mp.results_table(results)  # the forward table is still made

    def test_readme_gets_the_table_between_its_markers(self):
        self.folder()
        readmes = self.tmp / "readmes"
        readmes.mkdir()
        (readmes / "README.md").write_text(
            "<!-- results-table:begin -->\nold\n<!-- results-table:end -->\n"
            "<!-- training-table:begin -->\nold\n<!-- training-table:end -->\n")
        result = make_plots("--results", self.tmp, "--out", self.tmp / "out", "--readme-gpu",
                            "gpu", "--readme-root", readmes)
        self.assert_ok(result)
        self.assertRegex(result.stdout, r"plots: rewrote .*README.md \(training-table\)")
        text = (readmes / "README.md").read_text()
        training = text.split("<!-- training-table:begin -->\n")[1].split(
            "\n<!-- training-table:end -->")[0]
        self.assertEqual(training, mp.training_table(mp.load_results(self.tmp / "gpu")))
        self.assertNotIn("old", text)


class PyTorchTrainingRecords(PlotTestCase):
    """PyTorch's training records are read in either shape, and kept apart from its forward."""

    def load(self, *records):
        folder = self.tmp / "gpu"
        folder.mkdir(exist_ok=True)
        (folder / "pytorch.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        return mp.load_results(folder)

    def training(self, results):
        [m] = [m for m in results.pytorch if m.kind == "training"]
        return m

    def test_phases_object(self):
        phases = {"forward": {"median": 3.0, "min": 2.0, "max": 4.0},
                  "backward": {"median": 5.0, "min": 4.0, "max": 6.0}}
        m = self.training(self.load(tiny_record(7.0, kind="training", phases=phases)))
        self.assertEqual((m.median_ms, m.phase_ms("forward"), m.phase_ms("backward")),
                         (7.0, 3.0, 5.0))

    def test_forward_ms_and_backward_ms_numbers(self):
        m = self.training(self.load(tiny_record(7.0, stage="pytorch_training", kind="training",
                                                forward_ms=3.0, backward_ms=5.0)))
        self.assertEqual((m.phase_ms("forward"), m.phase_ms("backward")), (3.0, 5.0))

    def test_kind_from_the_stage_name(self):
        results = self.load(tiny_record(2.0),  # an old forward record: no kind
                            tiny_record(7.0, stage="pytorch_training", forward_ms=3.0,
                                        backward_ms=5.0))
        self.assertEqual(self.training(results).median_ms, 7.0)
        self.assertEqual(mp.canonical_view(results).pytorch.median_ms, 2.0)
        self.assertEqual(mp.canonical_view(results, "training").pytorch.median_ms, 7.0)

    def test_without_phases(self):
        results = self.load(tiny_record(7.0, kind="training"))
        self.assertEqual(self.training(results).phases, ())
        self.assertIn("| PyTorch nn.LSTM | 7.000 | – | – |", mp.training_table(results))

    def test_malformed_phase(self):
        with self.assertRaisesRegex(mp.InputError, "'forward_ms'"):
            self.load(tiny_record(7.0, kind="training", forward_ms="fast", backward_ms=1.0))


class TrainingFigures(PlotTestCase):
    """training_canonical.png and training_sweeps.png show the training kind, all of it."""

    def test_canonical_bars_totals_and_reference_line(self):
        results = tiny_folder(self.tmp)
        fig = mp.figure_training_canonical(results)
        ms_panel, speed_panel = fig.axes
        names = [t.get_text().replace("\n", " ") for t in ms_panel.get_xticklabels()]
        self.assertEqual(names, ["00 naive", "01 combined gemms", "02 slower", "cuDNN standard",
                                 "cuDNN persist_static", "cuDNN persist_dynamic"])
        totals = [line.get_ydata()[0] for line in ms_panel.get_lines()
                  if line.get_gid() == mp.TOTAL_MARK_GID]
        self.assertEqual(totals, [100.0, 40.0, 48.0, 20.0, 16.0])
        # the stacks: forward at the bottom, backward on top of it
        heights = sorted((round(p.get_y(), 6), round(p.get_height(), 6))
                         for p in ms_panel.patches if p.get_height() > 0)
        for forward, backward in ((40.0, 70.0), (15.0, 28.0), (8.0, 13.0), (6.0, 11.0)):
            self.assertIn((0.0, forward), heights)
            self.assertIn((forward, backward), heights)
        self.assertIn("unsupported", [t.get_text() for t in ms_panel.texts])
        refs = [line.get_ydata()[0] for line in speed_panel.get_lines()
                if line.get_gid() == mp.REFERENCE_LINE_GID]
        self.assertEqual(refs, [100.0 / 16.0])  # cuDNN's fastest training algorithm
        speedups = [t.get_text() for t in speed_panel.texts if t.get_gid() == mp.VALUE_LABEL_GID]
        self.assertEqual(speedups, ["1.00×", "2.50×", "2.08×"])
        self.assertEqual(crossed_labels(fig), [])

    def test_committed_results(self):
        results = mp.load_results(ROOT / "results" / "h100-sxm")
        view = mp.canonical_view(mp.training_view(results), "training")
        fig = mp.figure_training_canonical(results)
        ms_panel, speed_panel = fig.axes
        totals = [line.get_ydata()[0] for line in ms_panel.get_lines()
                  if line.get_gid() == mp.TOTAL_MARK_GID]
        self.assertEqual(totals, [m.median_ms for m in view.rows() if m.supported])
        self.assertEqual(len(totals), len({m.impl for m in mp.training_view(results).bench
                                           if m.kind == "training" and m.group == "canonical"
                                           and m.supported})
                         + (view.pytorch is not None and view.pytorch.supported))
        refs = [line.get_ydata()[0] for line in speed_panel.get_lines()
                if line.get_gid() == mp.REFERENCE_LINE_GID]
        self.assertIn(view.base().median_ms / view.fastest_cudnn().median_ms, refs)
        self.assertEqual(crossed_labels(fig), [])

    def test_sweeps_show_every_training_implementation_and_nothing_else(self):
        results = mp.load_results(FIXTURE / "synthetic-gpu")
        fig = mp.figure_training_sweeps(results)
        titles = [ax.get_title().split("\n")[0] for ax in fig.axes]
        self.assertEqual(titles, ["batch sweep, H = 512", "batch sweep, H = 1024",
                                  "hidden sweep"])
        labels = set(legend_labels(fig)) - {mp.UNSUPPORTED_LEGEND}
        trained = {m.impl for m in results.bench + results.pytorch if m.kind == "training"}
        self.assertEqual(labels, {mp.display_name(i) for i in trained})
        self.assertFalse(any(label.startswith("forward/") for label in labels))
        colors = mp.stage_colors(results.stages())
        hidden_panel = fig.axes[2]
        self.assertIn((colors["training/01_combined_gemms"], 2048.0),
                      unsupported_marks(hidden_panel))
        self.assertEqual(unsupported_marks(hidden_panel), skipped_points(
            results, "hidden_sweep", kind="training"))
        # the y values are the training entries' own
        [line] = [line for line in fig.axes[0].get_lines()
                  if line.get_label() == "training/00_naive"]
        expected = sorted((m.config.batch, m.us_per_step_layer) for m in results.bench
                          if m.impl == "training/00_naive" and m.group == "batch_sweep"
                          and m.config.hidden == 512)
        self.assertEqual(list(zip(line.get_xdata(), line.get_ydata())), expected)


class Precision(PlotTestCase):
    def records_folder(self, precision):
        """A results folder of two stages and PyTorch in one precision (records only)."""
        folder = self.tmp / "gpu"
        folder.mkdir()
        lines = []
        for line in (FIXTURE / "synthetic-gpu" / "canonical.jsonl").read_text().splitlines():
            record = json.loads(line)
            if record["kind"] == "forward":
                lines.append(json.dumps(dict(record, precision=precision)))
        (folder / "canonical.jsonl").write_text("\n".join(lines) + "\n")
        return folder

    def test_the_table_says_the_records_precision(self):
        results = mp.load_results(self.records_folder("bf16"))
        table = mp.results_table(results)
        self.assertIn("forward pass, BF16;", table)
        self.assertNotIn("FP32", table)
        self.assertIn("(H=512 I=512 B=64 T=100 L=4, BF16)",
                      mp.stage_paragraph(results, "forward/00_naive"))
        fig = mp.figure_canonical(results)
        self.assertIn("BF16", fig.get_suptitle())
        self.assertNotIn("FP32", fig.get_suptitle())

    def test_precision_labels(self):
        self.assertEqual(mp.precision_label("fp32"), "FP32")
        self.assertEqual(mp.precision_label("fp32_emulated_bf16x9"), "FP32 emulated bf16x9")
        self.assertEqual(mp.join_precisions(["fp32", "fp16", "fp32"]), "FP16 and FP32")

    def test_fp32_fraction_leaves_out_other_precisions(self):
        results = mp.load_results(FIXTURE / "synthetic-gpu")
        fig = mp.figure_fp32_fraction(results)
        ax = fig.axes[0]
        labels = [tick.get_text() for tick in ax.get_yticklabels()]
        self.assertIn("forward/10_small_batch_registers", labels)
        self.assertNotIn("forward/11_half_precision", labels)
        self.assertIn("not shown (not FP32): forward/11_half_precision (FP16)",
                      ax.get_xlabel())


class Colours(unittest.TestCase):
    """Stage colours come from the stages present, per series, not from a list of stages."""

    def test_distinct_whatever_the_numbers(self):
        colors = mp.stage_colors(["forward/00_naive", "forward/08_next", "forward/16_later"])
        self.assertEqual(len(set(colors.values())), 3)

    def test_many_stages_stay_distinct(self):
        names = [f"forward/{n:02d}_stage" for n in range(14)]
        self.assertEqual(len(set(mp.stage_colors(names).values())), 14)

    def test_order_of_the_stages_present(self):
        """The first stage present gets the series' first colour, whatever its number."""
        colors = mp.stage_colors(["forward/03_c", "forward/01_b"])
        other = mp.stage_colors(["forward/05_x", "forward/11_y"])
        self.assertEqual(colors["forward/01_b"], other["forward/05_x"])
        self.assertEqual(colors["forward/03_c"], other["forward/11_y"])
        self.assertNotEqual(colors["forward/01_b"], colors["forward/03_c"])

    def test_series_have_their_own_colours(self):
        forward = [f"forward/{n:02d}_s" for n in range(4)]
        training = [f"training/{n:02d}_t" for n in range(3)]
        alone = mp.stage_colors(forward)
        both = mp.stage_colors(forward + training)
        self.assertEqual({k: both[k] for k in forward}, alone, "a new series moved the colours")
        self.assertFalse(set(both[k] for k in training) & set(alone.values()))

    def test_no_colour_of_pytorch_or_cudnn(self):
        reserved = {mp.to_hex(mp.PYTORCH_COLOR)} | {mp.to_hex(c) for c, _ in mp.CUDNN_STYLES}
        colors = mp.stage_colors([f"{s}/{n:02d}_x" for s in ("forward", "training", "other")
                                  for n in range(9)])
        self.assertFalse(set(colors.values()) & reserved)

    def test_sweep_lines_use_them(self):
        results = mp.load_results(FIXTURE / "synthetic-gpu")
        colors = mp.stage_colors(results.stages())
        fig = mp.figure_hidden_sweep(results)
        lines = {line.get_label(): mp.to_hex(line.get_color()) for line in fig.axes[0].lines}
        self.assertEqual(lines["forward/10_small_batch_registers · FP32"], colors["forward/10_small_batch_registers"])
        self.assertEqual(lines["forward/11_half_precision · FP16"],
                         colors["forward/11_half_precision"])

    def test_persistent_figure_shows_the_last_two_forward_stages(self):
        results = mp.load_results(FIXTURE / "synthetic-gpu")
        fig = mp.figure_persistent(results)
        self.assertTrue(fig.get_suptitle().startswith("forward/11_half_precision against"))
        results.bench = [m for m in results.bench if m.impl != "forward/11_half_precision"]
        fig = mp.figure_persistent(results)
        self.assertTrue(fig.get_suptitle().startswith("forward/10_small_batch_registers against"))
        labels = {line.get_label() for line in fig.axes[0].lines
                  if line.get_gid() != mp.CUDNN_FASTEST_POINT_GID}
        self.assertEqual(labels, {"forward/06_cuda_graph", "forward/10_small_batch_registers",
                                  "cuDNN fastest at each point"})


class StandardConfigs(PlotTestCase):
    """The canonical config and the sweeps come from common/standard_configs.json."""

    CUSTOM = {"groups": [
        {"name": "canonical", "hidden": [256], "batch": [32], "seq_len": [50], "layers": [2]},
        {"name": "batch_sweep", "hidden": [384], "batch": [1, 4, 16], "seq_len": [20],
         "layers": [1]},
        {"name": "hidden_sweep", "hidden": [128, 256], "batch": [8], "seq_len": [20],
         "layers": [2], "input_size": [64]}]}

    def write_configs(self, document):
        path = self.tmp / "configs.json"
        path.write_text(json.dumps(document))
        return path

    def test_the_committed_file(self):
        document = json.loads((ROOT / "common" / "standard_configs.json").read_text())
        configs = mp.load_standard_configs()
        self.assertEqual([g["name"] for g in document["groups"]], list(configs.groups))
        canonical = document["groups"][0]
        self.assertEqual(configs.canonical,
                         mp.Config(canonical["hidden"][0], canonical["hidden"][0],
                                   canonical["batch"][0], canonical["seq_len"][0],
                                   canonical["layers"][0]))
        sweep = configs.group("batch_sweep")
        self.assertEqual(len(sweep.configs), 18)
        self.assertEqual(sweep.fixed_label(), "T=100, L=1, I=H")

    def test_input_size_and_order(self):
        configs = mp.load_standard_configs(self.write_configs(self.CUSTOM))
        group = configs.group("hidden_sweep")
        self.assertEqual(group.configs, (mp.Config(128, 64, 8, 20, 2), mp.Config(256, 64, 8, 20, 2)))
        self.assertEqual(group.fixed_label(), "B=8, T=20, L=2, I=64")

    def test_plots_follow_another_configs_file(self):
        configs = self.write_configs(self.CUSTOM)
        results = self.tmp / "results"
        subprocess.run([sys.executable, str(FIXTURE.parent / "make_synthetic.py"), results,
                        "--configs", configs], check=True, capture_output=True)
        readmes = self.tmp / "readmes"
        readmes.mkdir()
        readme_copy(readmes)
        result = make_plots("--results", results, "--out", self.tmp / "out", "--readme-gpu",
                            "synthetic-gpu", "--readme-root", readmes, "--configs", configs)
        self.assert_ok(result)
        for name in ALL_FIGURES:
            self.assert_png(self.tmp / "out" / "synthetic-gpu" / name)
        table = (readmes / "README.md").read_text()
        self.assertIn("Canonical config H=256 I=256 B=32 T=50 L=2, forward pass", table)
        sweep = (readmes / "stages" / "forward" / "10_small_batch_registers" / "README.md").read_text()
        self.assertIn("| B | H=384: forward/10_small_batch_registers | H=384: cuDNN fastest |", sweep)
        self.assertIn("(H=384, T=20, L=1, I=H, FP32)", sweep)
        self.assertEqual([line.split(" |")[0] for line in sweep.splitlines()
                          if line.startswith("| ") and line[2].isdigit()], ["| 1", "| 4", "| 16"])

        # The same data against the committed file: nothing is at its canonical config, and
        # the console says which entries are off the standard configurations.
        default = make_plots("--results", results, "--out", self.tmp / "out2", "--no-readmes")
        self.assert_ok(default)
        self.assertIn("does not list in their group, left out: batch_sweep H=384", default.stdout)
        self.assertIn("synthetic-gpu/canonical.png not drawn: no stage measured at the "
                      "canonical config", default.stdout)

    def test_malformed_configs_file(self):
        for document, message in (
                ({"groups": [{"name": "batch_sweep", "hidden": [1], "batch": [1],
                              "seq_len": [1], "layers": [1]}]}, "a group 'canonical'"),
                ({"groups": [{"name": "canonical", "hidden": [512, 1024], "batch": [1],
                              "seq_len": [1], "layers": [1]}]}, "exactly one config"),
                ({"groups": [{"name": "canonical", "hidden": [512], "batch": [],
                              "seq_len": [1], "layers": [1]}]}, "'batch' is not a non-empty"),
                ({"groups": [{"name": "canonical", "hidden": [512], "batch": [1],
                              "seq_len": [1], "layers": [1], "hiden": [3]}]}, "unknown key")):
            path = self.write_configs(document)
            result = make_plots("--results", FIXTURE, "--out", self.tmp / "out", "--no-readmes",
                                "--configs", path)
            self.assert_fails_naming(result, str(path))
            self.assertIn(message, result.stderr)


class MalformedInput(PlotTestCase):
    def results_with(self, name, text):
        """A results folder 'gpu' holding one file."""
        (self.tmp / "results" / "gpu").mkdir(parents=True)
        path = self.tmp / "results" / "gpu" / name
        path.write_text(text)
        return path

    def run_on(self, *extra):
        return make_plots("--results", self.tmp / "results", "--out", self.tmp / "out", *extra)

    def test_bench_not_json(self):
        path = self.results_with("bench.json", '{"benchmarks": [')
        self.assert_fails_naming(self.run_on("--no-readmes"), str(path))

    def test_bench_entry_without_a_counter(self):
        bench = json.loads((FIXTURE / "synthetic-gpu" / "bench.json").read_text())
        del bench["benchmarks"][1]["median_ms"]
        path = self.results_with("bench.json", json.dumps(bench))
        result = self.run_on("--no-readmes")
        self.assert_fails_naming(result, str(path))
        self.assertIn("'median_ms'", result.stderr)

    def test_jsonl_bad_line(self):
        good = (FIXTURE / "synthetic-gpu" / "canonical.jsonl").read_text()
        path = self.results_with("canonical.jsonl", good + "{not json\n")
        self.assert_fails_naming(self.run_on("--no-readmes"),
                                 f"{path}:{len(good.splitlines()) + 1}")

    def test_readme_without_table_markers(self):
        readmes = self.tmp / "readmes"
        readmes.mkdir()
        (readmes / "README.md").write_text("# no markers here\n")
        result = make_plots("--results", FIXTURE, "--out", self.tmp / "out", "--readme-gpu",
                            "synthetic-gpu", "--readme-root", readmes)
        self.assert_fails_naming(result, str(readmes / "README.md"))
        self.assertIn("results-table", result.stderr)

    def test_missing_readme_gpu_folder(self):
        result = make_plots("--results", FIXTURE, "--out", self.tmp / "out", "--readme-gpu",
                            "no-such-gpu", "--readme-root", self.tmp)
        self.assert_fails_naming(result, "no-such-gpu")


# ---------------------------------------------------------------------------------------------
# What a reader sees: unsupported points, labels off the reference lines, progress lines
# ---------------------------------------------------------------------------------------------


def unsupported_marks(ax):
    """{(colour, x)} of the unsupported marks (×) of one panel."""
    return {(mp.to_hex(line.get_color()), float(x)) for line in ax.get_lines()
            if line.get_gid() == mp.UNSUPPORTED_POINT_GID for x in line.get_xdata()}


def skipped_points(results, group, keep=lambda m: True, kind="forward"):
    """{(colour, x)} that a sweep figure must mark: the skipped entries of `group` (of one
    kind, standard configs), the colour of the series' line."""
    series = mp.sweep_series(results, group, kind)
    colors = mp.stage_colors(results.stages())
    precisions = mp.sweep_precisions(series)
    x_of = (lambda m: m.config.hidden) if group == "hidden_sweep" else (lambda m: m.config.batch)
    return {(mp.to_hex(mp.line_style(key, colors, precisions)["color"]), float(x_of(m)))
            for key, ms in series.items() for m in ms if not m.supported and keep(m)}


def legend_labels(fig):
    return [text.get_text() for legend in fig.legends for text in legend.get_texts()]


class UnsupportedPoints(PlotTestCase):
    """Skipped ('unsupported: ...') entries are marked, not silently left out."""

    def setUp(self):
        super().setUp()
        self.results = mp.load_results(FIXTURE / "synthetic-gpu")

    def test_the_fixture_has_unsupported_sweep_points(self):
        skipped = {(m.impl, m.group, m.config.hidden) for m in self.results.bench
                   if not m.supported}
        self.assertIn(("forward/10_small_batch_registers", "hidden_sweep", 2048), skipped)
        self.assertIn(("cudnn_persist_static", "hidden_sweep", 2048), skipped)
        self.assertIn(("forward/10_small_batch_registers", "batch_sweep", 1024), skipped)

    def test_hidden_sweep_marks_them_in_the_series_colour(self):
        fig = mp.figure_hidden_sweep(self.results)
        [ax] = fig.axes
        colors = mp.stage_colors(self.results.stages())
        marks = unsupported_marks(ax)
        self.assertIn((colors["forward/10_small_batch_registers"], 2048.0), marks)
        self.assertIn((mp.to_hex(mp.CUDNN_STYLES[1][0]), 2048.0), marks)  # persist_static
        self.assertEqual(marks, skipped_points(self.results, "hidden_sweep"))
        notes = [t.get_text() for t in ax.texts if t.get_gid() == mp.UNSUPPORTED_NOTE_GID]
        self.assertIn("forward/10_small_batch_registers · FP32: not supported", notes)
        self.assertIn("cuDNN persist_static · FP32: not supported", notes)
        self.assertIn(mp.UNSUPPORTED_LEGEND, legend_labels(fig))
        self.assertIn("2048", [tick.get_text() for tick in ax.get_xticklabels()])

    def test_marks_lie_below_every_measured_point(self):
        fig = mp.figure_hidden_sweep(self.results)
        [ax] = fig.axes
        fig.draw_without_rendering()
        measured = [y for line in ax.get_lines() if line.get_gid() != mp.UNSUPPORTED_POINT_GID
                    for y in line.get_ydata()]
        lowest_px = min(ax.transData.transform((1, y))[1] for y in measured)
        for line in ax.get_lines():
            if line.get_gid() == mp.UNSUPPORTED_POINT_GID:
                for x, y in zip(line.get_xdata(), line.get_ydata()):
                    mark_px = line.get_transform().transform((x, y))
                    self.assertLess(mark_px[1], lowest_px)
                    self.assertGreater(mark_px[1], ax.bbox.y0)  # inside the panel
                    self.assertTrue(ax.bbox.x0 < mark_px[0] < ax.bbox.x1)

    def test_batch_sweep_and_persistent_mark_them_in_their_panel(self):
        for function in (mp.figure_batch_sweep, mp.figure_persistent):
            fig = function(self.results)
            panels = {ax.get_title(): ax for ax in fig.axes}
            color = mp.stage_colors(self.results.stages())["forward/10_small_batch_registers"]
            self.assertIn((color, 256.0), unsupported_marks(panels["H = 1024"]),
                          function.__name__)
            self.assertEqual(unsupported_marks(panels["H = 512"]), set(), function.__name__)
            self.assertIn(mp.UNSUPPORTED_LEGEND, legend_labels(fig))
        fig = mp.figure_batch_sweep(self.results)
        panel = {ax.get_title(): ax for ax in fig.axes}["H = 1024"]
        self.assertEqual(unsupported_marks(panel), skipped_points(
            self.results, "batch_sweep", keep=lambda m: m.config.hidden == 1024))

    def test_a_failed_point_says_so(self):
        """A run that failed (not a refused size) is marked too, and its note says failed."""
        def fail(m):
            if (m.impl, m.group, m.config.hidden) == ("forward/10_small_batch_registers",
                                                      "hidden_sweep", 2048):
                return dataclasses.replace(
                    m, unsupported="the pass left NaN/Inf or unwritten elements in y")
            return m
        self.results.bench = [fail(m) for m in self.results.bench]
        fig = mp.figure_hidden_sweep(self.results)
        [ax] = fig.axes
        notes = [t.get_text() for t in ax.texts if t.get_gid() == mp.UNSUPPORTED_NOTE_GID]
        self.assertIn("forward/10_small_batch_registers · FP32: failed in this run", notes)
        self.assertIn("cuDNN persist_static · FP32: not supported", notes)

    def test_a_point_without_an_entry_stays_absent(self):
        """Not measured (no entry) is not 'not supported': neither a mark nor a point."""
        self.results.bench = [m for m in self.results.bench
                              if not (m.impl == "forward/10_small_batch_registers"
                                      and m.group == "hidden_sweep" and m.config.hidden == 2048)]
        fig = mp.figure_hidden_sweep(self.results)
        [ax] = fig.axes
        color = mp.stage_colors(self.results.stages())["forward/10_small_batch_registers"]
        marks = unsupported_marks(ax)
        self.assertNotIn((color, 2048.0), marks)
        self.assertIn((mp.to_hex(mp.CUDNN_STYLES[1][0]), 2048.0), marks)
        [line] = [line for line in ax.get_lines()
                  if line.get_label() == "forward/10_small_batch_registers · FP32"]
        self.assertNotIn(2048, list(line.get_xdata()))

    def test_no_mark_and_no_legend_entry_without_unsupported_points(self):
        self.results.bench = [m for m in self.results.bench if m.supported]
        for function in (mp.figure_batch_sweep, mp.figure_persistent, mp.figure_hidden_sweep):
            fig = function(self.results)
            self.assertEqual(set().union(*map(unsupported_marks, fig.axes)), set())
            self.assertNotIn(mp.UNSUPPORTED_LEGEND, legend_labels(fig))

    def test_committed_results_mark_every_skipped_point(self):
        results = mp.load_results(ROOT / "results" / "h100-sxm")
        fig = mp.figure_hidden_sweep(results)
        self.assertEqual(unsupported_marks(fig.axes[0]), skipped_points(results, "hidden_sweep"))
        fig = mp.figure_batch_sweep(results)
        for ax in fig.axes:
            hidden = int(ax.get_title().split("= ")[1])
            self.assertEqual(unsupported_marks(ax), skipped_points(
                results, "batch_sweep", keep=lambda m, h=hidden: m.config.hidden == h))


def crossed_labels(fig):
    """The value labels (and 'unsupported' notes) of canonical.png that a reference line
    crosses: [(label, line's y in data coordinates)], after the figure's layout."""
    fig.draw_without_rendering()
    crossed = []
    for ax in fig.axes:
        lines = [line.get_ydata()[0] for line in ax.get_lines()
                 if line.get_gid() == mp.REFERENCE_LINE_GID]
        for text in ax.texts:
            if text.get_gid() not in (mp.VALUE_LABEL_GID, mp.UNSUPPORTED_LABEL_GID):
                continue
            box = text.get_window_extent()
            for y in lines:
                line_px = ax.transData.transform((0, y))[1]
                if box.y0 - 1 <= line_px <= box.y1 + 1:
                    crossed.append((text.get_text(), y))
    return crossed


def value_labels(fig):
    return [text for ax in fig.axes for text in ax.texts if text.get_gid() in
            (mp.VALUE_LABEL_GID, mp.UNSUPPORTED_LABEL_GID)]


ELEVEN_FORWARD_STAGES = ("00_naive", "01_combined_gemms", "02_streams", "03_fused_pointwise",
                         "04_transposed_weights", "05_layer_wavefront", "06_cuda_graph",
                         "07_persistent_barrier", "08_published_h", "09_register_tiled",
                         "10_small_batch_registers")


class CanonicalTickLabels(PlotTestCase):
    """However many stages a canonical figure holds, no tick label overlaps its neighbour."""

    def eleven_stages(self, kind):
        series = "training" if kind == "training" else "forward"
        entries = [tiny_entry(f"{series}/{slug}", kind, 50.0 - i,
                              *((20.0, 30.0 - i) if kind == "training" else ()))
                   for i, slug in enumerate(ELEVEN_FORWARD_STAGES)]
        suffix = "_training" if kind == "training" else ""
        entries.append(tiny_entry(f"cudnn_standard{suffix}", kind, 9.0,
                                  *((4.0, 5.0) if kind == "training" else ())))
        return tiny_folder(self.tmp, entries)

    def test_forward_series_of_eleven_stages(self):
        fig = mp.figure_canonical(self.eleven_stages("forward"))
        for ax in fig.axes:
            self.assertFalse(mp.tick_labels_overlap(fig, ax), ax.get_title())

    def test_training_series_of_eleven_stages(self):
        fig = mp.figure_training_canonical(self.eleven_stages("training"))
        for ax in fig.axes:
            self.assertFalse(mp.tick_labels_overlap(fig, ax), ax.get_title())

    def test_the_check_sees_an_overlap(self):
        """The test above can fail: with the labels set back to two straight lines, they touch."""
        results = self.eleven_stages("forward")
        fig = mp.figure_canonical(results)
        ax = fig.axes[0]
        view = mp.canonical_view(results)
        ax.set_xticks(ax.get_xticks(), [mp.stage_tick_label(m, view, 11) for m in view.stages],
                      rotation=0, ha="center", fontsize=8)
        self.assertTrue(mp.tick_labels_overlap(fig, ax))


class CanonicalLabels(PlotTestCase):
    """No reference line (cuDNN's fastest, PyTorch) strikes through a bar's value label."""

    def assert_no_label_crossed(self, fig):
        labels = value_labels(fig)
        self.assertTrue(labels, "no value label found")
        self.assertEqual(crossed_labels(fig), [])
        for text in labels:  # and every label is inside its panel, and not under its legend
            box, panel = text.get_window_extent(), text.axes.bbox
            self.assertTrue(panel.y0 <= box.y0 and box.y1 <= panel.y1, text.get_text())
            self.assertFalse(mp.under_legend(text), f"{text.get_text()} is under the legend")

    def test_committed_results(self):
        """The committed data put 04's speedup (10.44×) right under cuDNN's line (10.66×)."""
        results = mp.load_results(ROOT / "results" / "h100-sxm")
        self.assert_no_label_crossed(mp.figure_canonical(results))

    def test_synthetic_results(self):
        self.assert_no_label_crossed(mp.figure_canonical(mp.load_results(FIXTURE /
                                                                         "synthetic-gpu")))

    def test_committed_training_results(self):
        """The committed training run put stage 05's speedup (16.12×) under the legend."""
        results = mp.load_results(ROOT / "results" / "h100-sxm")
        self.assert_no_label_crossed(mp.figure_training_canonical(results))

    def test_a_tall_bar_under_the_legend_is_moved_out(self):
        """A stage far faster than the rest puts its label where the legend sits; the panel
        grows until it is clear (and the test sees the overlap where the panel does not grow)."""
        entries = [tiny_entry("forward/00_naive", "forward", 30.0),
                   tiny_entry("forward/01_combined_gemms", "forward", 1.5),
                   *(tiny_entry(f"forward/0{n}_stage", "forward", 25.0) for n in range(2, 8)),
                   tiny_entry("cudnn_standard", "forward", 2.0)]
        # PyTorch's line too: a legend of two lines
        fig = mp.figure_canonical(tiny_folder(self.tmp, entries, pytorch=[tiny_record(2.5)]))
        self.assert_no_label_crossed(fig)
        speed = fig.axes[1]
        tallest = max((t for t in speed.texts if t.get_gid() == mp.VALUE_LABEL_GID),
                      key=lambda t: float(t.get_text().rstrip("×")))
        low, _ = speed.get_ylim()
        speed.set_ylim(low, 20.0 * 1.15)  # the panel as it was drawn before it grew
        fig.draw_without_rendering()
        mp.place_label(tallest, mp.LABEL_ABOVE)
        fig.draw_without_rendering()
        self.assertTrue(mp.under_legend(tallest), "the case does not exercise the legend")

    def test_lines_right_at_the_bar_tops(self):
        """PyTorch's time a hair above one stage's, cuDNN's a hair below another's: both lines
        run where the labels would sit on the bars; the labels are moved off them."""
        results = mp.load_results(FIXTURE / "synthetic-gpu")
        view = mp.canonical_view(results)
        near_pytorch = view.stage("forward/04_transposed_weights")
        near_cudnn = view.stage("forward/06_cuda_graph")
        results.pytorch = [dataclasses.replace(m, median_ms=near_pytorch.median_ms * 1.01)
                           if m.config == view.config else m for m in results.pytorch]
        best = view.fastest_cudnn()
        results.bench = [dataclasses.replace(m, median_ms=near_cudnn.median_ms * 0.99)
                         if m is best else m for m in results.bench]
        fig = mp.figure_canonical(results)
        self.assert_no_label_crossed(fig)
        # The case is exercised: with every label back on top of its bar, lines cross some.
        for text in value_labels(fig):
            if text.get_gid() == mp.VALUE_LABEL_GID:
                mp.place_label(text, mp.LABEL_ABOVE)
        self.assertTrue(crossed_labels(fig), "the lines cross no label on top of its bar: the "
                                             "test does not exercise the placement")

    def test_unsupported_stage_note(self):
        """The note in place of an unsupported stage's bar is kept off the lines too."""
        results = mp.load_results(FIXTURE / "synthetic-gpu")
        results.bench = [dataclasses.replace(m, unsupported="unsupported: synthetic")
                         if m.impl == "forward/03_fused_pointwise" and m.group == "canonical"
                         else m for m in results.bench]
        fig = mp.figure_canonical(results)
        self.assertIn("unsupported", [t.get_text() for t in value_labels(fig)])
        self.assert_no_label_crossed(fig)

    def test_reference_lines_are_drawn(self):
        results = mp.load_results(ROOT / "results" / "h100-sxm")
        fig = mp.figure_canonical(results)
        view = mp.canonical_view(results)
        [ms_panel, speed_panel] = fig.axes
        ys = sorted(line.get_ydata()[0] for line in ms_panel.get_lines()
                    if line.get_gid() == mp.REFERENCE_LINE_GID)
        self.assertEqual(ys, sorted([view.fastest_cudnn().median_ms, view.pytorch.median_ms]))
        self.assertEqual(len([line for line in speed_panel.get_lines()
                              if line.get_gid() == mp.REFERENCE_LINE_GID]), 2)
        self.assertFalse(any(math.isnan(y) for y in ys))


class Progress(PlotTestCase):
    """The script says what it does before each step, not only after it."""

    def test_a_line_before_each_step(self):
        readmes = self.tmp / "readmes"
        readmes.mkdir()
        readme_copy(readmes)
        result = make_plots("--results", FIXTURE, "--out", self.tmp / "out", "--readme-gpu",
                            "synthetic-gpu", "--readme-root", readmes)
        self.assert_ok(result)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], "plots: loading matplotlib ...")
        self.assertEqual(lines[-1], "plots: done")

        def index(start):
            found = [i for i, line in enumerate(lines) if line.startswith(start)]
            self.assertTrue(found, f"no line starting {start!r}:\n{result.stdout}")
            return found[0]

        for folder in ("synthetic-gpu", "synthetic-no-bench"):
            reading = index(f"plots: reading plots/testdata/synthetic/{folder} (")
            for name in ALL_FIGURES:
                drawing = [i for i, line in enumerate(lines) if i > reading
                           and line == f"plots: drawing {name} ..."][0]
                outcome = lines[drawing + 1]
                self.assertRegex(outcome, rf"^plots: (wrote .*{folder}/{name}|"
                                          rf".*{folder}/{name} not drawn: .+)$")
        rewriting = index("plots: rewriting the README tables from "
                          "plots/testdata/synthetic/synthetic-gpu ...")
        self.assertGreater(rewriting, index("plots: reading plots/testdata/synthetic/"
                                            "synthetic-no-bench ("))
        self.assertTrue(lines[rewriting + 1].startswith("plots: rewrote "))


if __name__ == "__main__":
    unittest.main(verbosity=2)
