"""Each trainer adapter called with its trainer's argument shapes, read from
the trainers' current sources (TRL 1.16.0, verl 0.9.1 and 0.7, OpenRLHF
0.11.2; the trainers themselves pull torch and are not installed): TRL
reward functions, verl compute_score, its reward-loop manager and a
DataProto-shaped batch for the dense reward manager, OpenRLHF's
reward_func. Policy tokenizers are real `transformers` tokenizers (the tiny
fixtures' ChatML and Llama 3.1 templates) where transformers is installed."""

import asyncio
import threading
import time

import numpy as np
import pytest

import stepscore
import stepscore.adapters as adapters
from stepscore.adapters import message_text
from stepscore.adapters import openrlhf, trl, verl
from conftest import PRM, TINY

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


def test_trl_logs_through_the_trainer(tiny):
    # TRL 1.16 passes log_metric / log_extra callbacks to reward functions.
    metrics, extra = {}, {}
    f = trl.reward_function(tiny)
    out = f(prompts=[PROBLEM, PROBLEM], completions=[GOOD, ""], completion_ids=[[1], []], trainer_state=None,
            log_metric=lambda k, v: metrics.setdefault(k, v), log_extra=lambda k, v: extra.setdefault(k, v))
    assert out[1] is None
    assert metrics == {"stepscore/unscored_fraction": 0.5}
    assert extra["stepscore_steps"][0] == tiny.score(PROBLEM, [s["text"] for s in stepscore.segment(GOOD)]).step_scores
    assert extra["stepscore_steps"][1] is None


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
    """A fast-tokenizer look-alike whose tokens are 1-3 characters (ids
    index a vocabulary; 0 and 1 are special), with an offset mapping."""

    all_special_ids = [0, 1]

    def __init__(self):
        self.vocab = ["<pad>", "<eos>"]
        self.decodes = 0

    def encode(self, text):
        ids, i = [], 0
        while i < len(text):
            piece = text[i:i + 1 + (i % 3)]
            if piece not in self.vocab:
                self.vocab.append(piece)
            ids.append(self.vocab.index(piece))
            i += len(piece)
        return ids

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=False):
        ids, offsets, i = self.encode(text), [], 0
        for t in ids:
            offsets.append((i, i + len(self.vocab[t])))
            i += len(self.vocab[t])
        return {"input_ids": ids, "offset_mapping": offsets}

    def decode(self, ids, skip_special_tokens=False):
        self.decodes += 1
        return "".join(self.vocab[i] for i in ids if not (skip_special_tokens and i < 2))


class Item:
    def __init__(self, batch, non_tensor_batch):
        self.batch = batch
        self.non_tensor_batch = non_tensor_batch


class FakeDataProto:
    """DataProto's shape: `batch` of [B, ...] arrays (prompts left-padded,
    responses right-padded, attention_mask over both), `non_tensor_batch`
    of object arrays, `len()`, `[i]` giving a DataProtoItem and `[i:j]` a
    DataProto."""

    def __init__(self, tok, problems, responses, plen=24, rlen=40, arrays=None):
        if arrays is not None:
            self.batch, self.non_tensor_batch = arrays
            return
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
        if isinstance(i, slice):
            return FakeDataProto(None, None, None, arrays=({k: v[i] for k, v in self.batch.items()},
                                                           {k: v[i] for k, v in self.non_tensor_batch.items()}))
        return Item({k: v[i] for k, v in self.batch.items()}, {k: v[i] for k, v in self.non_tensor_batch.items()})


class CountingScorer:
    """A Scorer that counts its calls (the managers must score a batch at once)."""

    def __init__(self, scorer):
        self.scorer = scorer
        self.calls = []

    def score_batch(self, traces, **kw):
        self.calls.append(("score_batch", len(traces)))
        return self.scorer.score_batch(traces, **kw)

    def score(self, *a, **kw):
        self.calls.append(("score", 1))
        return self.scorer.score(*a, **kw)


def test_token_offsets_decode_once():
    tok = CharTokenizer()
    text = "ab\n\ncdé✓ " * 30
    ids = tok.encode(text) + [1]
    decoded, offsets = verl.token_offsets(tok, ids)
    assert decoded == text
    assert tok.decodes == 1  # not one decode per token
    assert offsets[-1] == (len(text), len(text))  # <eos> decodes to nothing
    assert "".join(decoded[s:e] for s, e in offsets) == text


