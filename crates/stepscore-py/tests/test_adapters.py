"""Each trainer adapter called with its trainer's documented argument
shapes (no trainer installed): TRL reward functions, verl compute_score
and a DataProto-shaped batch for the dense reward manager, OpenRLHF's
reward_func."""

import asyncio

import numpy as np
import pytest

import stepscore
from stepscore.adapters import message_text
from stepscore.adapters import openrlhf, trl, verl
from conftest import TINY

PROBLEM = "What is 12 + 21?"
GOOD = "12 + 21 = 33.\n\nThe answer is \\boxed{33}."
BAD = "12 + 21 = 34.\n\nThe answer is \\boxed{34}."


def expected(tiny, problem, response, how="min"):
    steps = [s["text"] for s in stepscore.segment(response)]
    return tiny.score(problem, steps).aggregate(how)


def test_trl_standard_format(tiny):
    f = trl.reward_function(tiny, aggregation="mean")
    assert f.__name__ == "stepscore_prm"
    prompts = [PROBLEM, PROBLEM, PROBLEM]
    completions = [GOOD, BAD, "   "]
    # TRL passes keywords: prompts, completions, completion_ids, and the dataset's other columns.
    out = f(prompts=prompts, completions=completions, completion_ids=[[1, 2], [3], []],
            ground_truth=["33", "33", "33"], trainer_state=None)
    assert len(out) == 3
    assert out[0] == pytest.approx(expected(tiny, PROBLEM, GOOD, "mean"), abs=1e-12)
    assert out[1] == pytest.approx(expected(tiny, PROBLEM, BAD, "mean"), abs=1e-12)
    assert out[2] is None  # nothing to score


def test_trl_conversational_format(tiny):
    f = trl.reward_function(tiny)
    prompts = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROBLEM}]]
    completions = [[{"role": "assistant", "content": GOOD}]]
    out = f(prompts, completions)
    assert out == [pytest.approx(expected(tiny, PROBLEM, GOOD), abs=1e-12)]


def test_trl_async(tiny):
    f = trl.async_reward_function(tiny, name="prm_async")
    assert asyncio.iscoroutinefunction(f) and f.__name__ == "prm_async"
    out = asyncio.run(f(prompts=[PROBLEM], completions=[GOOD], completion_ids=[[1]]))
    assert out == [pytest.approx(expected(tiny, PROBLEM, GOOD), abs=1e-12)]


def test_message_text():
    assert message_text("x", "user") == "x"
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
            {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]
    assert message_text(msgs, "user") == "c"
    assert message_text(msgs, "assistant") == "b\n\nd"
    with pytest.raises(TypeError):
        message_text(3, "user")


def test_verl_compute_score(tiny):
    cs = verl.compute_score_fn(tiny)
    # verl calls it with keywords (and extra ones such as step/tokenizer in newer versions).
    out = cs(data_source="gsm8k", solution_str=GOOD, ground_truth="33", extra_info={"question": PROBLEM},
             step=3, tokenizer=None)
    assert out["score"] == pytest.approx(expected(tiny, PROBLEM, GOOD), abs=1e-12)
    assert out["correct"] == 1.0 and out["steps"] == 2.0
    # Positionally, as older verl versions call it.
    out2 = cs("gsm8k", BAD, "33", {"question": PROBLEM})
    assert out2["correct"] == 0.0
    gated = verl.compute_score_fn(tiny, mode="gated")
    assert gated("gsm8k", BAD, "33", {"question": PROBLEM})["score"] == 0.0
    assert gated("gsm8k", GOOD, "33", {"question": PROBLEM})["score"] == pytest.approx(out["score"])
    outcome = verl.compute_score_fn(tiny, mode="outcome")
    assert outcome("gsm8k", GOOD, "33")["score"] == 1.0
    unscored = cs("gsm8k", "", "33")
    assert unscored["score"] == 0.0 and np.isnan(unscored["prm"])
    with pytest.raises(ValueError):
        verl.compute_score_fn(tiny, mode="other")


class CharTokenizer:
    """A tokenizer whose tokens are 1-3 characters (ids index a vocabulary)."""

    def __init__(self):
        self.vocab = ["<pad>", "<eos>"]

    def encode(self, text):
        ids, i = [], 0
        while i < len(text):
            piece = text[i:i + 1 + (i % 3)]
            if piece not in self.vocab:
                self.vocab.append(piece)
            ids.append(self.vocab.index(piece))
            i += len(piece)
        return ids

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.vocab[i] for i in ids if not (skip_special_tokens and i < 2))


class Item:
    def __init__(self, batch, non_tensor_batch):
        self.batch = batch
        self.non_tensor_batch = non_tensor_batch


