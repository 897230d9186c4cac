#!/usr/bin/env python3
"""Writes a head's first-error threshold (`stepscore.threshold`) into its
file's metadata, from `stepscore eval --calibrate` on validation traces
scored with that head: the threshold maximising ProcessBench F1 there
(`stepscore::metrics::calibrate_threshold`). Tensors and the other metadata
are untouched. `stepscore score`, the Python package and the npm package use
the shipped threshold when none is given; a head without one falls back to
0.5, which for a head whose scores do not straddle 0.5 flags every trace
(the SmolLM2 PRM's head: F1 0.0 on its validation traces at 0.5, issue 26).

    zcat data/gsm_symbolic_val.jsonl.gz | head -250 \\
      | stepscore score --model stepscore-prm-smollm2 --output jsonl - \\
      | stepscore eval --calibrate > val-eval.json
    python3 scripts/train/add_step_threshold.py val-eval.json --head data/previous-heads/smollm2-135m-gsm-value-head.safetensors
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from head_file import read_head_file, write_head_file  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("eval_json", type=Path, help="`stepscore eval --calibrate` output")
    ap.add_argument("--head", type=Path, required=True)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    report = json.loads(args.eval_json.read_text())
    pb = report["processbench"]
    threshold = pb.get("threshold")
    if threshold is None:
        raise SystemExit(f"{args.eval_json}: no calibrated threshold (run `stepscore eval --calibrate`)")
    overall = pb["overall"]
    print(f"threshold {threshold:.6f}: validation F1 {overall['f1']:.3f} (accuracy on erroneous "
          f"{overall['acc_erroneous']:.3f}, on correct {overall['acc_correct']:.3f}; "
          f"{overall['n_erroneous']} / {overall['n_correct']} traces)")
    tensors, meta = read_head_file(args.head)
    if "stepscore.threshold" in meta:
        print(f"{args.head}: replaces stepscore.threshold = {meta['stepscore.threshold']}")
    meta["stepscore.threshold"] = f"{threshold:.6f}"
    if not args.dry_run:
        write_head_file(args.head, tensors, meta)
        print(f"wrote {args.head}")


if __name__ == "__main__":
    main()
