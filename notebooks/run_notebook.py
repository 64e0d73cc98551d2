#!/usr/bin/env python3
"""Executes notebooks/walkthrough.ipynb and fails on any cell error (CTest, label cpu).

The notebook runs on this interpreter's own ipykernel (the repository's .venv), in a private
kernel spec, runtime and IPython folder, so no Jupyter set-up of the user's can change the
result. The executed copy goes to a temporary file, or to --output; the committed notebook is
never written, and it must itself be committed without outputs (checked first).

usage: .venv/bin/python notebooks/run_notebook.py [--results DIR] [--gpu NAME]
           [--expect-figures N] [--output PATH] [NOTEBOOK]
"""
import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plots"))
from require_modules import require  # noqa: E402

require("numpy", "matplotlib", "nbformat", "nbclient", "ipykernel")

import nbformat  # noqa: E402
from jupyter_client import AsyncKernelManager  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import CellExecutionError, DeadKernelError  # noqa: E402

HERE = Path(__file__).resolve().parent
KERNEL = "lstm-stages-venv"


def committed_without_outputs(nb):
    """The code cells that carry outputs or an execution count (there should be none)."""
    return [index for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
            and (cell.get("outputs") or cell.get("execution_count") is not None)]


def private_jupyter(folder):
    """Points Jupyter and IPython at `folder`, with a kernel spec that runs this interpreter."""
    spec = folder / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "lstm-stages .venv", "language": "python"}))
    os.environ["JUPYTER_PATH"] = str(folder / "jupyter")
    (folder / "runtime").mkdir()
    os.environ["JUPYTER_RUNTIME_DIR"] = str(folder / "runtime")
    os.environ["JUPYTER_CONFIG_DIR"] = str(folder / "config")
    os.environ["JUPYTER_PLATFORM_DIRS"] = "1"
    os.environ["IPYTHONDIR"] = str(folder / "ipython")
    os.environ.pop("MPLBACKEND", None)  # the kernel chooses its inline backend


def count_outputs(nb):
    """(cell errors, PNG images) among the executed notebook's outputs."""
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    errors = sum(o.output_type == "error" for o in outputs)
    images = sum("image/png" in o.get("data", {}) for o in outputs)
    return errors, images


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebook", nargs="?", default=str(HERE / "walkthrough.ipynb"))
    parser.add_argument("--results", help="results folder the notebook reads (default results/)")
    parser.add_argument("--gpu", help="the results/<gpu>/ folder it shows (default h100-sxm)")
    parser.add_argument("--expect-figures", type=int, default=0,
                        help="fail unless at least this many figures were shown")
    parser.add_argument("--output", help="keep the executed copy here (default: a temporary "
                                         "file, removed)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    args = parser.parse_args()

    notebook = Path(args.notebook).resolve()
    if args.output and Path(args.output).resolve() == notebook:
        sys.exit(f"run_notebook: --output {args.output} is the notebook itself: refusing")
    nb = nbformat.read(notebook, as_version=4)
    nbformat.validate(nb)
    stale = committed_without_outputs(nb)
    if stale:
        print(f"run_notebook: FAILED: {notebook}: code cells {stale} carry outputs or execution "
              "counts; commit the notebook without outputs")
        return 1
    if args.results:
        os.environ["LSTM_STAGES_RESULTS"] = str(Path(args.results).resolve())
    if args.gpu:
        os.environ["LSTM_STAGES_GPU"] = args.gpu

    with tempfile.TemporaryDirectory(prefix="run_notebook_") as tmp:
        private_jupyter(Path(tmp))
        # Unix sockets in the private runtime folder rather than TCP on localhost, where the
        # socket path fits the system's limit (about 100 characters).
        sockets = str(Path(tmp) / "runtime" / "kernel")
        kernel = (AsyncKernelManager(kernel_name=KERNEL, transport="ipc", ip=sockets)
                  if len(sockets) < 80 else AsyncKernelManager(kernel_name=KERNEL))
        client = NotebookClient(nb, km=kernel, timeout=args.timeout, startup_timeout=120,
                                resources={"metadata": {"path": str(notebook.parent)}})
        failure = None
        try:
            client.execute(cleanup_kc=True)  # we made the manager: shut the kernel down
        except (CellExecutionError, DeadKernelError) as error:
            failure = str(error)
        except RuntimeError as error:  # the kernel did not start or answer
            print(f"run_notebook: FAILED: the kernel ({sys.executable} -m ipykernel_launcher) "
                  f"did not run: {error}")
            return 1
        output = Path(args.output) if args.output else Path(tmp) / notebook.name
        nbformat.write(nb, output)

    errors, images = count_outputs(nb)
    if failure or errors:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", failure or "")  # no terminal colours in logs
        print(f"run_notebook: FAILED: {notebook.name}: a cell raised an error\n{plain}")
        return 1
    if images < args.expect_figures:
        print(f"run_notebook: FAILED: {notebook.name} showed {images} figures, expected at "
              f"least {args.expect_figures}")
        return 1
    cells = sum(cell.cell_type == "code" for cell in nb.cells)
    kept = f"; executed copy: {args.output}" if args.output else ""
    print(f"run_notebook: {notebook.name}: {cells} code cells ran without error, {images} "
          f"figures shown{kept}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
