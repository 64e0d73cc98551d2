#!/usr/bin/env python3
"""Says whether two stages' GPU kernels are the same machine code, without a GPU.

Compiles each stage's stage.cu to a cubin with the Release build's flags (nvcc -O3 -DNDEBUG, one
architecture, both in one namespace so that the kernels' names match) and compares, kernel by
kernel, the bytes of their .text sections. Where every kernel of the first stage stands
unchanged in the second, a change between them (a comment, a refactoring, code behind a template
flag that the first stage's instances do not set) cannot have changed what those kernels do on
the GPU. Host code is not compared.

usage: scripts/compare_kernels.py STAGE_A STAGE_B [--rename REGEX REPLACEMENT] [--arch N]
                                  [--nvcc PATH]
  STAGE_A, STAGE_B   stages as scripts/lesson_diff.sh names them (it finds their folders): 27,
                     t45, forward/27, training/45, stages/forward/27_two_accumulator_chains
  --rename R S       rewrite STAGE_B's demangled kernel names with Python's re.sub(R, S) before
                     matching (a template parameter the second stage added:
                     --rename ', false>\\(' '>(' )
  --arch N           the sm_N to compile for (default 90)
  --nvcc PATH        the CUDA compiler (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)

Prints one line per kernel that differs or stands in one stage only, then a summary line.
Exit status: 0 every kernel of STAGE_A has an identical kernel in STAGE_B, 1 not so (or a
compilation failed), 2 a usage error.
"""
import argparse
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stage_folder(name):
    """The folder of a stage, found by lesson_diff.sh's naming; exits 2 where there is none."""
    found = subprocess.run(["bash", str(ROOT / "scripts" / "lesson_diff.sh"), "--folder", name],
                           capture_output=True, text=True)
    if found.returncode != 0:
        print(f"compare_kernels: {found.stderr.strip()}", file=sys.stderr)
        sys.exit(2)
    return ROOT / found.stdout.strip()


def text_sections(cubin):
    """{mangled kernel name: bytes of its .text section} of an ELF64 cubin."""
    data = cubin.read_bytes()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    entry_size, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entry_size)
               for i in range(count)]
    names_at = headers[names_index][4]
    sections = {}
    for name_offset, _, _, _, offset, size, *_ in headers:
        end = data.index(b"\0", names_at + name_offset)
        name = data[names_at + name_offset:end].decode()
        if name.startswith(".text."):
            sections[name[len(".text."):]] = data[offset:offset + size]
    return sections


def kernels(folder, arch, nvcc, work):
    """{demangled name: machine code} of the stage in `folder`."""
    cubin = Path(work) / (folder.name + ".cubin")
    command = [nvcc, "-DLSTM_STAGE_NAMESPACE=compared", "-I", str(ROOT / "common"), "-I",
               str(ROOT / "reference"), "-O3", "-DNDEBUG", "-std=c++17",
               f"--generate-code=arch=compute_{arch},code=sm_{arch}", "-x", "cu", "--cubin",
               str(folder / "stage.cu"), "-o", str(cubin)]
    if subprocess.run(command).returncode != 0:
        print(f"compare_kernels: nvcc failed on {folder.relative_to(ROOT)}", file=sys.stderr)
        sys.exit(1)
    sections = text_sections(cubin)
    mangled = list(sections)
    demangled = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True,
                               text=True, check=True).stdout.splitlines()
    return {plain: sections[name] for name, plain in zip(mangled, demangled)}


def main():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("stage_a")
    parser.add_argument("stage_b")
    parser.add_argument("--rename", nargs=2, metavar=("REGEX", "REPLACEMENT"))
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    parser.add_argument("-h", "--help", action="store_true")
    if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
        print(__doc__)
        return 0
    args = parser.parse_args()
    a, b = stage_folder(args.stage_a), stage_folder(args.stage_b)
    with tempfile.TemporaryDirectory() as work:
        first = kernels(a, args.arch, args.nvcc, work)
        second = kernels(b, args.arch, args.nvcc, work)
    if args.rename:
        second = {re.sub(args.rename[0], args.rename[1], name): code
                  for name, code in second.items()}
    same = [name for name in first if second.get(name) == first[name]]
    for name in first:
        if name not in second:
            print(f"only in {a.name}: {name}")
        elif second[name] != first[name]:
            print(f"different: {name}")
    for name in second:
        if name not in first:
            print(f"only in {b.name}: {name}")
    print(f"compare_kernels: {len(same)} of {len(first)} kernels of {a.name} are the same machine "
          f"code in {b.name} (sm_{args.arch}); {len(set(second) - set(first))} only in {b.name}")
    return 0 if len(same) == len(first) else 1


if __name__ == "__main__":
    sys.exit(main())