@pytest.mark.parametrize("mode", ["last-token", "spread"])
def test_verl_dense_reward_manager(tiny, mode, monkeypatch):
    monkeypatch.setattr(adapters, "_scorers", {})
    tok = CharTokenizer()
    problems = [PROBLEM, PROBLEM, PROBLEM]
    responses = [GOOD, BAD, ""]
    data = FakeDataProto(tok, problems, responses)
    # Built the way verl's load_reward_manager builds it: no scorer=, the model from reward_kwargs.
    manager = verl.DenseRewardManager(tokenizer=tok, num_examine=0, compute_score=None, reward_fn_key="data_source",
                                      model=str(TINY), threads=1, mode=mode)
    counting = CountingScorer(manager.scorer)
    manager.scorer = counting
    out = manager(data, return_dict=True)
    assert counting.calls == [("score_batch", 3)]  # the whole batch in one call
    rt = out["reward_tensor"]
    assert rt.shape == data.batch["responses"].shape and rt.dtype == np.float32
    for i, r in enumerate(responses[:2]):
        steps = [s["text"] for s in stepscore.segment(r)]
        scores = tiny.score(PROBLEM, steps).step_scores
        assert rt[i].sum() == pytest.approx(sum(scores), abs=1e-5)
        valid = int(data.batch["attention_mask"][i, 24:].sum())
        assert np.all(rt[i, valid:] == 0)
        if mode == "last-token":
            assert np.count_nonzero(rt[i]) == len(steps)
    assert np.all(rt[2] == 0)
    assert out["reward_extra_info"]["stepscore_steps"] == [2, 2, 0]
    errors = out["reward_extra_info"]["stepscore_error"]
    assert errors[:2] == ["", ""] and "at least one step" in errors[2]  # the empty response, named
    # With an outcome compute_score, its score joins the last valid token; outcome=False leaves the PRM alone.
    cs = verl.compute_score_fn(tiny, mode="outcome")
    both = verl.DenseRewardManager(tok, 0, cs, scorer=tiny, mode=mode)(data)
    assert both[0].sum() == pytest.approx(rt[0].sum() + 1.0, abs=1e-5)
    assert both[1].sum() == pytest.approx(rt[1].sum(), abs=1e-5)
    alone = verl.DenseRewardManager(tok, 0, cs, scorer=tiny, mode=mode, outcome=False)(data)
    assert np.array_equal(alone, rt)
    with pytest.raises(TypeError, match="unknown reward_kwargs"):
        verl.DenseRewardManager(tok, 0, None, model=str(TINY), bogus=1)
    with pytest.raises(ValueError, match="reward_kwargs.model"):
        verl.DenseRewardManager(tok, 0, None)


def test_verl_reward_loop_manager_scores_a_worker_batch_at_once(tiny, monkeypatch):
    monkeypatch.setattr(adapters, "_scorers", {})
    tok = CharTokenizer()
    responses = [GOOD, BAD, GOOD, ""]
    data = FakeDataProto(tok, [PROBLEM] * 4, responses)
    # verl 0.9.1: cls(config=, tokenizer=, compute_score=, reward_router_address=, reward_model_tokenizer=).
    config = {"reward": {"reward_kwargs": {"model": str(TINY), "threads": 1, "mode": "gated"}}}
    manager = verl.StepRewardManager(config=config, tokenizer=tok, compute_score=None, reward_router_address=None,
                                     reward_model_tokenizer=None)
    counting = CountingScorer(manager.scorer)
    manager.scorer = counting

    async def worker():  # RewardLoopWorker.compute_score_batch: one task per sample, gathered
        return await asyncio.gather(*[asyncio.create_task(manager.run_single(data[i:i + 1])) for i in range(len(data))])

    outs = asyncio.run(worker())
    assert counting.calls == [("score_batch", 4)]
    assert outs[0]["reward_score"] == pytest.approx(expected(tiny, PROBLEM, GOOD), abs=1e-12)
    assert outs[1]["reward_score"] == 0.0 and outs[1]["reward_extra_info"]["correct"] == 0.0  # gated: wrong answer
    assert outs[3]["reward_score"] == 0.0 and np.isnan(outs[3]["reward_extra_info"]["prm"])
    assert set(outs[0]["reward_extra_info"]) == set(outs[3]["reward_extra_info"])  # verl stacks them by key
    rm = verl.StepRewardManager.assemble_rm_scores(data, [o["reward_score"] for o in outs])
    valid = int(data.batch["attention_mask"][0, 24:].sum())
    assert rm[0, valid - 1] == pytest.approx(outs[0]["reward_score"]) and np.count_nonzero(rm[0]) == 1
    with pytest.raises(TypeError, match="unknown reward_kwargs"):
        verl.StepRewardManager({"reward": {"reward_kwargs": {"model": str(TINY), "threads": 1, "x": 1}}}, tok)


