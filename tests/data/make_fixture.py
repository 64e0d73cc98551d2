"""Generate the PyTorch fixture that tests/test_reference.cpp checks the CPU reference against.

It builds a small torch.nn.LSTM (H=13, I=7, B=3, T=6, L=3, gate order i, f, g, o), draws
x, h0 and c0 uniform in [-1, 1] as float32, runs the forward pass in float64 on the CPU from the
float32 parameters, and writes every input, parameter and output as a float32 .npy file (PyTorch
names and layouts) plus meta.json.

Run it once on a machine with PyTorch and numpy, then commit the folder it writes:

    python3 tests/data/make_fixture.py                 # writes tests/data/pytorch_fixture/
    python3 tests/data/make_fixture.py --out DIR --seed 1234
"""

import argparse
import copy
import json
from pathlib import Path

import numpy as np
import torch

HIDDEN, INPUT_SIZE, BATCH, SEQ_LEN, LAYERS = 13, 7, 3, 6, 3


def save(out: Path, name: str, tensor: torch.Tensor) -> None:
    """Writes `tensor` as float32, little-endian, C order, to out/name.npy."""
    array = np.ascontiguousarray(tensor.detach().cpu().numpy().astype("<f4"))
    np.save(out / f"{name}.npy", array)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "pytorch_fixture",
                        help="output folder (default: pytorch_fixture next to this script)")
    parser.add_argument("--seed", type=int, default=20240601, help="torch seed (default: %(default)s)")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    lstm = torch.nn.LSTM(INPUT_SIZE, HIDDEN, num_layers=LAYERS, batch_first=False)  # float32
    x = torch.empty(SEQ_LEN, BATCH, INPUT_SIZE, dtype=torch.float32).uniform_(-1.0, 1.0)
    h0 = torch.empty(LAYERS, BATCH, HIDDEN, dtype=torch.float32).uniform_(-1.0, 1.0)
    c0 = torch.empty(LAYERS, BATCH, HIDDEN, dtype=torch.float32).uniform_(-1.0, 1.0)

    # The parameters are float32 already; the forward pass runs in float64 on exactly those values.
    lstm64 = copy.deepcopy(lstm).double().cpu()
    with torch.no_grad():
        y, (hy, cy) = lstm64(x.double(), (h0.double(), c0.double()))

    args.out.mkdir(parents=True, exist_ok=True)
    save(args.out, "x", x)
    save(args.out, "h0", h0)
    save(args.out, "c0", c0)
    for k in range(LAYERS):
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            save(args.out, f"{name}_l{k}", getattr(lstm, f"{name}_l{k}"))
    save(args.out, "y", y)
    save(args.out, "hy", hy)
    save(args.out, "cy", cy)

    meta = {
        "hidden": HIDDEN, "input_size": INPUT_SIZE, "batch": BATCH, "seq_len": SEQ_LEN,
        "layers": LAYERS, "seed": args.seed,
        "torch_version": torch.__version__, "numpy_version": np.__version__,
        "outputs": "outputs computed by torch.nn.LSTM in float64 on the CPU from the float32 "
                   "parameters above, stored as float32",
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
