#!/usr/bin/env python3
"""The files of a training pass, end to end, without a GPU or torch (numpy only):

  1. lstm_reference --training --load FIXTURE --save-inputs IN --dump REF, on the committed training
     fixture (tests/data/pytorch_training_fixture, from torch.nn.LSTM in float64): IN holds every
     input with dy, dhy and dcy unchanged, REF holds y, hy, cy and every gradient under PyTorch's
     names and shapes, each within the FP32 bound of the fixture's value.
  2. The PyTorch script's generator of dy, dhy and dcy (baselines/pytorch/lstm_pytorch.py, used
     when a --training --load folder has none of them) against lstm_reference --training
     --save-inputs, bit for bit, for several seeds and sizes, and across its chunks.
  3. lstm_reference --training with a folder that has only some of dy, dhy, dcy: refused, naming
     them, nothing written.

usage: test_training_files.py LSTM_REFERENCE FIXTURE_DIR PYTORCH_SCRIPT_DIR
Exit 77 (CTest: skipped) where numpy is missing.
"""
import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

try:
    import numpy as np
except ImportError:
    print("test_training_files: SKIPPED (numpy is not installed in this python)")
    sys.exit(77)

REFERENCE, FIXTURE, SCRIPT_DIR = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
sys.path.insert(0, SCRIPT_DIR)
import lstm_pytorch  # noqa: E402  (imports torch only when it runs a pass)

MAX_RELATIVE_NORM, MAX_ABSOLUTE = 1e-5, 1e-4  # the FP32 bound of docs/design.md


def run_reference(*args):
    return subprocess.run([REFERENCE, *map(str, args)], capture_output=True, text=True, timeout=300)


class TrainingFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="lstm_training_files_"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_reference_dump_matches_the_fixture(self):
        inputs, dump = self.tmp / "in", self.tmp / "ref"
        result = run_reference("--training", "--load", FIXTURE, "--save-inputs", inputs, "--dump", dump)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        meta = json.loads((FIXTURE / "meta.json").read_text())
        size = tuple(meta[key] for key in ("hidden", "input_size", "batch", "seq_len", "layers"))
        layouts = lstm_pytorch.output_layouts(size, training=True)
        self.assertEqual(len(layouts), 6 + 4 * size[4])
        self.assertEqual(sorted(p.name for p in dump.iterdir()), sorted(f"{name}.npy" for name, _, _ in layouts))
        for name, shape, _ in layouts:
            with self.subTest(tensor=name):
                out = np.load(dump / f"{name}.npy")
                self.assertEqual(out.dtype, np.dtype("<f4"))
                self.assertEqual(out.shape, shape)
                ref = np.load(FIXTURE / f"{name}.npy").astype(np.float64)
                diff = np.abs(out.astype(np.float64) - ref)
                self.assertLessEqual(np.linalg.norm(diff) / np.linalg.norm(ref), MAX_RELATIVE_NORM)
                self.assertLessEqual(diff.max(), MAX_ABSOLUTE)
        for name in lstm_pytorch.UPSTREAM_NAMES:  # loaded, then saved unchanged
            with self.subTest(upstream=name):
                saved, given = np.load(inputs / f"{name}.npy"), np.load(FIXTURE / f"{name}.npy")
                self.assertEqual(saved.shape, given.shape)
                self.assertTrue(np.array_equal(saved.view(np.uint32), given.view(np.uint32)))

    def test_python_generator_equals_the_cpp_one(self):
        cases = [  # (H, I, B, T, L), seed
            ((13, 7, 3, 6, 3), 1), ((64, 64, 8, 20, 2), 0), ((5, 9, 2, 3, 1), 2**64 - 1),
            ((33, 300, 130, 1, 1), 0x0123456789ABCDEF), ((200, 77, 3, 17, 3), 12345)]
        for (H, I, B, T, L), seed in cases:
            with self.subTest(size=(H, I, B, T, L), seed=seed):
                folder = self.tmp / f"gen_{seed}"
                result = run_reference("--training", "--hidden", H, "--input-size", I, "--batch", B, "--seq", T,
                                       "--layers", L, "--seed", seed, "--save-inputs", folder, "--no-reference")
                self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
                generated = lstm_pytorch.generate_upstream(np, (H, I, B, T, L), seed)
                for name in lstm_pytorch.UPSTREAM_NAMES:
                    saved = np.load(folder / f"{name}.npy")
                    self.assertEqual(saved.shape, generated[name].shape, name)
                    self.assertTrue(np.array_equal(saved.view(np.uint32), generated[name].view(np.uint32)),
                                    f"{name} differs from the C++ generator's")
                # Across chunks: the stream does not restart at a chunk boundary.
                count = T * B * H
                chunked = lstm_pytorch.uniform_unit_tensor(np, count, seed, 4, chunk=97)
                self.assertTrue(np.array_equal(chunked, generated["dy"].ravel()))
                # With --load and no dy, dhy, dcy in the folder, the script generates the same ones.
                loaded, was_generated = lstm_pytorch.load_upstream(np, self.tmp / "no_such_folder",
                                                                   (H, I, B, T, L), seed)
                self.assertTrue(was_generated)
                self.assertTrue(np.array_equal(loaded["dcy"], np.load(folder / "dcy.npy")))

    def test_some_upstream_files_but_not_all_are_refused(self):
        folder = self.tmp / "partial"
        shutil.copytree(FIXTURE, folder)
        (folder / "dhy.npy").unlink()
        out = self.tmp / "out"
        result = run_reference("--training", "--load", folder, "--dump", out)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("dhy.npy", result.stderr)
        self.assertFalse(out.exists())
        # The PyTorch script refuses it the same way, before it needs torch.
        with self.assertRaisesRegex(lstm_pytorch.Failure, r"has dy.npy, dcy.npy but not dhy.npy"):
            lstm_pytorch.load_upstream(np, folder, (11, 7, 3, 5, 3), 1)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
