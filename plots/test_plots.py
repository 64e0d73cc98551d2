#!/usr/bin/env python3
"""Tests of plots/make_plots.py, run by CTest (plots.make_plots, label cpu; no GPU needed).

Most run on the synthetic fixture plots/testdata/synthetic/synthetic-gpu/ (made-up numbers,
3 repetitions per benchmark, shuffled, with aggregate entries that must be ignored); the
expected values are computed here from the raw JSON entries, not through make_plots.
"""
import dataclasses
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from require_modules import require  # noqa: E402

require("numpy", "matplotlib")

import make_plots as mp  # noqa: E402

ROOT = HERE.parent
FIXTURE = HERE / "testdata" / "synthetic"
GPU = FIXTURE / "synthetic-gpu"
CANONICAL = "H:512/I:512/B:64/T:100/L:4/manual_time"


def run_script(*args):
    return subprocess.run([sys.executable, str(HERE / "make_plots.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT)


def reps(name, key, file="bench.json", folder=GPU):
    """The `key` counter of every repetition (iteration entry) of one benchmark."""
    entries = json.loads((folder / file).read_text())["benchmarks"]
    return [e[key] for e in entries if e.get("run_name") == name
            and e.get("run_type") == "iteration"]


def row(table, first_cell):
    """The cells of the table row whose first cell is `first_cell`."""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in\n{table}")


def header(table):
    return [c.strip() for c in table.splitlines()[0].strip("|").split("|")]


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="test_plots_"))
        self.addCleanup(shutil.rmtree, self.tmp)
        self.res = mp.load(GPU)

    def copy_fixture(self):
        shutil.copytree(GPU, self.tmp / "results" / "synthetic-gpu")
        return self.tmp / "results" / "synthetic-gpu"


class Repetitions(Case):
    def test_the_table_reports_the_median_of_the_repetitions(self):
        values = reps(f"forward/00_naive/canonical/{CANONICAL}", "median_ms")
        self.assertEqual(len(values), 3)
        median = statistics.median(values)
        # The fixture is made so that no other statistic would pass.
        for other in (values[0], statistics.mean(values), min(values), max(values)):
            self.assertNotAlmostEqual(median, other, places=3)
        table = mp.canonical_table(self.res, "forward")
        self.assertEqual(row(table, "forward/00_naive")[2], f"{median:.3f}")
        self.assertNotIn("999", table)  # the aggregate entries' numbers, wrong on purpose

    def test_error_bars_span_min_to_max_of_the_repetitions(self):
        fig = mp.figure_batch_sweep(self.res)
        ax = fig.axes[0]  # H = 512
        self.assertEqual(ax.get_title(), "FP32, H=512")
        bars = next(c for c in ax.containers if c.get_label() == "forward/00_naive")
        values = reps("forward/00_naive/batch_sweep/H:512/I:512/B:1/T:100/L:1/manual_time",
                      "us_per_step_layer")
        (x0, low), (x1, high) = bars.lines[2][0].get_segments()[0]  # the bar at B = 1
        self.assertEqual((x0, x1), (1, 1))
        self.assertAlmostEqual(low, min(values))
        self.assertAlmostEqual(high, max(values))
        xs, ys = bars.lines[0].get_data()
        self.assertAlmostEqual(ys[list(xs).index(1)], statistics.median(values))

    def test_one_repetition_is_the_same_schema(self):
        folder = self.copy_fixture()
        doc = json.loads((folder / "bench.json").read_text())
        doc["benchmarks"] = [e for e in doc["benchmarks"] if e.get("repetition_index", 0) == 1]
        (folder / "bench.json").write_text(json.dumps(doc))
        res = mp.load(folder)
        table = mp.canonical_table(res, "forward")
        value = reps(f"forward/00_naive/canonical/{CANONICAL}", "median_ms", folder=folder)
        self.assertEqual(len(value), 1)
        self.assertEqual(row(table, "forward/00_naive")[2], f"{value[0]:.3f}")
        self.assertIn("median of 1 repetition;", table)


class Tables(Case):
    def test_rows_and_ratios_come_from_the_data(self):
        table = mp.canonical_table(self.res, "forward")

        def ms(impl):
            return statistics.median(reps(f"{impl}/canonical/{CANONICAL}", "median_ms"))

        cudnn = min(ms(f"cudnn_{a}") for a in ("standard", "persist_static", "persist_dynamic"))
        stages = ["forward/00_naive", "forward/03_fused_pointwise",
                  "forward/07_persistent_barrier", "forward/09_register_tiled"]
        self.assertEqual(header(table)[4], "speedup over `forward/00_naive`")
        for before, stage in zip([None] + stages, stages):
            cells = row(table, stage)
            self.assertEqual(cells[1], "FP32")
            self.assertEqual(cells[4], f"{ms(stages[0]) / ms(stage):.2f}×")
            self.assertEqual(cells[5], f"{ms(before) / ms(stage):.2f}×" if before else "–")
            self.assertEqual(cells[6], f"{ms(stage) / cudnn:.2f}×")
        self.assertEqual(row(table, "cuDNN persist_dynamic **(fastest cuDNN)**")[6], "1.00×")

    def test_precisions_are_labelled_and_not_compared_with_each_other(self):
        cells = row(mp.canonical_table(self.res, "forward"), "forward/11_half")
        self.assertEqual(cells[1], "FP16")
        self.assertEqual(cells[5:], ["–", "–"])  # no FP16 stage before it, no FP16 cuDNN

    def test_cudnn_comes_from_the_stage_s_own_file(self):
        folder = self.copy_fixture()
        doc = json.loads((folder / "bench_training.json").read_text())
        name = f"cudnn_standard/canonical/{CANONICAL}"
        doc["benchmarks"].append({"name": name, "run_name": name, "run_type": "iteration",
                                  "label": "series=none kind=forward precision=fp32",
                                  **{k: 0.001 for k in ("median_ms", "min_ms", "max_ms",
                                                        "tflops", "us_per_step_layer")}})
        (folder / "bench_training.json").write_text(json.dumps(doc))
        before = row(mp.canonical_table(self.res, "forward"), "forward/00_naive")
        self.assertEqual(row(mp.canonical_table(mp.load(folder), "forward"),
                             "forward/00_naive")[6], before[6])

    def test_the_16_bit_training_part_is_read_and_compared_within_its_file(self):
        folder = self.copy_fixture()  # scripts/bench.sh's bench_training_reduced.json
        entries = []
        for impl, ms in (("training/98_half", 2.0), ("cudnn_standard_fp16_training", 8.0)):
            name = f"{impl}/canonical/{CANONICAL}"
            entries.append({"name": name, "run_name": name, "run_type": "iteration",
                            "label": "series=none kind=training precision=fp16",
                            **{k: ms for k in ("median_ms", "min_ms", "max_ms", "tflops",
                                               "us_per_step_layer")}})
        (folder / "bench_training_reduced.json").write_text(json.dumps({
            "context": {"gpu": "SYNTHETIC GPU"}, "benchmarks": entries}))
        cells = row(mp.canonical_table(mp.load(folder), "training"), "training/98_half")
        self.assertEqual((cells[1], cells[2], cells[-1]), ("FP16", "2.000", "0.25×"))

    def test_provenance_line_names_the_file_commit_and_repetitions(self):
        last = mp.canonical_table(self.res, "training").splitlines()[-1]
        self.assertEqual(last, "From `plots/testdata/synthetic/synthetic-gpu/bench_training.json`"
                         " (commit synth0commit, 2000-01-01) on the SYNTHETIC GPU (not a "
                         "measurement), median of 3 repetitions; cuDNN from the same run; "
                         "PyTorch 0.0.0-synthetic from "
                         "`plots/testdata/synthetic/synthetic-gpu/pytorch.jsonl`.")

    def test_persistent_stages_come_from_the_data(self):
        table = mp.persistent_table(self.res)
        names = [line.split("|")[1].strip() for line in table.splitlines()[2:]
                 if line.startswith("| forward/")]
        self.assertEqual(names, ["forward/07_persistent_barrier", "forward/09_register_tiled",
                                 "forward/11_half"])
        lines = {c.get_label() for ax in mp.figure_persistent_steps(self.res).axes
                 for c in ax.containers}
        self.assertIn("forward/09_register_tiled", lines)  # persistent, in the batch sweep
        self.assertIn("forward/07_persistent_barrier", lines)  # an earlier persistent one
        self.assertNotIn("forward/03_fused_pointwise", lines)  # not persistent

    def test_stage_sections(self):
        sweep = mp.stage_batch_sweep(self.res, "forward/09_register_tiled")
        self.assertEqual(row(sweep, "1")[4], "unsupported")  # H = 1024 refused
        paragraph = mp.stage_paragraph(self.res, "training/00_naive")
        self.assertIn("Check against the CPU reference (latest run in `canonical.jsonl`): "
                      "passed; the gradients (synthetic).", paragraph)
        self.assertIn("median of 3 repetitions", paragraph)
        self.assertTrue(mp.stage_paragraph(self.res, "forward/99_none").startswith(
            "Not measured yet"))
        barrier = mp.barrier_table(self.res)
        median = statistics.median(reps("grid_sync/blocks:132", "us_per_barrier"))
        self.assertEqual(row(barrier, "132")[1], f"{median:.2f}")

    def test_the_exchange_floors_are_read_beside_the_stages(self):
        folder = self.copy_fixture()
        doc = json.loads((folder / "bench.json").read_text())
        for way, us in (("global", 0.45), ("cluster", 0.25)):
            name = f"exchange_{way}/blocks:16/iterations:1/manual_time"
            doc["benchmarks"].append({"name": name, "run_name": name, "run_type": "iteration",
                                      "us_per_step": us, "blocks": 16})
        (folder / "bench.json").write_text(json.dumps(doc))
        res = mp.load(folder)
        self.assertEqual(res.other["exchange_cluster/blocks:16"].reps, [{"us_per_step": 0.25}])
        self.assertEqual(len(res.runs), len(self.res.runs))  # no stage row made of them
        barrier = mp.barrier_table(res)  # the grid_sync floors alone: no row of 16 blocks
        self.assertRaises(AssertionError, row, barrier, "16")
        self.assertEqual(row(barrier, "132"), row(mp.barrier_table(self.res), "132"))

    def test_a_floor_this_gpu_refused_is_left_out(self):
        folder = self.copy_fixture()  # e.g. no clusters: the bench skips it, with no counters
        doc = json.loads((folder / "bench.json").read_text())
        name = "exchange_cluster/blocks:16/iterations:1/manual_time"
        doc["benchmarks"].append({"name": name, "run_name": name, "run_type": "iteration",
                                  "error_occurred": True, "error_message": "unsupported: x"})
        (folder / "bench.json").write_text(json.dumps(doc))
        self.assertNotIn("exchange_cluster/blocks:16", mp.load(folder).other)


README = """# title
intro text
<!-- results-table:begin -->
OLD TABLE
<!-- results-table:end -->
middle text
<!-- training-table:begin -->
OLD TRAINING
<!-- training-table:end -->
tail text
"""
STAGE_README = """# stage
<!-- stage-result:begin -->
OLD
<!-- stage-result:end -->
between
<!-- grid-barrier:begin -->
OLD
<!-- grid-barrier:end -->
<!-- error-vs-seq:begin -->
OLD
<!-- error-vs-seq:end -->
end
"""


class Readmes(Case):
    def test_markers_are_replaced_and_the_rest_untouched(self):
        root = self.tmp / "root"
        stage = root / "stages" / "forward" / "07_persistent_barrier" / "README.md"
        stage.parent.mkdir(parents=True)
        (root / "README.md").write_text(README)
        stage.write_text(STAGE_README)
        result = run_script("--results", FIXTURE, "--readme-gpu", "synthetic-gpu",
                            "--readme-root", root, "--out", self.tmp / "out")
        self.assertEqual(result.returncode, 0, result.stderr)
        text = (root / "README.md").read_text()
        self.assertNotIn("OLD", text)
        for kept in ("# title\nintro text\n<!-- results-table:begin -->\n",
                     "<!-- results-table:end -->\nmiddle text\n<!-- training-table:begin -->\n",
                     "<!-- training-table:end -->\ntail text\n"):
            self.assertIn(kept, text)
        self.assertIn(mp.canonical_table(self.res, "forward") + "\n<!-- results-table:end -->",
                      text)
        self.assertIn(mp.canonical_table(self.res, "training"), text)
        text = stage.read_text()
        self.assertIn("-->\nbetween\n<!--", text)
        self.assertTrue(text.startswith("# stage\n") and text.endswith("-->\nend\n"))
        self.assertIn(mp.stage_paragraph(self.res, "forward/07_persistent_barrier"), text)
        self.assertIn(mp.barrier_table(self.res), text)
        self.assertIn("<!-- error-vs-seq:begin -->\n" + mp.error_table(self.res) + "\n<!--", text)

    def test_the_committed_readmes_are_what_the_committed_results_make(self):
        res = mp.load(ROOT / "results" / "h100-sxm")
        for (path, marker), text in mp.readme_sections(res, ROOT).items():
            source = path.read_text()
            begin, end = f"<!-- {marker}:begin -->\n", f"<!-- {marker}:end -->"
            if begin in source:
                committed = source.split(begin, 1)[1].split(end, 1)[0]
                self.assertEqual(committed, text + "\n", f"{path} ({marker}) is stale: run "
                                 ".venv/bin/python plots/make_plots.py")


class BadInput(Case):
    def assert_refused(self, result, *words):
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        for word in ("make_plots: error:",) + words:
            self.assertIn(word, result.stderr)

    def run_on_copy(self):
        root = self.tmp / "root"
        root.mkdir()
        (root / "README.md").write_text(README)
        result = run_script("--results", self.tmp / "results", "--readme-gpu", "synthetic-gpu",
                            "--readme-root", root, "--out", self.tmp / "out")
        self.assertEqual((root / "README.md").read_text(), README)  # nothing written
        self.assertFalse((self.tmp / "out").exists())
        return result

    def test_a_missing_results_folder(self):
        self.assert_refused(run_script("--results", self.tmp / "nowhere"), "no such results")

    def test_malformed_json(self):
        folder = self.copy_fixture()
        (folder / "bench.json").write_text('{"benchmarks": [')
        self.assert_refused(self.run_on_copy(), "bench.json: not readable as JSON")

    def test_a_malformed_record(self):
        folder = self.copy_fixture()
        with (folder / "pytorch.jsonl").open("a") as stream:
            stream.write("{not json\n")
        self.assert_refused(self.run_on_copy(), "pytorch.jsonl: not readable as JSON")

    def test_a_missing_counter(self):
        folder = self.copy_fixture()
        doc = json.loads((folder / "bench.json").read_text())
        entry = next(e for e in doc["benchmarks"] if "median_ms" in e
                     and e["run_type"] == "iteration")
        del entry["median_ms"]
        (folder / "bench.json").write_text(json.dumps(doc))
        self.assert_refused(self.run_on_copy(), entry["run_name"], "'median_ms' is missing")

    def test_an_error_record_without_y_s_error(self):
        folder = self.copy_fixture()
        lines = (folder / "error_vs_seq.jsonl").read_text().splitlines()
        record = json.loads(lines[2])
        del record["check"]["tensors"]["y"]["relative_norm"]
        lines[2] = json.dumps(record)
        (folder / "error_vs_seq.jsonl").write_text("\n".join(lines) + "\n")
        self.assert_refused(self.run_on_copy(), "error_vs_seq.jsonl:3: check.tensors.y: "
                            "'relative_norm' is missing")

    def test_a_missing_readme_folder(self):
        self.copy_fixture()
        result = run_script("--results", self.tmp / "results", "--readme-gpu", "other",
                            "--out", self.tmp / "out")
        self.assert_refused(result, "other/bench.json: not readable")

    def test_a_malformed_scaling_file_draws_nothing(self):
        folder = self.copy_fixture()
        (folder / "scaling.jsonl").write_text("not json\n")
        self.assert_refused(self.run_on_copy(), "scaling.jsonl: not readable as JSON")
        self.assertEqual(list(self.tmp.rglob("*.png")), [])

    def test_scaling_on_no_gpu(self):
        folder = self.copy_fixture()
        (folder / "scaling.jsonl").write_text(json.dumps(
            {"scaling": "weak", "gpus": 0, "batch": 16, "ms": {"median": 1.0}}) + "\n")
        self.assert_refused(self.run_on_copy(), "scaling.jsonl:1: 'gpus' is 0")

    def test_an_env_that_is_not_an_object(self):
        folder = self.copy_fixture()
        for name in ("error_vs_seq.jsonl", "pytorch.jsonl"):
            with self.subTest(name):
                shutil.rmtree(self.tmp / "root", ignore_errors=True)
                original = (folder / name).read_text()
                lines = original.splitlines()
                record = json.loads(lines[0])
                record["env"] = "x"
                lines[0] = json.dumps(record)
                (folder / name).write_text("\n".join(lines) + "\n")
                self.assert_refused(self.run_on_copy(), f"{name}:1: 'env' is not a JSON object")
                (folder / name).write_text(original)

    def test_an_out_that_is_a_file(self):
        self.copy_fixture()
        (self.tmp / "out").write_text("")
        result = run_script("--results", self.tmp / "results", "--out", self.tmp / "out",
                            "--no-readmes")
        self.assert_refused(result, "cannot create this output folder")

    def test_a_results_folder_without_results(self):
        (self.tmp / "results").mkdir()
        self.assert_refused(run_script("--results", self.tmp / "results", "--no-readmes"),
                            "no folder with a bench*.json or scaling.jsonl")


class Figures(Case):
    def test_every_figure_is_written(self):
        result = run_script("--results", FIXTURE, "--out", self.tmp, "--no-readmes")
        self.assertEqual(result.returncode, 0, result.stderr)
        for name in mp.FIGURES:
            path = self.tmp / "synthetic-gpu" / name
            self.assertTrue(path.is_file() and path.stat().st_size > 10_000, name)
            self.assertIn(f"wrote {path}", result.stdout)
        self.assertEqual(len(mp.FIGURES), 8)

    def test_scaling_is_drawn_from_its_file_only(self):
        folder = self.copy_fixture()
        result = run_script("--results", folder.parent, "--out", self.tmp / "out", "--no-readmes")
        self.assertIn("scaling.png not drawn: no scaling.jsonl in ", result.stdout)
        records = [{"scaling": "strong", "gpus": g, "batch": 256, "ms": {"median": ms}}
                   for g, ms in ((1, 80.0), (2, 44.0), (4, 25.0))]
        records += [{"scaling": "weak", "gpus": g, "batch": 16 * g, "ms": {"median": ms}}
                    for g, ms in ((1, 10.0), (2, 10.5))]
        records.append({"scaling": "inner_alone", "gpus": 1, "batch": 256, "ms": {"median": 1.0}})
        (folder / "scaling.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        self.assertEqual(mp.scaling_points(folder), {("strong", 256): {1: 80.0, 2: 44.0, 4: 25.0},
                                                     ("weak", 16): {1: 10.0, 2: 10.5}})
        strong, weak = mp.figure_scaling(mp.load(folder)).axes
        self.assertEqual(list(strong.lines[0].get_ydata()), [1.0, 80.0 / 44.0, 80.0 / 25.0])
        self.assertEqual(list(weak.lines[0].get_ydata()), [1.0, 2 * 10.0 / 10.5])
        self.assertEqual(list(strong.lines[-1].get_ydata()), [1, 4])  # the ideal line
        result = run_script("--results", folder.parent, "--out", self.tmp / "out", "--no-readmes")
        self.assertIn("scaling.png", result.stdout)
        self.assertTrue((self.tmp / "out" / folder.name / "scaling.png").is_file())
        host = folder.parent / "multi-gpu-host"  # scaling.jsonl alone, no bench.json
        host.mkdir()
        (host / "scaling.jsonl").write_text((folder / "scaling.jsonl").read_text())
        result = run_script("--results", folder.parent, "--out", self.tmp / "out", "--no-readmes")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue((self.tmp / "out" / "multi-gpu-host" / "scaling.png").is_file())

    def test_the_fixture_is_what_its_generator_writes(self):
        subprocess.run([sys.executable, str(HERE / "testdata" / "make_synthetic.py"), self.tmp],
                       check=True, capture_output=True)
        for path in GPU.iterdir():
            self.assertEqual((self.tmp / "synthetic-gpu" / path.name).read_text(),
                             path.read_text(), f"{path}: run plots/testdata/make_synthetic.py")


