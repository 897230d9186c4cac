"""verl's own loading and calling paths for the documented recipes, with
configs shaped like each version's and overrides applied the way Hydra
applies them (OmegaConf in struct mode: a key that is not in the config is
an error unless the override starts with ``+``).

Read against the PyPI wheels (verl imports torch, so it is not installed):

- verl 0.9.1: ``trainer/config/reward/reward.yaml`` (the ``reward:``
  section), ``trainer/ppo/reward.py`` (``get_custom_reward_fn``,
  ``resolve_reward_manager_cls``, ``load_reward_manager``),
  ``experimental/reward_loop/reward_loop.py`` (``RewardLoopWorker``,
  ``reward.num_workers`` actors created with no ``num_cpus``),
  ``experimental/reward_loop/reward_manager/naive.py`` (how
  ``compute_score`` is called) and ``experimental/agent_loop/agent_loop.py``
  (``_compute_score``: one trajectory per ``compute_score.remote`` on a
  random worker; ``_postprocess``: ``torch.tensor(scores)`` on each
  sample's last token, so ``reward_score`` must be one number);
- verl 0.7.0: ``trainer/config/_generated_ppo_trainer.yaml`` (top-level
  ``reward_manager:``; ``reward_model.reward_manager`` is a plain string,
  ``reward_model.use_reward_loop: true``), ``trainer/ppo/reward.py``
  (``load_reward_manager``, ``compute_reward``), ``trainer/main_ppo.py``
  (``**config.reward_model.get("reward_kwargs", {})``) and
  ``trainer/ppo/ray_trainer.py`` (with ``use_reward_loop`` the batch already
  has ``rm_scores`` and the legacy reward function is never called).

The recipes are ``stepscore.adapters.verl.RECIPES``, the lines the README
prints. The scorer is stubbed at the adapter boundary (tests/stub_core.py);
the dense reward manager's call needs the compiled core.
"""

import asyncio
import importlib
import importlib.util
import os
import random
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from stub_core import NATIVE, StubScorer, needs_core  # noqa: F401  (imports stepscore, with or without the core)

import stepscore.adapters as adapters
from stepscore.adapters import verl

omegaconf = pytest.importorskip("omegaconf", reason="SKIPPED: omegaconf is not installed (pip install omegaconf)")
from omegaconf import OmegaConf, open_dict  # noqa: E402
import yaml  # noqa: E402  (omegaconf's dependency)

README = Path(__file__).resolve().parents[3] / "README.md"
PROBLEM = "What is 12 + 21?"
GOOD = "12 + 21 = 33.\n\nThe answer is \\boxed{33}."
BAD = "12 + 21 = 34.\n\nThe answer is \\boxed{34}."

# The sections the recipes touch, as each version's YAML has them.
VERL_0_9_1 = """
data: {reward_fn_key: data_source}
actor_rollout_ref: {model: {path: policy, tokenizer_path: null}}
reward:
  _target_: verl.workers.config.RewardConfig
  num_workers: 8
  custom_reward_function: {path: null, name: compute_score}
  reward_manager:
    _target_: verl.workers.config.reward.RewardManagerConfig
    source: register
    name: naive
    module: {_target_: verl.trainer.config.config.ModuleConfig, path: null, name: custom_reward_manager}
  reward_model: {_target_: verl.workers.config.RewardModelConfig, enable: false, enable_resource_pool: false,
                 model_path: null}
  sandbox_fusion: {url: null, max_concurrent: 64, memory_limit_mb: 1024}
"""

VERL_0_7_0 = """
data: {reward_fn_key: data_source}
actor_rollout_ref: {model: {path: policy}}
reward_model:
  enable: false
  enable_resource_pool: false
  reward_manager: naive
  reward_loop_source: register
  reward_loop_module_path: null
  reward_loop_class_name: null
  launch_reward_fn_async: false
  sandbox_fusion: {url: null, max_concurrent: 64, memory_limit_mb: 1024}
  use_reward_loop: true
  num_workers: 1
reward_manager:
  _target_: verl.trainer.config.config.RewardManagerConfig
  source: register
  name: ${oc.select:reward_model.reward_manager,naive}
  module: {_target_: verl.trainer.config.config.ModuleConfig, path: null, name: custom_reward_manager}
custom_reward_function: {path: null, name: compute_score}
"""


def hydra_config(base, overrides):
    """The base YAML with Hydra-style overrides: ``key=value`` must name an
    existing key, ``+key=value`` adds one; values parsed as YAML scalars."""
    cfg = OmegaConf.create(base)
    OmegaConf.set_struct(cfg, True)
    for o in overrides:
        key, _, value = o.partition("=")
        value = yaml.safe_load(value)
        if key.startswith("+"):
            with open_dict(cfg):
                OmegaConf.update(cfg, key[1:], value, merge=True)
        else:
            OmegaConf.update(cfg, key, value, merge=True)
    return cfg


