"""Process rewards in verl (verl 0.9.1; 0.7.0 for the dense manager). The
overrides are stepscore.adapters.verl.RECIPES (tests/test_verl_path.py
applies each to a config shaped like its version's).

Scalar rewards, verl 0.9.1's reward loop: no code, only overrides:

    python -m verl.trainer.main_ppo ... \
        reward.reward_manager.source=importlib \
        reward.reward_manager.module.path=pkg://stepscore.adapters.verl \
        reward.reward_manager.name=StepRewardManager \
        +reward.reward_kwargs.model=stepscore-prm-smollm2 \
        +reward.reward_kwargs.mode=gated \
        +reward.reward_kwargs.threads=4 \
        reward.num_workers=2

or as a custom reward function (called once per sample):

        reward.custom_reward_function.path=pkg://stepscore.adapters.verl \
        reward.custom_reward_function.name=compute_score \
        +reward.custom_reward_function.reward_kwargs.model=stepscore-prm-smollm2 \
        +reward.custom_reward_function.reward_kwargs.threads=4 \
        reward.num_workers=2

Dense per-token rewards (verl's legacy reward manager interface, verl 0.7.0;
verl 0.9.1's reward loop takes one number per trajectory):

        reward_manager.source=importlib \
        reward_manager.module.path=pkg://stepscore.adapters.verl \
        reward_manager.name=DenseRewardManager \
        reward_model.use_reward_loop=False \
        +reward_model.reward_kwargs.model=stepscore-prm-smollm2 \
        +reward_model.reward_kwargs.shaping=clip-delta

verl pulls torch, so CI runs this file without it: it calls what verl calls,
the way verl calls it (compute_score with the reward kwargs merged in; the
reward-loop manager built from a config and awaited once per sample).

    python examples/verl/reward.py [MODEL]
"""

import asyncio
import sys

import numpy as np

from stepscore.adapters import verl

model = sys.argv[1] if len(sys.argv) > 1 else "stepscore-prm-smollm2"
question = "What is 12 + 21?"
solution = "12 + 21 = 33.\n\nThe answer is \\boxed{33}."

# 1. custom_reward_function: verl's _call_with_kwargs(raw_fn, reward_kwargs, ...).
print("compute_score:", verl.compute_score(data_source="gsm8k", solution_str=solution, ground_truth="33",
                                           extra_info={"question": question}, model=model, mode="gated"))


# 2. StepRewardManager, with a DataProto-shaped batch of one sample (token ids from a toy tokenizer).
class Tokenizer:
    all_special_ids = [0]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if not (skip_special_tokens and i == 0))


class Item:
    def __init__(self, text):
        ids = [ord(c) for c in text] + [0]
        self.batch = {"prompts": np.zeros(4, np.int64), "responses": np.array(ids),
                      "attention_mask": np.array([0] * 4 + [1] * len(ids))}
        self.non_tensor_batch = {"data_source": "gsm8k", "reward_model": {"ground_truth": "33"},
                                 "extra_info": {"question": question}}


class Batch(list):
    pass


manager = verl.StepRewardManager(config={"reward": {"reward_kwargs": {"model": model}}}, tokenizer=Tokenizer(),
                                 compute_score=None)


async def main():
    return await asyncio.gather(*[manager.run_single(Batch([Item(solution)])) for _ in range(3)])


outs = asyncio.run(main())
print("StepRewardManager:", [o["reward_score"] for o in outs])
assert len({o["reward_score"] for o in outs}) == 1