def run(impl, precision, us, h=512, error=""):
    """A made-up Run of the hidden sweep (its only repetition's median `us`, or refused)."""
    return mp.Run(impl, "hidden_sweep", (h, h, 64, 100, 4), "forward", precision, GPU / "x.json",
                  [] if error else [{"median_ms": us, "us_per_step_layer": us}], error)


class Sweeps(Case):
    def test_the_stages_drawn_follow_the_rule(self):
        runs = [run("forward/01_a", "fp32", 2.2), run("forward/01_a", "fp32", 0, 1024, "H > 512"),
                run("forward/02_b", "fp32", 2.0), run("forward/02_b", "fp32", 4.0, 1024),
                run("forward/03_c", "fp32", 9.0), run("forward/04_d", "fp32", 9.0),
                run("forward/05_e", "fp16", 1.0), run("forward/06_f", "fp16", 1.0)]
        # 01 is refused at H = 1024: where both earlier stages ran, 02 is the faster (01's
        # geometric mean, over fewer points, would be the lower)
        self.assertEqual(mp.sweep_stages(runs, last=2), {
            ("forward/03_c", "fp32"), ("forward/04_d", "fp32"), ("forward/02_b", "fp32"),
            ("forward/05_e", "fp16"), ("forward/06_f", "fp16")})
        self.assertEqual(mp.sweep_stages(runs[:5], last=4), {(r.impl, "fp32") for r in runs[:5]})

    def test_a_figure_draws_the_rule_s_stages_and_one_cudnn_line(self):
        ax = mp.figure_batch_sweep(self.res).axes[0]  # FP32, H = 512
        labels = [c.get_label() for c in ax.containers]
        shown = sorted(s for s, _ in mp.sweep_stages(mp.rows(self.res, "forward", "batch_sweep")))
        self.assertEqual([label for label in labels if label.startswith("forward/")], shown)
        self.assertFalse([label for label in labels if label.startswith("cuDNN ")
                          and label != "cuDNN fastest FP32"])  # no line per algorithm
        fastest = next(c for c in ax.containers if c.get_label() == "cuDNN fastest FP32")
        xs, ys = fastest.lines[0].get_data()
        for b, y in zip(xs, ys):
            self.assertAlmostEqual(y, min(statistics.median(reps(
                f"cudnn_{a}/batch_sweep/H:512/I:512/B:{b}/T:100/L:1/manual_time",
                "us_per_step_layer")) for a in mp.CUDNN))
        self.assertIn("PyTorch nn.LSTM", labels)

    def test_the_training_figures_draw_the_rule_s_stages_and_leave_bf16_to_the_table(self):
        copies = [dataclasses.replace(r, impl=f"training/{n:02d}_copy") for n in range(3, 9)
                  for r in self.res.runs if r.impl == "training/02_persistent"]
        twins = [dataclasses.replace(r, impl=r.impl + "_bf16", precision="bf16")
                 for r in self.res.runs if r.impl == "training/02_persistent"]
        res = dataclasses.replace(self.res, runs=self.res.runs + copies + twins)
        sweeps = mp.figure_training_sweeps(res).axes[0]  # FP32, the first batch-sweep panel
        drawn = {c.get_label() for c in sweeps.containers if c.get_label().startswith("training/")}
        self.assertEqual(len(drawn), mp.SWEEP_LAST + 1)  # of 8 stages: the last 4, the fastest
        ticks = [t.get_text() for ax in mp.figure_training_canonical(res).axes
                 for t in ax.get_xticklabels()]
        self.assertIn("08 copy", ticks)  # every FP32 stage at the canonical config
        self.assertFalse([t for t in ticks if "BF16" in t])  # the twins: the table's
        self.assertRaises(mp.MissingData, mp.figure_training_canonical,  # BF16 alone: no figure
                          dataclasses.replace(self.res, runs=twins))

    def test_what_was_refused_is_one_short_sentence(self):
        why = "unsupported: the recurrent weights do not fit on chip: 545 KiB of shared memory"
        runs = [run(f"forward/{n:02d}_s", "fp32", 0, 2048, why) for n in range(7, 13)]
        runs += [run(f"forward/{n:02d}_s{twin}", p, 0, 2048, why) for n in range(13, 17)
                 for twin, p in (("", "fp16"), ("_bf16", "bf16"))]
        runs += [run(f"cudnn_persist_static{s}", p, 0, 2048, "unsupported: cuDNN 9 refuses it: "
                     "CUDNN_STATUS_NOT_SUPPORTED") for s, p in (("", "fp32"), ("_fp16", "fp16"),
                                                                ("_bf16", "bf16"))]
        runs += [run("cudnn_standard_fp16", "fp16", 0, 2048, "unsupported: cuDNN 9 refuses it"),
                 run("forward/06_s", "fp32", 5.0, 2048), run("forward/06_s", "fp32", 1.0)]
        note = mp.refusals([("", runs, lambda r: r.H, "hidden size H")])
        self.assertEqual(note, "Not supported at H=2048 (the recurrent weights do not fit on "
                         "chip): forward 07-16. Not supported at H=2048 (cuDNN 9 refuses it): "
                         "cuDNN persist_static, cuDNN standard in FP16.")
        self.assertEqual(mp.refusals([("", runs[-1:], lambda r: r.H, "hidden size H")]), "")
        # A run that the bench ran and whose check failed is not called unsupported.
        failed = run("training/15_s", "fp16", 0, 512, "the pass left NaN/Inf or unwritten elements "
                     "in y")
        self.assertEqual(mp.refusals([("", [failed], lambda r: r.H, "hidden size H")]),
                         "Failed at H=512 (the pass left NaN/Inf or unwritten elements in y): "
                         "training 15.")
        self.assertEqual(mp.cell(failed, str), "failed")
        self.assertEqual(mp.cell(runs[0], str), "unsupported")

    def test_the_synthetic_figures_name_what_was_refused_under_them(self):
        for figure, note in ((mp.figure_hidden_sweep, "Not supported at H=1024 (H > 512): "
                              "forward 09."), (mp.figure_batch_sweep, "Not supported at H=1024, "
                                               "B=1, 8, 64 (H > 512): forward 09.")):
            fig = figure(self.res)
            self.assertIn(note, " ".join(fig.get_supxlabel().split()))
            self.assertNotIn("not supported", " ".join(ax.get_xlabel() for ax in fig.axes))


