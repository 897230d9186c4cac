#!/usr/bin/env python3
"""ProcessBench for one final PRM: score all 3,400 traces, resumably, then the table.

  processbench_run.py run   --rows PB.jsonl --out RUN_DIR [--stepscore BIN] [-- SCORE_ARGS...]
  processbench_run.py table --rows PB.jsonl --out RUN_DIR [--stepscore BIN]

PB.jsonl is scripts/data/real_steps.py --processbench's file (ProcessBench's four
splits in a fixed order, sha256 of each id, so that any prefix of it samples all
four alike). `run` cuts it into chunks of 20 traces and runs `stepscore score` on
each chunk not yet done (SCORE_ARGS pick the model and head: nothing means the
default PRM), keeping only what the metric needs: per trace its id, split, label,
step scores and token count, one small JSON line, in RUN_DIR/chunk_NNNN.jsonl
written whole or not at all. The run dir is small enough to commit, so a run
that needs more CPU hours than one machine session survives the machine;
RUN_DIR/manifest.json keys it (rows, model, head, arguments) and a rerun with
any of them different stops instead of mixing two runs. It also lists the
builds (`stepscore --version` and the binary's sha256) that scored it: a resumed run with a new build
first rescores three stored traces and stops unless it gets the same bits.

What is scored: a trace with an error labelled at step L is scored through step
L and no further. A step's score depends only on the text before and in it (the
decoder is causal, the head reads that step's hidden state and token
statistics), so the later steps can change neither the predicted first error's
correctness (if no step up to L is flagged the prediction is wrong whatever
follows) nor the step AUROC, which ProcessBench's cut limits to steps up to the
first error. That leaves out 31% of ProcessBench's characters. Correct traces
are scored whole. `run --check N` scores the first N erroneous traces of the
first chunk whole as well and stops unless their scores through L are the same
bits as the cut ones.

`table` refuses a partial run (a run on part of the set is still a run, and
issue 40's rule is one run per final candidate, nothing chosen on it); it
joins the scores with the rows and prints `stepscore eval`'s table at the
threshold the run's scorer ships (the head file's `stepscore.threshold`, recorded in the manifest). SCORE_ARGS
must name --model and --head files: their sha256 key the run.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
from extract_features import sha256  # noqa: E402

CHUNK = 20
ROWS_TOTAL = 3400


def read_rows(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def cut(row):
    """The steps that decide the metric (the module docstring says why)."""
    return row["steps"] if row["label"] < 0 else row["steps"][: row["label"] + 1]


def score(binary, extra, rows):
    """`stepscore score` over rows as given: per row (scores, tokens), by id."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
        path = f.name
    try:
        p = subprocess.run([binary, "score", "--output", "jsonl", *extra, path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        os.unlink(path)
    if p.returncode != 0:
        sys.exit(f"stepscore score exited {p.returncode}:\n{p.stderr}")
    out = {}
    for line in p.stdout.splitlines():
        t = json.loads(line)
        info = t["metadata"]["stepscore"]
        if info.get("truncated_steps"):
            sys.exit(f"{t['id']}: {info['truncated_steps']} steps truncated by the scorer")
        out[t["id"]] = ([s["score"] for s in t["steps"]], info["tokens"])
    missing = [r["id"] for r in rows if r["id"] not in out]
    if missing:
        sys.exit(f"stepscore score wrote no output for {missing}")
    return out


def head_threshold(path):
    """The `stepscore.threshold` a head file ships (safetensors' JSON header)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(n)).get("__metadata__", {})
    if "stepscore.threshold" not in meta:
        sys.exit(f"{path}: the head ships no stepscore.threshold")
    return float(meta["stepscore.threshold"])


def describe(extra):
    """What the scores depend on, for the manifest: the arguments, the model and head files'
    sha256 and the threshold the head ships."""
    def value(flag):
        if flag not in extra or extra.index(flag) + 1 >= len(extra):
            sys.exit(f"name the scorer explicitly: pass {flag} FILE after -- (the default PRM is the "
                     f"catalog's GGUF with models/qwen2.5-coder-1.5b-real-errors-head.safetensors)")
        return extra[extra.index(flag) + 1]
    model, head = value("--model"), value("--head")
    args = [os.path.basename(a) if a in (model, head) else a for a in extra]
    return {"score_args": " ".join(args),
            "model": os.path.basename(model), "model_sha256": sha256(model),
            "head": os.path.basename(head), "head_sha256": sha256(head),
            "threshold": head_threshold(head)}


def check_manifest(out, want):
    path = os.path.join(out, "manifest.json")
    have = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            have = json.load(f)
    for key in sorted(set(have) | set(want)):
        if key in have and key != "binaries" and have.get(key) != want.get(key):
            sys.exit(f"{path}: {key} was {have.get(key)!r}, this run's is {want.get(key)!r}: another run's "
                     f"scores are there; use another --out")
    os.makedirs(out, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(want, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)
    return want


def same_binary(args, extra, chunks, version, binaries):
    """A run resumed with another build: its scores must be the earlier build's bits (rescored:
    the first chunk's first three traces), else the two builds' chunks would mix."""
    with open(os.path.join(args.out, "chunk_0000.jsonl"), encoding="utf-8") as f:
        stored = {r["id"]: r["scores"] for r in map(json.loads, f)}
    probe = chunks[0][:3]
    now = score(args.stepscore, extra, [dict(r, steps=cut(r)) for r in probe])
    for r in probe:
        if now[r["id"]][0] != stored[r["id"]]:
            sys.exit(f"{version} scores {r['id']} {now[r['id']][0]}, the run's earlier builds "
                     f"({', '.join(binaries)}) scored {stored[r['id']]}: not the same bits; use another --out")
    print(f"{version}: the first 3 traces rescored to the same bits as {', '.join(binaries)}", flush=True)


def run(args, extra):
    rows = read_rows(args.rows)
    want = describe(extra)
    want["rows_sha256"] = sha256(args.rows)
    want["chunk"] = CHUNK
    chunks = [rows[i:i + CHUNK] for i in range(0, len(rows), CHUNK)]
    exe = shutil.which(args.stepscore) or args.stepscore
    version = subprocess.run([exe, "--version"], stdout=subprocess.PIPE, text=True,
                             check=True).stdout.strip() + " sha256 " + sha256(exe)[:16]
    path = os.path.join(args.out, "manifest.json")
    binaries = json.load(open(path, encoding="utf-8")).get("binaries", []) if os.path.exists(path) else []
    if version not in binaries and os.path.exists(os.path.join(args.out, "chunk_0000.jsonl")):
        check_manifest(args.out, dict(want, binaries=binaries))
        same_binary(args, extra, chunks, version, binaries)
    want["binaries"] = binaries + [version] if version not in binaries else binaries
    check_manifest(args.out, want)
    if args.check:
        wrong = [r for r in chunks[0] if r["label"] >= 0][: args.check]
        whole = score(args.stepscore, extra, wrong)
        part = score(args.stepscore, extra, [dict(r, steps=cut(r)) for r in wrong])
        for r in wrong:
            n = r["label"] + 1
            if whole[r["id"]][0][:n] != part[r["id"]][0]:
                sys.exit(f"{r['id']}: scores through step {r['label']} differ scored whole and cut: "
                         f"{whole[r['id']][0][:n]} vs {part[r['id']][0]}")
        print(f"check: {len(wrong)} erroneous traces, cut and whole, same bits through the labelled step",
              flush=True)
    for i, chunk in enumerate(chunks):
        path = os.path.join(args.out, f"chunk_{i:04d}.jsonl")
        if os.path.exists(path):
            continue
        t0 = time.time()
        scored = score(args.stepscore, extra, [dict(r, steps=cut(r)) for r in chunk])
        tokens = sum(scored[r["id"]][1] for r in chunk)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            for r in chunk:
                s, n = scored[r["id"]]
                f.write(json.dumps({"id": r["id"], "split": r["split"], "label": r["label"],
                                    "scores": s, "tokens": n}) + "\n")
        os.replace(path + ".tmp", path)
        dt = time.time() - t0
        print(f"{time.strftime('%H:%M:%S')} chunk {i} of {len(chunks)}: {tokens} tokens in {dt:.0f} s "
              f"({tokens / dt:.1f} tokens/s)", flush=True)


def table(args):
    rows = read_rows(args.rows)
    with open(os.path.join(args.out, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    if manifest["rows_sha256"] != sha256(args.rows):
        sys.exit(f"{args.rows} is not the file this run scored")
    scored = {}
    for name in sorted(os.listdir(args.out)):
        if name.startswith("chunk_") and name.endswith(".jsonl"):
            with open(os.path.join(args.out, name), encoding="utf-8") as f:
                for line in f:
                    r = json.loads(line)
                    scored[r["id"]] = r
    if len(rows) != ROWS_TOTAL or len(scored) != len(rows):
        sys.exit(f"the run is partial ({len(scored)} of {len(rows)} traces scored): not scored")
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for r in rows:
            s = scored[r["id"]]
            steps = cut(r)
            if len(s["scores"]) != len(steps) or s["label"] != r["label"]:
                sys.exit(f"{r['id']}: {len(s['scores'])} scores for {len(steps)} steps")
            f.write(json.dumps({"id": r["id"], "split": r["split"], "problem": r["problem"],
                                "steps": steps, "label": r["label"], "scores": s["scores"]},
                               ensure_ascii=False) + "\n")
        path = f.name
    try:
        tokens = sum(s["tokens"] for s in scored.values())
        print(f"== {manifest.get('head', 'built-in head')} on {manifest.get('model')}, threshold "
              f"{manifest['threshold']}, {len(rows)} traces, {tokens} tokens scored")
        r = subprocess.run([args.stepscore, "eval", path, "--threshold", str(manifest["threshold"]),
                            "--output", args.output])
    finally:
        os.unlink(path)
    sys.exit(r.returncode)


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["run", "table"])
    ap.add_argument("--rows", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stepscore", default="stepscore")
    ap.add_argument("--check", type=int, default=0)
    ap.add_argument("--output", default="table", choices=["table", "jsonl"])
    args = ap.parse_args(argv)
    if args.command == "run":
        run(args, extra)
    else:
        table(args)


if __name__ == "__main__":
    main()
