"""A process reward for TRL's GRPOTrainer (TRL 1.16).

    from trl import GRPOConfig, GRPOTrainer
    trainer = GRPOTrainer(model=..., reward_funcs=[reward_function(scorer)], args=GRPOConfig(...), train_dataset=...)

TRL pulls torch, so CI runs this file without it: it calls the reward
function exactly as GRPOTrainer._calculate_rewards does (keywords prompts,
completions, completion_ids, the dataset's other columns, trainer_state,
log_extra, log_metric). Each TRL rank is a process of its own: a default
Scorer there runs the rank's CPU share (OMP_NUM_THREADS, which torchrun sets
to 1 per rank and accelerate's --num_cpu_threads_per_process sets too), not
every core.

    python examples/trl/reward.py [MODEL]
"""

import sys

import stepscore
from stepscore.adapters.trl import reward_function

model = sys.argv[1] if len(sys.argv) > 1 else "stepscore-prm-smollm2"
reward = reward_function(stepscore.Scorer(model), aggregation="min")

# Conversational format, as a chat dataset gives it.
prompts = [[{"role": "user", "content": "What is 12 + 21?"}]] * 2
completions = [
    [{"role": "assistant", "content": "12 + 21 = 33.\n\nThe answer is \\boxed{33}."}],
    [{"role": "assistant", "content": "12 + 21 = 34.\n\nThe answer is \\boxed{34}."}],
]
metrics = {}
rewards = reward(prompts=prompts, completions=completions, completion_ids=[[0], [0]], answer=["33", "33"],
                 trainer_state=None, log_extra=lambda column, values: None,
                 log_metric=lambda name, value: metrics.__setitem__(name, value))
print("rewards:", rewards)
print("metrics:", metrics)
assert len(rewards) == 2 and all(isinstance(r, float) for r in rewards)
