#!/usr/bin/env python3
"""Summarises scripts/gradient_errors.sh's records (JSON lines, one checked run each): per
precision and tensor kind (y, hy, cy, dx, dh0, dc0, grad_weight_ih, grad_weight_hh, grad_bias;
every layer's tensor of a kind together) the largest relative-norm and max-abs error against the
FP64 reference of cuDNN (over its algorithms and the shapes) and of each other stage, the ratio
stage / cuDNN, and a proposed bound: cuDNN's largest error rounded UP to 2 significant digits.
A tensor where cuDNN returned NaN/Inf is left out of cuDNN's largest (a failure of that cuDNN
algorithm at that shape, not an error to bound against) and named in a note below the tables.
A markdown table per precision; --json prints only the bounds.

usage: scripts/gradient_errors.py [--json] FILE
Exit status: 0 done, 1 FILE unreadable, malformed (the message names the line) or without a
checked record, 2 a usage error.
"""
import argparse
import json
import math
import re
import sys
from decimal import ROUND_CEILING, Decimal

KINDS = ("y", "hy", "cy", "dx", "dh0", "dc0", "grad_weight_ih", "grad_weight_hh", "grad_bias")
METRICS = ("relative_norm", "max_absolute")
CUDNN = "cuDNN"


def kind_of(tensor):
    """grad_weight_ih_l1 -> grad_weight_ih; grad_bias_ih_l0 and grad_bias_hh_l0 -> grad_bias."""
    return "grad_bias" if tensor.startswith("grad_bias") else re.sub(r"_l\d+$", "", tensor)


def round_up(x):
    """x rounded up to 2 significant digits, in decimal (1.2e-3 stays 1.2e-3); None for NaN/Inf."""
    if not math.isfinite(x) or x <= 0:
        return None if not math.isfinite(x) else 0.0
    d = Decimal(repr(x))
    return float(d.quantize(Decimal(1).scaleb(d.adjusted() - 1), ROUND_CEILING))


def read(path):
    """{precision: {who: {kind: {metric: largest}}}} and {precision: {kind: {metric: bound}}}."""
    largest, bounds, checked, notes = {}, {}, 0, []
    with open(path, "rb") as lines:  # decoded line by line: a non-UTF-8 line is named
        for number, line in enumerate(lines, 1):
            try:
                line = line.decode("utf-8")
                if not line.strip():
                    continue
                record = json.loads(line)
                stage, precision, check = record["stage"], record["precision"], record["check"]
                if not check.get("performed", True):
                    continue
                errors = largest.setdefault(precision, {}).setdefault(
                    CUDNN if stage.startswith("cudnn_") else stage, {})
                bounds.setdefault(precision, {})  # a table even where no tensor has a value
                for tensor, result in check["tensors"].items():
                    kind = kind_of(tensor)
                    for m in METRICS if not result.get("missing") else ():
                        if type(value := result[m]) not in (int, float, type(None)):
                            raise ValueError(f"{tensor}'s {m} is not a number: {value!r}")
                        infinite = value is None or result.get("nonfinite")  # NaN/Inf: null
                        if infinite and stage.startswith("cudnn_"):
                            notes.append(f"{stage} {precision} H={record['hidden']} "
                                         f"I={record['input_size']} B={record['batch']} "
                                         f"T={record['seq_len']} L={record['layers']}: {tensor}")
                            continue
                        slot = errors.setdefault(kind, {})
                        slot[m] = max(slot.get(m, 0.0), math.inf if infinite else value)
                        bound = bounds.setdefault(precision, {}).setdefault(kind, {})
                        bound[m] = max(bound.get(m, 0.0), result["bound"][m])
                checked += 1
            except (ValueError, KeyError, TypeError, AttributeError) as problem:
                what = f"no {problem}" if isinstance(problem, KeyError) else str(problem)
                raise ValueError(f"{path}:{number}: not a record of a checked run ({what})")
    if not checked:
        raise ValueError(f"{path}: no record of a checked run")
    return largest, bounds, sorted(set(notes))


def proposed(largest):
    return {precision: {kind: {m: round_up(errors[kind][m]) if m in errors[kind] else None
                               for m in METRICS}
                        for kind in KINDS if kind in errors}
            for precision, by_who in largest.items() if (errors := by_who.get(CUDNN))}


def table(precision, by_who, bounds, proposal):
    stages, cuda = sorted(who for who in by_who if who != CUDNN), by_who.get(CUDNN, {})
    fmt = lambda x, digits: "—" if x is None else f"{x:.{digits - 1}e}"  # noqa: E731
    head = (["tensor", "cuDNN rel. norm", "cuDNN max-abs"]
            + [f"{s} {m} (× cuDNN)" for s in stages for m in ("rel. norm", "max-abs")]
            + ["proposed bound (rel. norm / max-abs)", "bound checked against"])
    rows = [f"### {precision.upper()}", "", "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head)]
    for kind in (k for k in KINDS if any(k in errors for errors in by_who.values())):
        ref = cuda.get(kind, {})
        cells = [kind] + [fmt(ref.get(m), 3) for m in METRICS]
        for stage in stages:
            mine = by_who[stage].get(kind, {})
            for m in METRICS:
                ratio = f" ({mine[m] / ref[m]:.2f}×)" if m in mine and ref.get(m) else ""
                cells.append(fmt(mine.get(m), 3) + ratio)
        bound = proposal.get(kind)
        cells.append(" / ".join(fmt(bound[m], 2) for m in METRICS) if bound else "—")
        cells.append(" / ".join(fmt(bounds.get(kind, {}).get(m), 2) for m in METRICS))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", metavar="FILE", help="JSON lines of scripts/gradient_errors.sh")
    parser.add_argument("--json", action="store_true", help="print the proposed bounds only")
    args = parser.parse_args()  # a usage error exits 2
    try:
        largest, bounds, notes = read(args.file)
    except OSError as problem:
        sys.exit(f"gradient_errors: cannot read {args.file}: {problem.strerror}")
    except ValueError as problem:
        sys.exit(f"gradient_errors: {problem}")
    if args.json:
        return print(json.dumps(proposed(largest), indent=2, sort_keys=True))
    proposal = proposed(largest)
    order = sorted(largest, key=lambda p: (["fp32", "fp16", "bf16", p].index(p), p))
    print("\n\n".join(table(p, largest[p], bounds[p], proposal.get(p, {})) for p in order))
    if notes:
        print("\nLeft out of cuDNN's largest (NaN/Inf in cuDNN's output):")
        print("\n".join(f"- {note}" for note in notes))


if __name__ == "__main__":
    main()
