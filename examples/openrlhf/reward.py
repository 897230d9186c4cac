"""Process rewards in OpenRLHF 0.11 (the flag is --reward.remote_url; it
was --remote_rm_url before 0.11), two ways:

1. A reward function file, run inside OpenRLHF's workers:

    STEPSCORE_MODEL=stepscore-prm-smollm2 STEPSCORE_POLICY_TOKENIZER=$POLICY \\
    python -m openrlhf.cli.train_ppo_ray --actor.pretrain $POLICY --data.apply_chat_template ... \\
        --reward.remote_url "$(python -c 'import stepscore.adapters.openrlhf as m; print(m.__file__)')"

   OpenRLHF calls reward_func([query], [prompt], [label]) once per sample
   from many threads; the query is the policy tokenizer's decode of prompt +
   response with special tokens, so the policy's tokenizer is named to take
   the chat markup and EOS off before scoring.

2. `stepscore serve` as the reward server:

    stepscore serve --model stepscore-prm-smollm2 --listen 127.0.0.1:5000 --unscored-reward 0
    python -m openrlhf.cli.train_ppo_ray ... --reward.remote_url http://127.0.0.1:5000/get_reward

OpenRLHF pulls torch, so CI runs this file without it: it makes the calls
OpenRLHF makes (the function from threads at once; the HTTP payload
{"query", "prompts", "labels"} posted to a `stepscore serve` it starts).

    python examples/openrlhf/reward.py [MODEL] [POLICY_TOKENIZER]
"""

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

model = sys.argv[1] if len(sys.argv) > 1 else "stepscore-prm-smollm2"
policy = sys.argv[2] if len(sys.argv) > 2 else "none"
question = "What is 12 + 21?"
response = "12 + 21 = 33.\n\nThe answer is \\boxed{33}."

# 1. The file route, called the way OpenRLHF's SingleTurnAgentExecutor calls it.
os.environ.update(STEPSCORE_MODEL=model, STEPSCORE_POLICY_TOKENIZER=policy)
from stepscore.adapters import openrlhf  # noqa: E402

if policy != "none":
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(policy)
    prompt = tok.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                     add_generation_prompt=True)
    ids = tok(prompt, add_special_tokens=False)["input_ids"] + tok(response, add_special_tokens=False)["input_ids"]
    query = tok.decode(ids + [tok.eos_token_id], skip_special_tokens=False)
else:
    prompt = f"Question: {question}\nAnswer: "
    query = prompt + response
print("query as OpenRLHF posts it:", repr(query))


async def rollouts(n):
    return await asyncio.gather(*[asyncio.to_thread(openrlhf.reward_func, [query], [prompt], ["33"]) for _ in range(n)])


results = asyncio.run(rollouts(4))
rewards = [float(r["rewards"][0]) for r in results]
print("reward_func rewards:", rewards)
assert len(set(rewards)) == 1 and float(results[0]["extra_logs"]["stepscore/unscored"][0]) == 0

# 2. The HTTP route against `stepscore serve`.
cli = os.environ.get("STEPSCORE_CLI") or shutil.which("stepscore")
if cli is None:
    # A checkout's build: release (scripts/release.sh, cargo build --release) or debug, the newer one.
    root = Path(__file__).resolve().parents[2]
    built = [p for p in (root / "target" / "release" / "stepscore", root / "target" / "debug" / "stepscore") if p.exists()]
    if not built:
        sys.exit("no stepscore CLI: put it on PATH, set STEPSCORE_CLI, or build it (cargo build --release -p stepscore-cli)")
    cli = str(max(built, key=lambda p: p.stat().st_mtime))
server = subprocess.Popen([cli, "serve", "--model", model, "--listen", "127.0.0.1:0", "--backend", "cpu",
                           "--unscored-reward", "0"],
                          stderr=subprocess.PIPE, text=True)
try:
    url = None
    for line in server.stderr:
        m = re.search(r"serving on (http://\S+)", line)
        if m:
            url = m.group(1)
            break
    assert url, "stepscore serve did not start"
    from stepscore.client import RewardClient

    plain = f"Question: {question}\nAnswer: "
    got = RewardClient(url).get_reward([plain + response], [plain], ["33"])
    print("stepscore serve /get_reward:", got)
    assert len(got) == 1
finally:
    server.terminate()
    server.wait(timeout=30)
