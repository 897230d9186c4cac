"""Score the steps of reasoning traces from Python.

    pip install stepscore            # or: pip install ./crates/stepscore-py
    python examples/python/score.py [MODEL]

MODEL: a catalog name (default stepscore-prm-smollm2, fetched into the cache
on first use), a GGUF file or a checkpoint directory. CI runs it with the
tiny fixture tests/fixtures/prm/skywork-prm-tiny.
"""

import sys

import stepscore

model = sys.argv[1] if len(sys.argv) > 1 else "stepscore-prm-smollm2"
scorer = stepscore.Scorer(model)  # threads: this process's share of the CPUs
print(scorer.info())

problem = "Tom has 3 boxes of 4 apples. He eats 2. How many apples are left?"
steps = ["3 boxes of 4 apples is 3 * 4 = 12 apples.", "He eats 2, so 12 - 2 = 10 apples are left.", "The answer is 10."]
result = scorer.score(problem, steps)
for step, score in zip(steps, result.step_scores):
    print(f"{score:.4f}  {step}")
threshold = scorer.threshold or 0.5
print("first step below the threshold (0-based):", result.first_error(threshold))

# Many traces at once, any row format `stepscore score` reads; a bad row does not stop the others.
rows = [
    {"problem": problem, "response": "3 * 4 = 12.\n\n12 - 2 = 10.\n\nThe answer is 10."},
    {"problem": problem, "steps": []},  # nothing to score
]
for row, r in zip(rows, scorer.score_batch(rows, errors="return")):
    print("error:" if isinstance(r, Exception) else "min:", r if isinstance(r, Exception) else r.aggregate("min"))
