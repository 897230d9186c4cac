"""Score a JSONL file with Ray Data, one model per actor.

    pip install "ray[data]"
    python examples/ray/score_jsonl.py [MODEL] [TRACES.jsonl]

Each actor reserves one CPU (num_cpus) and, with no `threads` given, its
scorer runs exactly the CPUs Ray reserved for it: N actors on N cores do not
each start N threads.
"""

import sys
from pathlib import Path

import ray

import stepscore.ray

model = sys.argv[1] if len(sys.argv) > 1 else "stepscore-prm-smollm2"
traces = sys.argv[2] if len(sys.argv) > 2 else str(Path(__file__).resolve().parents[1] / "traces.jsonl")

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
ray.data.DataContext.get_current().enable_progress_bars = False
# Two actors of one CPU each would hold every CPU and starve the read tasks: half a CPU each.
ds = stepscore.ray.score_jsonl(traces, model, concurrency=2, num_cpus=0.5, batch_size=16)
rows = ds.take_all()
for row in rows:
    print(row.get("id"), "min step score:", row["score"], "error:", row["error"])
assert rows and all(r["error"] is None for r in rows)
ray.shutdown()
