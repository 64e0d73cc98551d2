"""Generate the PyTorch training fixture that tests/test_reference_backward.cpp checks the CPU reference's backward pass against.

It builds a small torch.nn.LSTM (H=11, I=7, B=3, T=5, L=3, gate order i, f, g, o; odd sizes,
I != H, H not a multiple of 4), draws x, h0 and c0 and the upstream gradients dy, dhy and dcy
uniform in [-1, 1] as float32, and runs one training pass in float64 on the CPU from exactly those
float32 values:

    y, (hy, cy) = lstm(x, (h0, c0))
    torch.autograd.grad((y, hy, cy), (x, h0, c0, *parameters), (dy, dhy, dcy))

It writes every input, parameter and upstream gradient, the forward outputs and every gradient as
a float32 .npy file (PyTorch names and layouts) plus meta.json:

    inputs:    x, h0, c0, weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, dy, dhy, dcy
    outputs:   y, hy, cy, dx, dh0, dc0, grad_weight_ih_l{k}, grad_weight_hh_l{k},
               grad_bias_ih_l{k}, grad_bias_hh_l{k}

The inputs are float32 from the start, so the stored files are the exact values torch used; the
outputs are float64 results rounded once to float32.

Run it once on a machine with PyTorch and numpy, then commit the folder it writes:

    python3 tests/data/make_training_fixture.py          # writes tests/data/pytorch_training_fixture/
    python3 tests/data/make_training_fixture.py --out DIR --seed 1234
"""

import argparse
import copy
import json
import sys
from pathlib import Path

import numpy as np
import torch

HIDDEN, INPUT_SIZE, BATCH, SEQ_LEN, LAYERS = 11, 7, 3, 5, 3
PARAMETER_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def save(out: Path, name: str, tensor: torch.Tensor) -> None:
    """Writes `tensor` as float32, little-endian, C order, to out/name.npy."""
    array = np.ascontiguousarray(tensor.detach().cpu().numpy().astype("<f4"))
    np.save(out / f"{name}.npy", array)


def uniform(*shape: int) -> torch.Tensor:
    """A float32 tensor uniform in [-1, 1] from torch's global generator."""
    return torch.empty(*shape, dtype=torch.float32).uniform_(-1.0, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "pytorch_training_fixture",
                        help="output folder (default: pytorch_training_fixture next to this script)")
    parser.add_argument("--seed", type=int, default=20240602, help="torch seed (default: %(default)s)")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    lstm = torch.nn.LSTM(INPUT_SIZE, HIDDEN, num_layers=LAYERS, batch_first=False)  # float32
    x = uniform(SEQ_LEN, BATCH, INPUT_SIZE)
    h0 = uniform(LAYERS, BATCH, HIDDEN)
    c0 = uniform(LAYERS, BATCH, HIDDEN)
    dy = uniform(SEQ_LEN, BATCH, HIDDEN)
    dhy = uniform(LAYERS, BATCH, HIDDEN)
    dcy = uniform(LAYERS, BATCH, HIDDEN)

    # The parameters are float32 already; the training pass runs in float64 on exactly those values.
    lstm64 = copy.deepcopy(lstm).double().cpu()
    parameters = [getattr(lstm64, f"{name}_l{k}") for k in range(LAYERS) for name in PARAMETER_NAMES]
    x64, h064, c064 = (t.double().requires_grad_() for t in (x, h0, c0))
    y, (hy, cy) = lstm64(x64, (h064, c064))
    gradients = torch.autograd.grad((y, hy, cy), (x64, h064, c064, *parameters),
                                    (dy.double(), dhy.double(), dcy.double()))
    dx, dh0, dc0 = gradients[:3]
    parameter_gradients = gradients[3:]

    args.out.mkdir(parents=True, exist_ok=True)
    for name, tensor in (("x", x), ("h0", h0), ("c0", c0), ("dy", dy), ("dhy", dhy), ("dcy", dcy)):
        save(args.out, name, tensor)
    for k in range(LAYERS):
        for name in PARAMETER_NAMES:
            save(args.out, f"{name}_l{k}", getattr(lstm, f"{name}_l{k}"))
    for name, tensor in (("y", y), ("hy", hy), ("cy", cy), ("dx", dx), ("dh0", dh0), ("dc0", dc0)):
        save(args.out, name, tensor)
    for index, gradient in enumerate(parameter_gradients):
        k, name = divmod(index, len(PARAMETER_NAMES))
        save(args.out, f"grad_{PARAMETER_NAMES[name]}_l{k}", gradient)

    meta = {
        "hidden": HIDDEN, "input_size": INPUT_SIZE, "batch": BATCH, "seq_len": SEQ_LEN,
        "layers": LAYERS, "seed": args.seed,
        "torch_version": torch.__version__, "numpy_version": np.__version__,
        "command": "python3 " + " ".join(["tests/data/make_training_fixture.py", *sys.argv[1:]]),
        "inputs": "x, h0, c0, the parameters and dy, dhy, dcy: float32, drawn uniform in [-1, 1] "
                  "(parameters: torch.nn.LSTM's default initialisation), the exact values used",
        "outputs": "y, hy, cy and torch.autograd.grad((y, hy, cy), (x, h0, c0, *parameters), "
                   "(dy, dhy, dcy)) computed by torch.nn.LSTM in float64 on the CPU from the "
                   "float32 inputs above, stored as float32",
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