def test_verl_compute_score_by_name(tiny, monkeypatch):
    monkeypatch.setattr(adapters, "_scorers", {})
    # custom_reward_function.path=pkg://stepscore.adapters.verl, name=compute_score, reward_kwargs merged in.
    out = verl.compute_score(data_source="gsm8k", solution_str=GOOD, ground_truth="33",
                             extra_info={"question": PROBLEM}, model=str(TINY), threads=1,
                             reward_router_address=None)
    assert out["score"] == pytest.approx(expected(tiny, PROBLEM, GOOD), abs=1e-12)
    verl.compute_score("gsm8k", BAD, "33", {"question": PROBLEM}, model=str(TINY), threads=1)
    assert len(adapters._scorers) == 1  # opened once for both calls
    with pytest.raises(ValueError, match="reward_kwargs.model"):
        verl.compute_score("gsm8k", GOOD, "33", {"question": PROBLEM})


def test_openrlhf_reward_func_plain_prompts(tiny):
    f = openrlhf.make_reward_func(tiny)
    prompts = ["Question: " + PROBLEM + "\nAnswer: "] * 2
    queries = [prompts[0] + GOOD, prompts[1] + BAD]
    out = f(queries, prompts, ["33", "33"])
    assert set(out) == {"rewards", "scores", "extra_logs", "errors"}
    rewards = np.asarray(out["rewards"])
    assert rewards.shape == (2,)
    assert rewards[0] == pytest.approx(expected(tiny, prompts[0].strip(), GOOD), abs=1e-6)
    assert rewards[1] == pytest.approx(expected(tiny, prompts[1].strip(), BAD), abs=1e-6)
    assert np.all((np.asarray(out["scores"]) >= 0) & (np.asarray(out["scores"]) <= 1))
    empty = f([prompts[0]], prompts[:1], None)
    assert float(np.asarray(empty["rewards"])[0]) == 0.0
    assert float(np.asarray(empty["extra_logs"]["stepscore/unscored"])[0]) == 1.0


def test_openrlhf_query_not_starting_with_its_prompt_is_not_scored_whole(tiny, caplog):
    f = openrlhf.make_reward_func(tiny)
    out = f(["Something else entirely. " + GOOD, PROBLEM + GOOD], ["Q: " + PROBLEM, PROBLEM], None)
    assert float(np.asarray(out["rewards"])[0]) == 0.0
    assert float(np.asarray(out["extra_logs"]["stepscore/unscored"])[0]) == 1.0
    assert "sample 0" in caplog.text and "does not start with its prompt" in caplog.text
    assert float(np.asarray(out["rewards"])[1]) == pytest.approx(expected(tiny, PROBLEM, GOOD), abs=1e-6)


@pytest.mark.parametrize("fixture", ["qwen2-prm-tiny", "rlhflow-tiny"])  # ChatML, Llama 3.1 templates
def test_openrlhf_strips_the_policy_chat_template_and_eos(tiny, fixture):
    transformers = pytest.importorskip("transformers", reason="SKIPPED: transformers is not installed")
    tok = transformers.AutoTokenizer.from_pretrained(str(PRM / fixture))
    # OpenRLHF: prompt = apply_chat_template(..., add_generation_prompt=True); query =
    # decode(prompt_ids + response_ids, skip_special_tokens=False), the response ending on EOS.
    prompt = tok.apply_chat_template([{"role": "user", "content": PROBLEM}], tokenize=False, add_generation_prompt=True)
    queries = []
    for r in (GOOD, BAD):
        ids = tok(prompt, add_special_tokens=False)["input_ids"] + tok(r, add_special_tokens=False)["input_ids"]
        queries.append(tok.decode(ids + [tok.eos_token_id], skip_special_tokens=False))
    assert tok.eos_token in queries[0] and "user" in queries[0]
    splitter = openrlhf.QuerySplitter(tok)
    assert splitter.split(queries[0], prompt) == (PROBLEM, GOOD)
    out = openrlhf.make_reward_func(tiny, tokenizer=tok)(queries, [prompt, prompt], ["33", "33"])
    rewards = np.asarray(out["rewards"])
    assert rewards[0] == pytest.approx(expected(tiny, PROBLEM, GOOD), abs=1e-12)
    assert rewards[1] == pytest.approx(expected(tiny, PROBLEM, BAD), abs=1e-12)
    # A prompt the template did not render is refused by name, not scored with its markup.
    with pytest.raises(ValueError, match="generation prompt"):
        splitter.split("plain " + GOOD, "plain ")


