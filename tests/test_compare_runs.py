"""scripts/compare_runs.py on two small synthetic bench runs written to a temporary folder: the
median of the repetitions (aggregates and skipped entries left out), the differences and their
marks, the canonical rows, the summary lines, and bad input as exit 2 naming the file.

usage: python test_compare_runs.py [PATH/TO/compare_runs.py]
"""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(sys.argv[1] if len(sys.argv) > 1 else
              Path(__file__).resolve().parents[1] / "scripts" / "compare_runs.py")
CANONICAL = "canonical/H:512/I:512/B:64/T:100/L:4"
SWEEP = "batch_sweep/H:512/I:512/B:8/T:100/L:1"


def entries(impl, config, medians, suffix="iterations:10/manual_time"):
    """One benchmark's repetitions, then an aggregate that must not be used."""
    run_name = f"{impl}/{config}/{suffix}"
    runs = [{"name": run_name, "run_name": run_name, "run_type": "iteration",
             "repetitions": len(medians), "repetition_index": i, "median_ms": ms}
            for i, ms in enumerate(medians)]
    return runs + [{"name": run_name + "_median", "run_name": run_name, "run_type": "aggregate",
                    "aggregate_name": "median", "median_ms": 1000.0}]


def run_a():
    return (entries("forward/00_naive", CANONICAL, [10.0, 9.0, 100.0])  # median 10
            + entries("forward/01_combined_gemms", CANONICAL, [20.0, 20.0, 20.0])
            + entries("forward/01_combined_gemms", SWEEP, [5.0, 5.0, 5.0])
            + entries("forward/02_streams", CANONICAL, [7.0, 7.0, 7.0])
            + entries("cudnn_standard", CANONICAL, [8.0, 8.0, 8.0])
            + entries("cudnn_persist_static", CANONICAL, [9.0, 9.0, 9.0])
            + [{"name": "fp32_fma_peak/iterations:1/manual_time", "run_type": "iteration",
                "tflops": 50.0}])


def run_b():  # other passes per repetition: the names still match
    suffix = "iterations:4/repeats:5/manual_time"
    skipped = entries("forward/02_streams", CANONICAL, [7.0], suffix)[0]
    skipped.update(error_occurred=True, error_message="unsupported: ...", median_ms=0.0)
    return (entries("forward/00_naive", CANONICAL, [10.4, 10.3, 1.0], suffix)  # median 10.3
            + entries("forward/01_combined_gemms", CANONICAL, [22.0, 22.0, 22.0], suffix)
            + entries("forward/01_combined_gemms", SWEEP, [4.0, 4.0, 4.0], suffix)
            + entries("cudnn_standard", CANONICAL, [8.2, 8.2, 8.2], suffix)
            + entries("cudnn_persist_static", CANONICAL, [9.9, 9.9, 9.9], suffix) + [skipped])


class CompareRuns(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.addCleanup(self.folder.cleanup)
        self.a, self.b = Path(self.folder.name) / "a.json", Path(self.folder.name) / "b.json"
        self.a.write_text(json.dumps({"context": {}, "benchmarks": run_a()}))
        self.b.write_text(json.dumps({"context": {}, "benchmarks": run_b()}))

    def compare(self, *args):
        return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)],
                              capture_output=True, text=True, timeout=60)

    def row(self, out, impl, config):
        lines = [line for line in out.splitlines() if f" {impl}/{config} " in line + " "]
        self.assertEqual(len(lines), 1, f"one row for {impl}/{config} in:\n{out}")
        return lines[0]

    def test_medians_differences_and_marks(self):
        result = self.compare(self.a, self.b)
        self.assertEqual(result.returncode, 0, result.stderr)
        out = result.stdout
        naive = self.row(out, "forward/00_naive", CANONICAL)
        self.assertRegex(naive, r"^> .* 10\.000 +10\.300 +\+3\.0%$")  # medians, not aggregates
        gemms = self.row(out, "forward/01_combined_gemms", CANONICAL)
        self.assertRegex(gemms, r"^> .* 20\.000 +22\.000 +\+10\.0% BEYOND$")
        sweep = self.row(out, "forward/01_combined_gemms", SWEEP)
        self.assertRegex(sweep, r"^  .* -20\.0% BEYOND$")  # beyond, but not a canonical row
        self.assertRegex(self.row(out, "cudnn_standard", CANONICAL), r"^> .* \+2\.5%$")
        static = self.row(out, "cudnn_persist_static", CANONICAL)
        self.assertRegex(static, r"^  .* \+10\.0% BEYOND$")  # not cuDNN's fastest: not marked
        self.assertNotIn("forward/02_streams", out)  # skipped in B: only in A
        self.assertNotIn("fp32_fma_peak", out)
        self.assertIn("\nall: 5 compared, 3 beyond 5%; worst -20.0% (forward/01_combined_gemms/"
                      f"{SWEEP}); 1 only in A, 0 only in B\n", out)
        self.assertIn("\ncanonical (> rows): 3 compared, 1 beyond 5%; worst +10.0% "
                      f"(forward/01_combined_gemms/{CANONICAL})\n", out)

    def test_threshold(self):
        result = self.compare(self.a, self.b, "--threshold", "25")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("BEYOND", result.stdout)
        self.assertIn("all: 5 compared, 0 beyond 25%", result.stdout)

    def test_bad_input_is_exit_2_naming_the_file(self):
        not_json = Path(self.folder.name) / "notes.txt"
        not_json.write_text("not json\n")
        no_list = Path(self.folder.name) / "list.json"
        no_list.write_text("[1, 2]")
        missing = Path(self.folder.name) / "missing.json"
        for bad in (not_json, no_list, missing):
            result = self.compare(self.a, bad)
            self.assertEqual(result.returncode, 2, f"{bad.name}: {result.stdout}{result.stderr}")
            self.assertIn(str(bad), result.stderr)
            self.assertEqual(result.stdout, "")
        self.assertEqual(self.compare(self.a, self.b, "--threshold", "0").returncode, 2)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