def error_records(folder=GPU):
    """{(stage, precision, T): y's relative norm} of error_vs_seq.jsonl's records: the last
    record of each point counts (the fixture's first one is stale)."""
    lines = (folder / "error_vs_seq.jsonl").read_text().splitlines()
    return {(r["stage"], r["precision"], r["seq_len"]): r["check"]["tensors"]["y"]["relative_norm"]
            for r in map(json.loads, lines)}


class ErrorVsSeq(Case):
    LABELS = {"forward/09_register_tiled FP32": ("forward/09_register_tiled", "fp32"),
              "cuDNN persist_static FP32": ("cudnn_persist_static", "fp32"),
              "forward/11_half FP16": ("forward/11_half", "fp16"),
              "cuDNN persist_static FP16": ("cudnn_persist_static_fp16", "fp16"),
              "forward/11_half BF16": ("forward/11_half", "bf16"),
              "cuDNN persist_static BF16": ("cudnn_persist_static_bf16", "bf16")}

    def test_the_table_holds_the_last_record_of_each_point(self):
        table, errors = mp.error_table(self.res), error_records()
        self.assertEqual(header(table), ["T", *self.LABELS])  # by precision, the stage first
        self.assertEqual([line.split("|")[1].strip() for line in table.splitlines()[2:5]],
                         ["10", "100", "1000"])
        for t in (10, 100, 1000):
            self.assertEqual(row(table, str(t))[1:], [
                f"{errors[(*key, t)]:.1e}" for key in self.LABELS.values()])
        self.assertEqual(row(table, "10")[3], "3.3e-05")  # 3e-5 × 1.1, not the stale 0.999
        self.assertNotIn("FAILED", table)
        self.assertTrue(table.endswith("on the SYNTHETIC GPU (not a measurement): one checked run "
                                       "per point (H=512, B=8, L=1, I=H); y's relative-norm error "
                                       "against the FP64 CPU reference on the same inputs (in "
                                       "FP16 and BF16 rounded to 16 bits)."), table)

    def test_the_figure_draws_a_line_per_implementation_and_precision(self):
        fig, errors = mp.figure_error_vs_seq(self.res), error_records()
        lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
        for label, key in self.LABELS.items():
            self.assertEqual(list(lines[label].get_xdata()), [10, 100, 1000])
            self.assertEqual(list(lines[label].get_ydata()),
                             [errors[(*key, t)] for t in (10, 100, 1000)])
            self.assertEqual(lines[label].get_linestyle(), "--" if "cuDNN" in label else "-")
            stage = next(s for s in self.LABELS if s.startswith("forward/")
                         and s.endswith(label[-5:]))  # the stage of the same precision
            self.assertEqual(lines[label].get_color(), lines[stage].get_color())
        colors = {lines[label].get_color() for label in self.LABELS}
        self.assertEqual(len(colors), 3)  # one per precision
        self.assertEqual((fig.axes[0].get_xscale(), fig.axes[0].get_yscale()), ("log", "log"))
        self.assertEqual(len(fig.axes[0].collections), 0)  # no failed check to mark

    def test_a_failed_check_is_marked_not_hidden(self):
        folder = self.copy_fixture()
        lines = (folder / "error_vs_seq.jsonl").read_text().splitlines()
        index = next(i for i, line in enumerate(lines) if '"seq_len": 100' in line
                     and '"cudnn_persist_static_bf16"' in line)
        record = json.loads(lines[index])
        record["check"]["passed"] = False
        lines[index] = json.dumps(record)
        (folder / "error_vs_seq.jsonl").write_text("\n".join(lines) + "\n")
        res, error = mp.load(folder), error_records(folder)[("cudnn_persist_static_bf16", "bf16",
                                                              100)]
        self.assertEqual(row(mp.error_table(res), "100")[6], f"{error:.1e} (check FAILED)")
        other = error_records()[("cudnn_persist_static_bf16", "bf16", 1000)]
        self.assertEqual(row(mp.error_table(res), "1000")[6], f"{other:.1e}")  # not marked
        marks = mp.figure_error_vs_seq(res).axes[0].collections
        self.assertEqual([m.get_label() for m in marks], ["check FAILED"])
        self.assertEqual(marks[0].get_offsets().tolist(), [[100, error]])

    def test_the_figure_is_drawn_only_where_the_file_is(self):
        folder = self.copy_fixture()
        (folder / "error_vs_seq.jsonl").unlink()
        result = run_script("--results", folder.parent, "--out", self.tmp / "out", "--no-readmes")
        self.assertEqual(result.returncode, 0, result.stderr)
        out = self.tmp / "out" / "synthetic-gpu"
        self.assertFalse((out / "error_vs_seq.png").exists())
        self.assertTrue((out / "canonical.png").is_file())
        self.assertIn("error_vs_seq.png not drawn: no error_vs_seq.jsonl in ", result.stdout)
        self.assertTrue(mp.error_table(mp.load(folder)).startswith(
            "Not measured yet: no error_vs_seq.jsonl in "))