def load_extern_object(module_path, object_name):
    """verl.utils.import_utils.load_extern_object (0.7.0 and 0.9.1)."""
    if module_path.startswith("pkg://"):
        module = importlib.import_module(module_path[len("pkg://"):].replace("/", "."))
    else:
        if module_path.startswith("file://"):
            module_path = module_path[len("file://"):]
        spec = importlib.util.spec_from_file_location(f"custom_module_{hash(os.path.abspath(module_path))}", module_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return getattr(module, object_name)


def default_compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """Stands in for verl.utils.reward_score.default_compute_score (rule-based, by data source)."""
    return float(solution_str.strip().endswith("\\boxed{%s}." % ground_truth))


# verl 0.9.1, trainer/ppo/reward.py
def get_custom_reward_fn_0_9_1(config):
    reward_fn_config = config.reward.get("custom_reward_function") or {}
    module_path = reward_fn_config.get("path")
    if not module_path:
        return None
    raw_fn = load_extern_object(module_path=module_path, object_name=reward_fn_config.get("name"))
    reward_kwargs = dict(reward_fn_config.get("reward_kwargs", {}))
    return partial(lambda raw, extra, *a, **k: raw(*a, **{**k, **extra}), raw_fn, reward_kwargs)


def load_reward_manager_0_9_1(config, tokenizer, **reward_kwargs):
    compute_score = get_custom_reward_fn_0_9_1(config)
    cfg = config.reward.reward_manager
    if cfg.source == "register":
        cls = NaiveRewardManager  # verl's registry; "naive" is the default
    elif cfg.source == "importlib":
        assert cfg.module is not None and cfg.module.path is not None
        cls = load_extern_object(module_path=cfg.module.path, object_name=cfg.name)
    else:
        raise ValueError(cfg.source)
    return cls(config=config, tokenizer=tokenizer, compute_score=compute_score or default_compute_score,
               **reward_kwargs)


class NaiveRewardManager:
    """verl 0.9.1's reward-loop ``naive`` manager, its ``compute_score`` call."""

    def __init__(self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None):
        self.tokenizer, self.compute_score = tokenizer, compute_score

    async def run_single(self, data):
        item = data[len(data) - 1]
        n = int(item.batch["attention_mask"][-item.batch["responses"].shape[-1]:].sum())
        response_str = self.tokenizer.decode(item.batch["responses"][:n], skip_special_tokens=True)
        extra_info = dict(item.non_tensor_batch.get("extra_info", {}))
        result = await asyncio.get_running_loop().run_in_executor(None, lambda: self.compute_score(
            data_source=item.non_tensor_batch["data_source"], solution_str=response_str,
            ground_truth=item.non_tensor_batch["reward_model"]["ground_truth"], extra_info=extra_info))
        if isinstance(result, dict):
            return {"reward_score": result["score"], "reward_extra_info": dict(result)}
        return {"reward_score": result, "reward_extra_info": {"acc": result}}


class RewardLoopWorker:
    """verl 0.9.1: one per ``reward.num_workers`` (a Ray actor each, with its own model copy)."""

    def __init__(self, config, tokenizer):
        self.config = config
        self.reward_manager = load_reward_manager_0_9_1(config, tokenizer, reward_router_address=None,
                                                        reward_model_tokenizer=None)

    async def compute_score(self, data):
        return await self.reward_manager.run_single(data)


def agent_loop_rewards(workers, items):
    """verl 0.9.1's agent loop: each trajectory's compute_score on a random
    worker as it finishes, then _postprocess's rm_scores (one number per
    sample on its last response token)."""
    rng = random.Random(0)

    async def run():
        return await asyncio.gather(*[rng.choice(workers).compute_score(item) for item in items])

    results = asyncio.run(run())
    scores = np.asarray([r["reward_score"] for r in results], dtype=np.float32)  # torch.tensor(scores, float32)
    assert scores.shape == (len(items),), "reward_score must be one number per trajectory"
    for key in results[0]["reward_extra_info"]:  # RewardLoopManager / agent loop stack extra info by key
        np.array([r["reward_extra_info"][key] for r in results])
    return scores, results


class CharTokenizer:
    """ids: 0 pad, 1 eos, ord(c) + 2."""

    eos_token_id = 1
    all_special_ids = [0, 1]

    def encode(self, text):
        return [ord(c) + 2 for c in text]

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=False):
        # a fast tokenizer's encoding with its offset mapping (verl.token_offsets reads it)
        return {"input_ids": self.encode(text), "offset_mapping": [(i, i + 1) for i in range(len(text))]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join("" if int(i) < 2 else chr(int(i) - 2) for i in ids if not (skip_special_tokens and int(i) < 2))


class Item:
    def __init__(self, batch, non_tensor_batch):
        self.batch, self.non_tensor_batch = batch, non_tensor_batch


class Batch:
    """A DataProto-shaped batch: left-padded prompts, right-padded responses."""

    def __init__(self, batch, non_tensor_batch):
        self.batch, self.non_tensor_batch = batch, non_tensor_batch

    @classmethod
    def make(cls, tok, problems, responses, truths, plen=24, rlen=64):
        n = len(problems)
        prompts = np.zeros((n, plen), dtype=np.int64)
        resp = np.zeros((n, rlen), dtype=np.int64)
        mask = np.zeros((n, plen + rlen), dtype=np.int64)
        for i, (p, r) in enumerate(zip(problems, responses)):
            pi = tok.encode(p)[-plen:]
            ri = (tok.encode(r) + [tok.eos_token_id])[:rlen]
            prompts[i, plen - len(pi):] = pi
            mask[i, plen - len(pi):plen] = 1
            resp[i, :len(ri)] = ri
            mask[i, plen:plen + len(ri)] = 1
        nt = {
            "data_source": np.array(["gsm8k"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": t} for t in truths], dtype=object),
            "extra_info": np.array([{"question": p} for p in problems], dtype=object),
        }
        return cls({"prompts": prompts, "responses": resp, "attention_mask": mask,
                    "input_ids": np.concatenate([prompts, resp], axis=1)}, nt)

    def __len__(self):
        return len(self.batch["prompts"])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Batch({k: v[i] for k, v in self.batch.items()}, {k: v[i] for k, v in self.non_tensor_batch.items()})
        return Item({k: v[i] for k, v in self.batch.items()}, {k: v[i] for k, v in self.non_tensor_batch.items()})


@pytest.fixture
def stub(monkeypatch):
    s = StubScorer()
    monkeypatch.setattr(adapters, "_scorers", {})
    monkeypatch.setattr(adapters, "Scorer", lambda model, **options: s)
    if not NATIVE:  # the answer check is the core's; a stand-in without it (also for a copy loaded by path)
        import stepscore

        def extract(t):
            return t.rsplit("\\boxed{", 1)[1].split("}")[0] if "\\boxed{" in t else None

        for module in (verl, stepscore):
            monkeypatch.setattr(module, "extract_answer", extract)
            monkeypatch.setattr(module, "answers_equal", lambda a, b: a.strip() == b.strip())
    return s


def rollouts(tok, responses=(GOOD, BAD, GOOD, "")):
    data = Batch.make(tok, [PROBLEM] * len(responses), list(responses), ["33"] * len(responses))
    return data, [data[i:i + 1] for i in range(len(data))]


def test_readme_prints_the_recipes():
    text = README.read_text()
    for version, recipe in verl.RECIPES.items():
        for override in recipe:
            assert override in text, f"verl {version}: {override} is not in the README"


def test_0_9_1_reward_loop_manager_recipe(stub):
    tok = CharTokenizer()
    cfg = hydra_config(VERL_0_9_1, verl.RECIPES["0.9.1"])
    assert cfg.reward.num_workers == 2 and cfg.reward.reward_kwargs.threads == 4
    workers = [RewardLoopWorker(cfg, tok) for _ in range(cfg.reward.num_workers)]
    assert all(isinstance(w.reward_manager, verl.StepRewardManager) for w in workers)
    data, items = rollouts(tok)
    scores, results = agent_loop_rewards(workers, items)
    assert scores[0] == pytest.approx(StubScorer.expected(GOOD))
    assert scores[1] == 0.0  # gated: the wrong answer
    assert scores[3] == 0.0 and np.isnan(results[3]["reward_extra_info"]["prm"])  # empty: unscored
    assert sum(stub.calls) == 4  # every trajectory scored once, in batches of what reached a worker together
    # RewardLoopManager.compute_rm_score (reward model colocated) calls the class's assemble_rm_scores
    rm = verl.StepRewardManager.assemble_rm_scores(data, list(scores))
    assert rm.shape == data.batch["responses"].shape and np.count_nonzero(rm[0]) == 1


def test_0_9_1_one_trajectory_per_call_is_batched_per_worker(stub):
    # The agent loop sends one trajectory per call; the calls that are in a
    # worker's event loop together are scored in one score_batch.
    tok = CharTokenizer()
    cfg = hydra_config(VERL_0_9_1, verl.RECIPES["0.9.1"])
    worker = RewardLoopWorker(cfg, tok)
    _, items = rollouts(tok, [GOOD] * 6)
    agent_loop_rewards([worker], items)
    assert stub.calls == [6]


@pytest.mark.parametrize("path", ["pkg://stepscore.adapters.verl", "file"])
def test_0_9_1_compute_score_recipe(stub, path):
    tok = CharTokenizer()
    recipe = list(verl.RECIPES["0.9.1-compute_score"])
    if path == "file":  # custom_reward_function.path=/path/to/verl.py: loaded outside its package
        recipe = [o.replace("pkg://stepscore.adapters.verl", verl.__file__) for o in recipe]
    cfg = hydra_config(VERL_0_9_1, recipe)
    worker = RewardLoopWorker(cfg, tok)
    assert isinstance(worker.reward_manager, NaiveRewardManager)
    _, items = rollouts(tok)
    scores, results = agent_loop_rewards([worker], items)
    assert scores[0] == pytest.approx(StubScorer.expected(GOOD)) and scores[3] == 0.0
    assert stub.calls == [1, 1, 1, 1]  # verl calls compute_score once per sample: batches of one


def test_0_9_1_has_no_dense_path():
    # The legacy DenseRewardManager's documented override (reward_model.*) is
    # not in 0.9.1's reward config, and the agent loop takes one number per
    # trajectory: a per-token list cannot become rm_scores.
    with pytest.raises(omegaconf.errors.OmegaConfBaseException):
        hydra_config(VERL_0_9_1, ["reward_model.reward_manager.name=DenseRewardManager"])
    with pytest.raises(ValueError):
        np.asarray([[0.1, 0.0, 0.5], [0.2, 0.3]], dtype=np.float32)  # what _postprocess would get


def test_0_7_0_old_recipe_cannot_be_set():
    # The README's old lines: reward_model.reward_manager is a plain string on 0.7.0.
    with pytest.raises(omegaconf.errors.OmegaConfBaseException):
        hydra_config(VERL_0_7_0, ["reward_model.reward_manager.source=importlib"])


def load_reward_manager_0_7_0(config, tokenizer, num_examine, **reward_kwargs):
    cfg = config.reward_manager
    assert cfg.source == "importlib"
    cls = load_extern_object(module_path=cfg.module.path, object_name=cfg.name)
    # not a RewardManagerBase: the AbstractRewardManager signature
    return cls(tokenizer=tokenizer, num_examine=num_examine, compute_score=default_compute_score,
               reward_fn_key=config.data.reward_fn_key, **reward_kwargs)


def test_0_7_0_dense_recipe_builds_as_main_ppo_builds_it(stub):
    tok = CharTokenizer()
    cfg = hydra_config(VERL_0_7_0, verl.RECIPES["0.7.0"])
    # ray_trainer: with use_reward_loop the batch has rm_scores and reward_fn is never called
    assert cfg.reward_model.use_reward_loop is False
    reward_fn = load_reward_manager_0_7_0(cfg, tok, num_examine=0, **cfg.reward_model.get("reward_kwargs", {}))
    assert isinstance(reward_fn, verl.DenseRewardManager)
    assert reward_fn.options["shaping"] == "clip-delta" and reward_fn.scorer is stub


@needs_core
def test_0_7_0_dense_recipe_computes_dense_rewards(monkeypatch):
    from conftest import TINY

    monkeypatch.setattr(adapters, "_scorers", {})
    tok = CharTokenizer()
    recipe = [o.replace("stepscore-prm-smollm2", str(TINY)) for o in verl.RECIPES["0.7.0"]] + [
        "+reward_model.reward_kwargs.threads=1"]
    cfg = hydra_config(VERL_0_7_0, recipe)
    reward_fn = load_reward_manager_0_7_0(cfg, tok, num_examine=0, **cfg.reward_model.get("reward_kwargs", {}))
    data, _ = rollouts(tok)
    out = reward_fn(data, return_dict=True)  # verl 0.7.0 compute_reward
    rt = out["reward_tensor"]
    assert rt.shape == data.batch["responses"].shape
    assert out["reward_extra_info"]["stepscore_steps"] == [2, 2, 2, 0]  # per-step rewards; the empty one unscored
    assert out["reward_extra_info"]["stepscore_error"][3]
    assert np.array_equal(rt[0], rt[2])  # the same response, the same token rewards
    plen = data.batch["prompts"].shape[1]
    for i in range(len(data)):
        n = int(data.batch["attention_mask"][i, plen:].sum())
        assert np.all(rt[i, n:] == 0)  # nothing past the response
