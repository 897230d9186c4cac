#!/usr/bin/env python3
"""Problems from reasoning-gym's harder generators, for the model-written
held-out test's harder part (issue 26): number theory, probability,
geometry, sequences and logic, none of them in the verifier's training,
validation or test generators (data/README.md). Only generators whose
answer the project's answer check (`extract_answer` + `answers_equal`)
can compare are taken: integers, fractions, degrees, Yes/No and one-word
relations; float answers rounded to a digit count are left out, since a
right answer written to more or fewer digits would count as wrong.

Each problem is reasoning-gym's `create_dataset(name, seed=s, size=1)[0]`
(the way scripts/data/prmdata/sources.py draws its tasks) with its default
config, for s = 1..K, as written, with its answer. The output is the input
of `scripts/eval/search_eval.py --split hard`.

usage: /work/gen-venv/bin/python scripts/eval/hard_problems.py [--per-generator 2] > data/search-eval-hard/problems.jsonl
       (/work/gen-venv: python3 -m venv /work/gen-venv && /work/gen-venv/bin/pip install reasoning-gym==0.1.25)
"""
import argparse
import importlib.metadata
import json
import sys

GENERATORS = [
    "gcd", "lcm", "fraction_simplification",  # number theory
    "dice",  # probability / counting
    "simple_geometry",  # geometry
    "number_sequence",  # patterns
    "aiw", "syllogism", "family_relationships",  # logic
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-generator", type=int, default=2)
    args = ap.parse_args()
    import reasoning_gym
    version = importlib.metadata.version("reasoning-gym")
    if version != "0.1.25":
        print(f"warning: reasoning-gym {version}; the committed problems were drawn with 0.1.25", file=sys.stderr)
    for name in GENERATORS:
        for seed in range(1, args.per_generator + 1):
            item = reasoning_gym.create_dataset(name, seed=seed, size=1)[0]
            print(json.dumps({"generator": name, "seed": seed, "problem": item["question"],
                              "reference_answer": str(item["answer"]), "source": f"reasoning-gym {version}"}))


if __name__ == "__main__":
    main()