class FakeDataProto:
    """DataProto's shape: `batch` of [B, ...] arrays (prompts left-padded,
    responses right-padded, attention_mask over both), `non_tensor_batch`
    of object arrays, `len()` and `[i]` giving a DataProtoItem."""

    def __init__(self, tok, problems, responses, plen=24, rlen=40):
        B = len(problems)
        prompts = np.zeros((B, plen), np.int64)
        resp = np.zeros((B, rlen), np.int64)
        mask = np.zeros((B, plen + rlen), np.int64)
        for i, (p, r) in enumerate(zip(problems, responses)):
            pi = tok.encode(p)[-plen:]
            ri = (tok.encode(r) + [1])[:rlen]
            prompts[i, plen - len(pi):] = pi
            mask[i, plen - len(pi):plen] = 1
            resp[i, :len(ri)] = ri
            mask[i, plen:plen + len(ri)] = 1
        self.batch = {"prompts": prompts, "responses": resp, "attention_mask": mask}
        self.non_tensor_batch = {
            "data_source": np.array(["gsm8k"] * B, dtype=object),
            "reward_model": np.array([{"ground_truth": "33"}] * B, dtype=object),
            "extra_info": np.array([{"question": p} for p in problems], dtype=object),
        }

    def __len__(self):
        return len(self.batch["responses"])

    def __getitem__(self, i):
        return Item({k: v[i] for k, v in self.batch.items()}, {k: v[i] for k, v in self.non_tensor_batch.items()})


def test_offsets_from_ids():
    tok = CharTokenizer()
    text = "ab\n\ncdé✓"
    ids = tok.encode(text) + [1]
    decoded, offsets = verl.offsets_from_ids(tok, ids)
    assert decoded == text
    assert offsets[-1] == (len(text), len(text))  # <eos> decodes to nothing
    assert "".join(decoded[s:e] for s, e in offsets) == text


@pytest.mark.parametrize("mode", ["last-token", "spread"])
def test_verl_dense_reward_manager(tiny, mode):
    tok = CharTokenizer()
    problems = [PROBLEM, PROBLEM]
    responses = [GOOD, BAD]
    data = FakeDataProto(tok, problems, responses)
    manager = verl.DenseRewardManager(tok, num_examine=0, scorer=tiny, mode=mode)
    out = manager(data, return_dict=True)
    rt = out["reward_tensor"]
    assert rt.shape == data.batch["responses"].shape and rt.dtype == np.float32
    for i, r in enumerate(responses):
        steps = [s["text"] for s in stepscore.segment(r)]
        scores = tiny.score(PROBLEM, steps).step_scores
        assert rt[i].sum() == pytest.approx(sum(scores), abs=1e-5)
        valid = int(data.batch["attention_mask"][i, 24:].sum())
        assert np.all(rt[i, valid:] == 0)
        if mode == "last-token":
            assert np.count_nonzero(rt[i]) == len(steps)
    assert out["reward_extra_info"]["stepscore_steps"] == [2, 2]
    assert out["reward_extra_info"]["stepscore_error"] == ["", ""]
    # With an outcome compute_score, its score joins the last valid token.
    cs = verl.compute_score_fn(tiny, mode="outcome")
    both = verl.DenseRewardManager(tok, 0, cs, scorer=tiny, mode=mode)(data)
    assert both[0].sum() == pytest.approx(rt[0].sum() + 1.0, abs=1e-5)
    assert both[1].sum() == pytest.approx(rt[1].sum(), abs=1e-5)


def test_openrlhf_reward_func(tiny):
    f = openrlhf.make_reward_func(tiny)
    prompts = ["<|user|>" + PROBLEM + "<|assistant|>"] * 2
    queries = [prompts[0] + GOOD, prompts[1] + BAD]
    out = f(queries, prompts, ["33", "33"])
    assert set(out) == {"rewards", "scores", "extra_logs"}
    rewards = np.asarray(out["rewards"])
    assert rewards.shape == (2,)
    assert rewards[0] == pytest.approx(expected(tiny, prompts[0], GOOD), abs=1e-6)
    assert rewards[1] == pytest.approx(expected(tiny, prompts[1], BAD), abs=1e-6)
    assert np.all((np.asarray(out["scores"]) >= 0) & (np.asarray(out["scores"]) <= 1))
    empty = f([prompts[0]], prompts[:1], None)
    assert float(np.asarray(empty["rewards"])[0]) == 0.0
    assert float(np.asarray(empty["extra_logs"]["stepscore/unscored"])[0]) == 1.0


def test_openrlhf_module_entry_point(monkeypatch):
    monkeypatch.setenv("STEPSCORE_MODEL", str(TINY))
    monkeypatch.setattr(openrlhf, "_default", None)
    out = openrlhf.reward_func([PROBLEM + GOOD], [PROBLEM], ["33"])
    assert np.asarray(out["rewards"]).shape == (1,)
    monkeypatch.delenv("STEPSCORE_MODEL")
    monkeypatch.setattr(openrlhf, "_default", None)
    with pytest.raises(RuntimeError, match="STEPSCORE_MODEL"):
        openrlhf.reward_func([GOOD], [""], None)
