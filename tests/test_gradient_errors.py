"""scripts/gradient_errors.py on a hand-written fixture (tests/data/gradient_errors_fixture.jsonl:
eight records in the format the stages and lstm_cudnn append, one written by
scripts/gradient_errors.sh from a failed check's output, one of a run not checked, one of cuDNN
with NaN in dx): cuDNN's
largest errors over its algorithms, shapes and layers, the stages' ratios to them, the proposed
bounds rounded up to 2 significant digits (an exact 1.2e-3 stays, 7.21e-4 becomes 7.3e-4), records
with no value to take (cuDNN's only tensor NaN, no tensor, every tensor missing), and a malformed
or non-UTF-8 file as exit 1 naming its line.

usage: python test_gradient_errors.py [PATH/TO/gradient_errors.py]
"""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "scripts" / "gradient_errors.py")
FIXTURE = ROOT / "tests" / "data" / "gradient_errors_fixture.jsonl"


def summarise(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=60)


class GradientErrors(unittest.TestCase):
    def table_rows(self, out, precision):
        """{tensor: [cells]} of the markdown table under ### PRECISION."""
        section = out.split(f"### {precision}\n", 1)[1].split("\n### ", 1)[0]
        lines = [line for line in section.splitlines() if line.startswith("| ")]
        return {cells[0]: cells[1:] for cells in
                ([c.strip() for c in line.strip("|").split("|")] for line in lines[1:])}

    def test_table(self):
        result = summarise(FIXTURE)
        self.assertEqual(result.returncode, 0, result.stderr)
        fp16 = self.table_rows(result.stdout, "FP16")
        self.assertEqual(list(fp16), ["y", "dx", "grad_weight_ih", "grad_bias"])
        # cuDNN's largest (standard at one shape, persist_static at the other), stage 10, stage 12
        # (its record written from a failed check), proposed bound, the bound checked against
        self.assertEqual(fp16["dx"], ["1.20e-03", "4.00e-03", "2.40e-03 (2.00×)",
                                      "1.00e-03 (0.25×)", "2.50e-03 (2.08×)", "5.00e-03 (1.25×)",
                                      "1.2e-03 / 4.0e-03", "2.0e-03 / 2.0e-02"])
        # layers 0 and 1 together: the largest is layer 1's of cuDNN standard
        self.assertEqual(fp16["grad_weight_ih"][:2], ["7.21e-04", "3.00e-02"])
        self.assertEqual(fp16["grad_weight_ih"][-2], "7.3e-04 / 3.0e-02")
        # grad_bias_ih and grad_bias_hh together; stage 12's was missing: no value
        self.assertEqual(fp16["grad_bias"][:2], ["1.01e-03", "5.00e-02"])
        self.assertEqual(fp16["grad_bias"][4:7], ["—", "—", "1.1e-03 / 5.0e-02"])
        bf16 = self.table_rows(result.stdout, "BF16")
        self.assertEqual(list(bf16), ["y", "dx"])  # the unchecked cuDNN record adds nothing
        self.assertEqual(bf16["y"], ["2.40e-03", "1.90e-02", "1.20e-03 (0.50×)",
                                     "9.50e-03 (0.50×)", "2.4e-03 / 1.9e-02", "8.0e-03 / 8.0e-02"])
        self.assertEqual(bf16["dx"][2], "inf (inf×)")  # NaN/Inf in the stage's dx
        self.assertIn("training/10_tensor_cores rel. norm (× cuDNN)", result.stdout)
        # cuDNN's NaN in dx (persist_dynamic) is left out of its largest, and named
        self.assertIn("- cudnn_persist_dynamic_fp16_training fp16 H=", result.stdout)
        self.assertTrue(result.stdout.rstrip().endswith(": dx"), result.stdout[-200:])

    def test_json_bounds_rounded_up(self):
        result = summarise("--json", FIXTURE)
        self.assertEqual(result.returncode, 0, result.stderr)
        bounds = json.loads(result.stdout)
        self.assertEqual(sorted(bounds), ["bf16", "fp16"])
        self.assertEqual(sorted(bounds["fp16"]), ["dx", "grad_bias", "grad_weight_ih", "y"])
        self.assertEqual(bounds["fp16"]["dx"], {"relative_norm": 1.2e-3, "max_absolute": 4e-3})
        self.assertEqual(bounds["fp16"]["grad_weight_ih"]["relative_norm"], 7.3e-4)
        self.assertEqual(bounds["fp16"]["grad_bias"]["relative_norm"], 1.1e-3)
        self.assertEqual(bounds["bf16"]["dx"], {"relative_norm": 4.1e-3, "max_absolute": 3.1e-2})

    def test_malformed_file_is_exit_1_naming_the_line(self):
        with tempfile.TemporaryDirectory() as folder:
            bad = Path(folder) / "bad.jsonl"
            lines = FIXTURE.read_text().splitlines()
            bad.write_text("\n".join(lines[:2] + [lines[2][:80]] + lines[3:]) + "\n")
            result = summarise(bad)
            self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
            self.assertIn(f"{bad}:3: not a record of a checked run", result.stderr)
            self.assertEqual(result.stdout, "")
            bad.write_text(lines[0].replace('"relative_norm":0.0003', '"relative_norm":"small"'))
            result = summarise(bad)
            self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
            self.assertIn(f"{bad}:1:", result.stderr)

    def test_records_without_a_value_to_take(self):
        sizes = {"hidden": 2, "input_size": 3, "batch": 1, "seq_len": 4, "layers": 1}
        nan_y = {"relative_norm": None, "max_absolute": None, "nonfinite": 3, "missing": False,
                 "bound": {"relative_norm": 1e-3, "max_absolute": 1e-2}}
        records = {  # cuDNN's only y NaN; no tensor; every tensor missing
            "cudnn_nan": {"stage": "cudnn_standard_fp16_training", "tensors": {"y": nan_y}},
            "no_tensor": {"stage": "training/10_tensor_cores", "tensors": {}},
            "missing": {"stage": "training/10_tensor_cores", "tensors": {"y": {"missing": True}}}}
        with tempfile.TemporaryDirectory() as folder:
            for name, record in records.items():
                path = Path(folder) / f"{name}.jsonl"
                path.write_text(json.dumps({**sizes, "stage": record["stage"], "precision": "fp16",
                                            "check": {"performed": True,
                                                      "tensors": record["tensors"]}}) + "\n")
                for args in ((path,), ("--json", path)):
                    with self.subTest(name, args=args[:-1]):
                        result = summarise(*args)
                        self.assertEqual(result.returncode, 0, result.stderr)
                        self.assertEqual(result.stderr, "")
            nan = Path(folder) / "cudnn_nan.jsonl"  # named below the table; no bound proposed
            self.assertIn("- cudnn_standard_fp16_training fp16 H=2 I=3 B=1 T=4 L=1: y",
                          summarise(nan).stdout)
            self.assertEqual(json.loads(summarise("--json", nan).stdout), {})

    def test_a_file_that_is_not_utf_8_is_named(self):
        with tempfile.TemporaryDirectory() as folder:
            bad = Path(folder) / "bad.jsonl"
            bad.write_bytes(FIXTURE.read_bytes() + b'{"stage": "\xff"}\n')
            result = summarise(bad)
            self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
            self.assertIn(f"{bad}:{len(FIXTURE.read_text().splitlines()) + 1}: ", result.stderr)

    def test_usage_error_is_exit_2(self):
        self.assertEqual(summarise().returncode, 2)
        self.assertEqual(summarise("--bogus", FIXTURE).returncode, 2)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