def test_verl_token_offsets_from_a_real_tokenizer():
    transformers = pytest.importorskip("transformers", reason="SKIPPED: transformers is not installed")
    tok = transformers.AutoTokenizer.from_pretrained(str(PRM / "qwen2-prm-tiny"))
    text = GOOD + " Réponse: ответ π≈3.14"
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    decoded, offsets = verl.token_offsets(tok, ids)
    assert decoded == tok.decode(ids, skip_special_tokens=True)
    assert "".join(decoded[s:e] for s, e in offsets) == decoded and offsets[-1][0] == offsets[-1][1]
    # A sampled, non-canonical tokenization of the same text (a token split in two): the stream path.
    pieces = tok.convert_ids_to_tokens(ids)
    split_at = next(t for t, p in enumerate(pieces[:-1])
                    if len(p) > 1 and tok.convert_tokens_to_ids(p[:1]) != tok.unk_token_id
                    and tok.convert_tokens_to_ids(p[1:]) != tok.unk_token_id)
    p = pieces[split_at]
    odd = ids[:split_at] + tok.convert_tokens_to_ids([p[:1], p[1:]]) + ids[split_at + 1:]
    decoded2, offsets2 = verl.token_offsets(tok, odd)
    assert decoded2 == decoded and len(offsets2) == len(odd)
    assert "".join(decoded2[s:e] for s, e in offsets2) == decoded2
    assert all(s <= e for s, e in offsets2)


class SlowCountingScorer:
    """Counts constructions; slow enough that concurrent first calls overlap."""

    made = 0

    def __init__(self, *args, **kwargs):
        type(self).made += 1
        time.sleep(0.3)
        self.inner = stepscore.Scorer(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_openrlhf_entry_point_loads_once_under_concurrent_first_calls(monkeypatch):
    monkeypatch.setenv("STEPSCORE_MODEL", str(TINY))
    monkeypatch.setenv("STEPSCORE_THREADS", "1")
    monkeypatch.setenv("STEPSCORE_POLICY_TOKENIZER", "none")
    monkeypatch.setattr(openrlhf, "_default", None)
    monkeypatch.setattr(adapters, "_scorers", {})
    monkeypatch.setattr(adapters, "Scorer", SlowCountingScorer)
    SlowCountingScorer.made = 0
    # OpenRLHF 0.11: one sample per call, each in its own thread (asyncio.to_thread), all at once.
    barrier = threading.Barrier(6)
    results = [None] * 6

    def call(k):
        barrier.wait()
        results[k] = float(np.asarray(openrlhf.reward_func([PROBLEM + GOOD], [PROBLEM], ["33"])["rewards"])[0])

    threads = [threading.Thread(target=call, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert SlowCountingScorer.made == 1
    assert len(set(results)) == 1 and results[0] > 0


def test_openrlhf_entry_point_needs_its_settings(monkeypatch):
    monkeypatch.setattr(openrlhf, "_default", None)
    monkeypatch.delenv("STEPSCORE_MODEL", raising=False)
    with pytest.raises(RuntimeError, match="STEPSCORE_MODEL"):
        openrlhf.reward_func([GOOD], [""], None)
    monkeypatch.setenv("STEPSCORE_MODEL", str(TINY))
    monkeypatch.setenv("STEPSCORE_THREADS", "1")
    monkeypatch.delenv("STEPSCORE_POLICY_TOKENIZER", raising=False)
    with pytest.raises(RuntimeError, match="STEPSCORE_POLICY_TOKENIZER"):
        openrlhf.reward_func([GOOD], [""], None)