def bench_file(path, date, runs):
    """A Google Benchmark JSON file of `runs`: (impl, group, (H, B, T, L), kind, precision, ms);
    each three repetitions of median `ms`."""
    entries = []
    for impl, group, (h, b, t, layers), kind, precision, ms in runs:
        name = f"{impl}/{group}/H:{h}/I:{h}/B:{b}/T:{t}/L:{layers}/manual_time"
        label = {"name": name, "run_name": name, "run_type": "iteration",
                 "label": f"kind={kind} precision={precision}"}
        entries += [label | {"error_occurred": True, "error_message": "unsupported: too large"}
                    ] if ms is None else [label | {
                        "median_ms": ms * f, "min_ms": ms * f, "max_ms": ms * f, "tflops": 1.0,
                        "us_per_step_layer": ms * f * 10} for f in (0.9, 1.0, 1.1)]
    path.write_text(json.dumps({"context": {"gpu": "SYNTHETIC GPU", "git_commit": path.stem,
                                            "date": date}, "benchmarks": entries}))


STAGE7, CANON = "forward/07_persistent_barrier", (512, 64, 100, 4)


class AgainstCudnn(Case):
    """Each stage from the latest file that times it, against cuDNN's fastest in that file."""

    def make_folder(self):
        folder = self.tmp / "results" / "later-gpu"
        folder.mkdir(parents=True)
        bench_file(folder / "bench_early.json", "2001-01-01T00:00:00+00:00", [
            (STAGE7, "canonical", CANON, "forward", "fp32", 10.0),
            ("cudnn_standard", "canonical", CANON, "forward", "fp32", 20.0)])
        bench_file(folder / "bench_late.json", "2002-01-01T00:00:00+00:00", [
            (STAGE7, "canonical", CANON, "forward", "fp32", 6.0),
            (STAGE7, "batch_sweep", (512, 1, 100, 1), "forward", "fp32", 2.0),
            (STAGE7, "batch_sweep", (1024, 256, 100, 1), "forward", "fp32", 5.0),
            ("forward/99_not_a_stage_here", "canonical", CANON, "forward", "fp32", 1.0),
            ("cudnn_standard", "canonical", CANON, "forward", "fp32", 4.0),
            ("cudnn_persist_static", "canonical", CANON, "forward", "fp32", 3.0),
            ("cudnn_standard", "batch_sweep", (512, 1, 100, 1), "forward", "fp32", 1.0),
            ("cudnn_standard", "batch_sweep", (1024, 256, 100, 1), "forward", "fp32", 1.0),
            (STAGE7, "batch_sweep", (1024, 4, 100, 1), "forward", "fp32", None),  # refused
            ("cudnn_standard", "batch_sweep", (1024, 4, 100, 1), "forward", "fp32", 1.0),
            # The hidden sweep's point of the canonical shape: the canonical group's alone counts.
            (STAGE7, "hidden_sweep", CANON, "forward", "fp32", 6.5),
            ("cudnn_persist_static", "hidden_sweep", CANON, "forward", "fp32", 1.5)])
        bench_file(folder / "bench_other.json", "2003-01-01T00:00:00+00:00", [  # no stage 07
            ("cudnn_standard", "canonical", CANON, "forward", "fp32", 0.5)])
        return folder

    def test_the_latest_file_and_cudnn_of_that_file(self):
        res = mp.load_every_bench(self.make_folder())
        table = mp.against_cudnn_table(res, ROOT)
        self.assertEqual(row(table, STAGE7), [
            STAGE7, "FP32", "6.000", "2.00×", "2.00×", "–", "–",
            "5.00× at H=1024 B=256 T=100 L=1, of 3", "`bench_late.json` (bench_l)"])
        self.assertNotIn("99_not_a_stage_here", table)  # no such stage folder in the tree
        axes = [ax for ax in mp.figure_against_cudnn(res, ROOT).axes if ax.lines]
        self.assertEqual(len(axes), 1)
        lines = {line.get_label(): list(line.get_ydata()) for line in axes[0].lines}
        self.assertEqual(lines["canonical config"], [2.0])
        self.assertEqual(lines["H=512 B=1"], [2.0])
        self.assertEqual(lines["H=1024 B=4"], [])
        self.assertEqual(lines["worst configuration of the file"], [5.0])

    def test_the_script_draws_it_and_writes_the_readme_section(self):
        folder = self.make_folder()  # a folder of bench_*.json files without a bench.json
        shutil.copytree(GPU, folder.parent / "synthetic-gpu")
        root = self.tmp / "root"
        root.mkdir()
        (root / "README.md").write_text(README + "<!-- against-cudnn-later-gpu:begin -->\nOLD\n"
                                        "<!-- against-cudnn-later-gpu:end -->\n")
        (root / "stages" / "forward" / STAGE7.split("/")[1]).mkdir(parents=True)
        result = run_script("--results", folder.parent, "--readme-gpu", "synthetic-gpu",
                            "--readme-root", root, "--out", self.tmp / "out")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue((self.tmp / "out" / "later-gpu" / "against_cudnn.png").is_file())
        self.assertFalse((self.tmp / "out" / "later-gpu" / "canonical.png").exists())
        text = (root / "README.md").read_text()
        self.assertNotIn("OLD", text)
        self.assertIn(mp.against_cudnn_table(mp.load_every_bench(folder), root), text)

    def test_the_committed_readme_is_what_the_committed_results_make(self):
        every = {f: mp.load_every_bench(f) for f in sorted((ROOT / "results").iterdir())
                 if any(f.glob("bench*.json"))}
        source = (ROOT / "README.md").read_text()
        for (path, marker), text in mp.against_cudnn_sections(every, ROOT).items():
            begin, end = f"<!-- {marker}:begin -->\n", f"<!-- {marker}:end -->"
            if begin in source:
                self.assertEqual(source.split(begin, 1)[1].split(end, 1)[0], text + "\n",
                                 f"README.md ({marker}) is stale: run plots/make_plots.py")


if __name__ == "__main__":
    unittest.main(verbosity=2)
