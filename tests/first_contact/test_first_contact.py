#!/ usr / bin / env python3
"""First contact, table-driven: bad command lines and bad input files against the real programs.

Runs build/bin/lstm_reference and a stage executable (whose argument and input handling run
before it looks for a GPU) on every case of two tables and requires, for each:
  - the expected exit code (2 for a usage error, 1 for a refused run),
  - exactly one line on stderr, naming the flag or the file at fault,
  - no number longer than 20 digits anywhere in the output,
  - nothing written to the output paths the command line named.

A third table breaks the upstream gradients (dy, dhy, dcy) of the training fixture for
lstm_reference --training.

usage: test_first_contact.py BIN_DIR FIXTURE_DIR TRAINING_FIXTURE_DIR
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

BIN, FIXTURE, TRAINING_FIXTURE = sys.argv[1], sys.argv[2], sys.argv[3]
REFERENCE = os.path.join(BIN, "lstm_reference")
STAGE = os.path.join(BIN, "lstm_forward_00_naive")

#-- -- minimal.npy reading and writing(float32, C order), so the test needs no numpy
def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    header_len = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + header_len].decode()
    shape = tuple(int(v) for v in re.search(r"\((.*?)\)", header).group(1).split(",") if v.strip())
    values = list(struct.unpack(f"<{len(data[10 + header_len:]) // 4}f", data[10 + header_len:]))
    return shape, values


def write_npy(path, shape, values, descr="<f4", fortran=False, magic=b"\x93NUMPY"):
    shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", shape_text)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    fmt = "<%dd" if descr == "<f8" else "<%df"
    with open(path, "wb") as f:
        f.write(magic + b"\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(fmt % len(values), *values))


def set_value(name, index, value):
    def change(d):
        shape, values = read_npy(os.path.join(d, name))
        values[index] = value
        write_npy(os.path.join(d, name), shape, values)
    return change


def replace_shape(name, shape):
    def change(d):
        count = 1
        for n in shape:
            count *= n
        write_npy(os.path.join(d, name), shape, [0.5] * count)
    return change


def raw(name, content):
    def change(d):
        with open(os.path.join(d, name), "wb") as f:
            f.write(content)
    return change


def remove(name):
    return lambda d: os.remove(os.path.join(d, name))


def truncate(name, keep):
    def change(d):
        path = os.path.join(d, name)
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:keep])
    return change


def retype(name):
    def change(d):
        shape, values = read_npy(os.path.join(d, name))
        write_npy(os.path.join(d, name), shape, values, descr="<f8")
    return change


def fortran(name):
    def change(d):
        shape, values = read_npy(os.path.join(d, name))
        write_npy(os.path.join(d, name), shape, values, fortran=True)
    return change


def directory(name):
    def change(d):
        os.remove(os.path.join(d, name))
        os.mkdir(os.path.join(d, name))
    return change


def also(*changes):
    def change(d):
        for c in changes:
            c(d)
    return change


NAN, INF = float("nan"), float("inf")

#(label, how the fixture folder is broken, the file the message must name)
BAD_INPUTS = [
    ("empty x", raw("x.npy", b""), "x.npy"),
    ("truncated x", truncate("x.npy", 200), "x.npy"),
    ("bad magic", raw("h0.npy", b"NOTNUMPY" + b"\0" * 120), "h0.npy"),
    ("float64 c0", retype("c0.npy"), "c0.npy"),
    ("Fortran-order x", fortran("x.npy"), "x.npy"),
    ("x of rank 2", replace_shape("x.npy", (5, 7)), "x.npy"),
    ("NaN in x", set_value("x.npy", 17, NAN), "x.npy"),
    ("Inf in h0", set_value("h0.npy", 3, INF), "h0.npy"),
    ("NaN in c0", set_value("c0.npy", 0, NAN), "c0.npy"),
    ("NaN in weight_hh_l1", set_value("weight_hh_l1.npy", 40, NAN), "weight_hh_l1.npy"),
    ("-Inf in bias_ih_l0", set_value("bias_ih_l0.npy", 5, -INF), "bias_ih_l0.npy"),
    ("h0 with another H", replace_shape("h0.npy", (3, 3, 12)), "h0.npy"),
    ("c0 missing", remove("c0.npy"), "c0.npy"),
    ("weight_ih_l1 missing", remove("weight_ih_l1.npy"), "weight_ih_l1.npy"),
    ("an extra layer's weights", also(lambda d: shutil.copy(os.path.join(d, "weight_ih_l2.npy"),
                                                           os.path.join(d, "weight_ih_l3.npy"))),
     "weight_ih_l3.npy"),
    ("weight_hh_l0 of another H", replace_shape("weight_hh_l0.npy", (44, 11)), "weight_hh_l0.npy"),
    ("h0 with another B", replace_shape("h0.npy", (3, 4, 11)), "h0.npy"),
    ("x is a folder", directory("x.npy"), "x.npy"),
    ("bias_hh_l2 truncated", truncate("bias_hh_l2.npy", 100), "bias_hh_l2.npy"),
]

#(label, how the training fixture's upstream gradients are broken, the file the message must name)
BAD_TRAINING_INPUTS = [
    ("dy missing, dhy and dcy there", remove("dy.npy"), "dy.npy"),
    ("dcy missing, dy and dhy there", remove("dcy.npy"), "dcy.npy"),
    ("NaN in dhy", set_value("dhy.npy", 4, NAN), "dhy.npy"),
    ("Inf in dy", set_value("dy.npy", 0, INF), "dy.npy"),
    ("dy of another T", replace_shape("dy.npy", (4, 3, 11)), "dy.npy"),
    ("dhy of another L", replace_shape("dhy.npy", (2, 3, 11)), "dhy.npy"),
    ("float64 dcy", retype("dcy.npy"), "dcy.npy"),
    ("truncated dhy", truncate("dhy.npy", 90), "dhy.npy"),
]

#(label, arguments, exit code, what the message must name)
BAD_ARGUMENTS = [
    ("zero hidden", ["--hidden", "0"], 2, "--hidden"),
    ("negative batch", ["--batch", "-3"], 2, "--batch"),
    ("non-numeric seq", ["--seq", "abc"], 2, "--seq"),
    ("empty hidden", ["--hidden", ""], 2, "--hidden"),
    ("trailing letters", ["--hidden", "8abc"], 2, "--hidden"),
    ("hexadecimal", ["--hidden", "0x10"], 2, "--hidden"),
    ("huge layers", ["--layers", "9" * 300], 2, "--layers"),
    ("negative seed", ["--seed", "-1"], 2, "--seed"),
    ("seed above 2^64-1", ["--seed", "18446744073709551616"], 2, "--seed"),
    ("seed far above", ["--seed", "1" * 60], 2, "--seed"),
    ("overflowing size", ["--hidden", "1000000000"], 2, "exceeds"),
    ("unknown flag", ["--bogus", "3"], 2, "--bogus"),
    ("missing load folder", ["--load", "/no/such/folder"], 2, "--load"),
    ("empty load", ["--load", ""], 2, "--load"),
    ("empty dump", ["--dump", ""], 2, "--dump"),
    ("dump onto a file", ["--dump", "@FILE"], 2, "--dump"),
    ("dump under a missing parent file", ["--dump", "@FILE/sub"], 2, "--dump"),
    ("seed with load", ["--load", FIXTURE, "--seed", "5"], 2, "--seed"),
    ("load disagreeing with a flag", ["--load", FIXTURE, "--hidden", "5"], 2, "--hidden"),
    ("flag value missing", ["--batch"], 2, "--batch"),
]
STAGE_ONLY_ARGUMENTS = [
    ("zero iters", ["--iters", "0"], 2, "--iters"),
    ("negative warmup", ["--warmup", "-1"], 2, "--warmup"),
    ("json to a folder", ["--json", "@DIR"], 2, "--json"),
    ("json in a missing folder", ["--json", "/no/such/folder/r.jsonl"], 2, "--json"),
    ("empty json", ["--json", ""], 2, "--json"),
]
REFERENCE_ONLY_ARGUMENTS = [
    ("iters means nothing here", ["--iters", "3"], 2, "--iters"),
    ("json means nothing here", ["--json", "@DIR"], 2, "--json"),
    ("no-check means nothing here", ["--no-check"], 2, "--no-check"),
    ("empty save-inputs", ["--save-inputs", ""], 2, "--save-inputs"),
    ("save-inputs onto a file", ["--save-inputs", "@FILE"], 2, "--save-inputs"),
    ("dump without the reference", ["--no-reference", "--dump", "@OUT"], 2, "--dump"),
]


class FirstContact(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lstm_first_contact_")
        self.file = os.path.join(self.tmp, "a_file")
        with open(self.file, "w") as f:
            f.write("not a folder\n")
        self.outputs = [os.path.join(self.tmp, name) for name in ("dump", "record.jsonl", "saved")]

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_program(self, program, args, outputs):
        args = [a.replace("@FILE", self.file).replace("@DIR", self.tmp)
                .replace("@OUT", self.outputs[0]) for a in args]
        result = subprocess.run([program] + outputs + args, capture_output=True, text=True,
                                timeout=120)
        return result, result.stdout + result.stderr

    def expect(self, label, program, args, code, names, outputs):
        result, text = self.run_program(program, args, outputs)
        where = f"{label}: {os.path.basename(program)} {' '.join(args)}\n{text}"
        self.assertEqual(result.returncode, code, where)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, "expected one line on stderr; " + where)
        self.assertIn(names, lines[0], where)
        self.assertIsNone(re.search(r"\d{21,}", text), "a number of over 20 digits; " + where)
        for path in self.outputs:
            self.assertFalse(os.path.exists(path), f"{path} was written; " + where)

    def stage_outputs(self):
        return ["--dump", self.outputs[0], "--json", self.outputs[1]]

    def reference_outputs(self):
        return ["--dump", self.outputs[0], "--save-inputs", self.outputs[2]]

    def test_bad_arguments(self):
        count = 0
        for label, args, code, names in BAD_ARGUMENTS + STAGE_ONLY_ARGUMENTS:
            with self.subTest(program="stage", case=label):
                outputs = [] if any(a in args for a in ("--dump", "--json")) else self.stage_outputs()
                self.expect(label, STAGE, args, code, names, outputs)
                count += 1
        for label, args, code, names in BAD_ARGUMENTS + REFERENCE_ONLY_ARGUMENTS:
            with self.subTest(program="reference", case=label):
                outputs = [] if any(a in args for a in ("--dump", "--save-inputs")) else \
                    self.reference_outputs()
                self.expect(label, REFERENCE, args, code, names, outputs)
                count += 1
        self.assertGreaterEqual(count, 30)

    def test_bad_inputs(self):
        self.assertGreaterEqual(len(BAD_INPUTS), 15)
        for label, change, names in BAD_INPUTS:
            folder = os.path.join(self.tmp, "in")
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(FIXTURE, folder)
            for extra in ("y.npy", "hy.npy", "cy.npy", "meta.json"):  # inputs only
                if os.path.exists(os.path.join(folder, extra)):
                    os.remove(os.path.join(folder, extra))
            change(folder)
            with self.subTest(program="stage", case=label):
                self.expect(label, STAGE, ["--load", folder], 1, names, self.stage_outputs())
            with self.subTest(program="reference", case=label):
                self.expect(label, REFERENCE, ["--load", folder], 1, names,
                            self.reference_outputs())

    def test_bad_training_inputs(self):
        for label, change, names in BAD_TRAINING_INPUTS:
            folder = os.path.join(self.tmp, "in")
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(TRAINING_FIXTURE, folder)
            for extra in os.listdir(folder):  # inputs only: no outputs, gradients or meta.json
                if extra == "meta.json" or extra.startswith("grad_") or extra in (
                        "y.npy", "hy.npy", "cy.npy", "dx.npy", "dh0.npy", "dc0.npy"):
                    os.remove(os.path.join(folder, extra))
            change(folder)
            with self.subTest(program="reference --training", case=label):
                self.expect(label, REFERENCE, ["--training", "--load", folder], 1, names,
                            self.reference_outputs())

    def test_the_unbroken_fixture_loads(self):
#The control : the same folder, unbroken, is accepted by the reference(exit 0).
        result, text = self.run_program(REFERENCE, ["--load", FIXTURE, "--dump", self.outputs[0]],
                                        [])
        self.assertEqual(result.returncode, 0, text)
        self.assertTrue(os.path.exists(os.path.join(self.outputs[0], "y.npy")), text)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=1)
