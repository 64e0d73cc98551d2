#!/usr/bin/env python3
"""Tests of plots/make_plots.py, run by CTest (label cpu; no GPU needed).

1. The committed results/: every figure its data allows is written (non-empty PNG), every other
   one is reported as not drawn, and results/ itself is left untouched.
2. The SYNTHETIC fixture (plots/testdata/synthetic/, made by make_synthetic.py; never read by
   the real pipeline): all four figures, the README table and the stage sections, written to a
   temporary copy of README.md and stages/*/README.md (--readme-root).
3. Reproducible PNG bytes; malformed input exits non-zero with a message naming the file.

usage: .venv/bin/python plots/test_plots.py [-v]
"""
import hashlib
import json
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
ALL_FIGURES = ("canonical.png", "batch_sweep.png", "hidden_sweep.png", "fp32_fraction.png")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def make_plots(*args):
    """Runs make_plots.py; returns the CompletedProcess (text output)."""
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def tree_digest(folder):
    """{relative path: sha256} of every file under `folder`."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def readme_copy(destination):
    """A copy of README.md and stages/*/README.md, plus two made-up stage READMEs with both
    stage markers (one for a stage the fixture measured, one for a stage it did not)."""
    shutil.copy(ROOT / "README.md", destination / "README.md")
    for readme in (ROOT / "stages").glob("*/README.md"):
        (destination / "stages" / readme.parent.name).mkdir(parents=True)
        shutil.copy(readme, destination / "stages" / readme.parent.name / "README.md")
    markers = ("# made up by plots/test_plots.py\n\n<!-- stage-result:begin -->\nstale\n"
               "<!-- stage-result:end -->\n\n<!-- stage-batch-sweep:begin -->\nstale\n"
               "<!-- stage-batch-sweep:end -->\n")
    for stage in ("07_persistent", "99_not_measured"):
        (destination / "stages" / stage).mkdir(parents=True, exist_ok=True)
        (destination / "stages" / stage / "README.md").write_text(markers)


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
            # bench.json makes all four; without it, the stages' checked runs or PyTorch's
            # record make canonical.png and the rest is reported as not drawn.
            expected = ALL_FIGURES if (folder / "bench.json").is_file() else ("canonical.png",)
            for name in ALL_FIGURES:
                png = self.tmp / folder.name / name
                if name in expected:
                    self.assert_png(png)
                    self.assertRegex(result.stdout, rf"wrote .*{folder.name}/{name}\n")
                else:
                    self.assertFalse(png.exists())
                    self.assertRegex(result.stdout, rf"{folder.name}/{name} not drawn: .+")


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
        for row in ("| 00_naive | 73.099 | 1.47 | 1.00× | – | 18.93× |",
                    "| 01_combined_gemms | 29.871 | 3.59 | 2.45× | 2.45× | 7.73× |",
                    "| 07_persistent | 3.320 | 32.34 | 22.02× | 1.73× | 0.86× |",
                    "| cuDNN persist_static **(fastest cuDNN)** | 3.862 | 27.80 | 18.93× | – "
                    "| 1.00× |",
                    "| cuDNN persist_dynamic | unsupported | – | – | – | – |",
                    # the last record of a config wins (the first one is 3× slower)
                    "| PyTorch nn.LSTM | 6.862 | 15.65 | 10.65× | – | 1.78× |",
                    "`plots/testdata/synthetic/synthetic-gpu/bench.json`"):
            self.assertIn(row, table)
        self.assertEqual(table.count("<!-- results-table:begin -->"), 1)

        naive = (readmes / "stages" / "00_naive" / "README.md").read_text()
        self.assertIn("**73.10 ms** median of 20 runs (min 70.91, max 77.49), 1.47 TFLOP/s, "
                      "182.7 µs per step and layer", naive)
        self.assertIn("(latest run in `canonical.jsonl`): passed", naive)
        persistent = (readmes / "stages" / "07_persistent" / "README.md").read_text()
        self.assertIn("Speedup 22.02× over `00_naive`, 1.73× over the previous stage "
                      "`06_cuda_graph`", persistent)
        self.assertIn("0.86× that of cuDNN's fastest algorithm (`cudnn_persist_static`, "
                      "3.86 ms)", persistent)
        self.assertIn("| 256 | 35.3 | 39.5 (persist_static) | unsupported | 146.0 "
                      "(persist_static) |", persistent)
        self.assertNotIn("stale", persistent)
        missing = (readmes / "stages" / "99_not_measured" / "README.md").read_text()
        self.assertEqual(missing.count("Not measured yet"), 2)

    def test_png_bytes_are_reproducible(self):
        for out in ("a", "b"):
            self.assert_ok(make_plots("--results", FIXTURE, "--out", self.tmp / out,
                                      "--no-readmes"))
        self.assertEqual(tree_digest(self.tmp / "a"), tree_digest(self.tmp / "b"))


class BenchParsing(PlotTestCase):
    """Google Benchmark's repetitions: aggregates beside the runs, or the aggregates alone."""

    def load(self, entries):
        sys.path.insert(0, str(ROOT / "plots"))
        import make_plots
        folder = self.tmp / "gpu"
        folder.mkdir()
        (folder / "bench.json").write_text(json.dumps({"context": {}, "benchmarks": entries}))
        return make_plots.canonical_view(make_plots.load_results(folder)).stage("00_naive")

    def naive_entry(self, **changes):
        bench = json.loads((FIXTURE / "synthetic-gpu" / "bench.json").read_text())
        entry = next(e for e in bench["benchmarks"] if e["name"].startswith("00_naive/canonical"))
        return dict(entry, **changes)

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
        self.assert_fails_naming(self.run_on("--no-readmes"), f"{path}:4")

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


if __name__ == "__main__":
    unittest.main(verbosity=2)
