"""Dense rewards on a policy's own tokens, on random texts and random
tokenizations, against a Python reference that assigns each token to its
step by scanning; char offsets against byte offsets on non-ASCII text."""

import random

import numpy as np
import pytest

import stepscore

ALPHABET = "ab c\n+=1é✓π答"


def random_case(rng):
    n_steps = rng.randint(1, 5)
    parts = ["".join(rng.choice(ALPHABET.replace("\n", "")) for _ in range(rng.randint(1, 12))).strip() or "x"
             for _ in range(n_steps)]
    response = "\n\n".join(parts) + rng.choice(["", "\n", " <eos>"])
    steps = stepscore.segment(response)
    # A random tokenization: cut points, then some empty special tokens.
    cuts = sorted(rng.sample(range(1, len(response)), min(len(response) - 1, rng.randint(0, 20)))) if len(response) > 1 else []
    bounds = [0] + cuts + [len(response)]
    offsets = [(a, b) for a, b in zip(bounds, bounds[1:])]
    if rng.random() < 0.5:
        offsets.insert(0, (0, 0))
    if rng.random() < 0.5:
        offsets.append((0, 0))
    rewards = [rng.uniform(-1, 1) for _ in steps]
    return response, steps, offsets, rewards


def owner(offsets, steps):
    out, prev_end = [], 0
    for s, e in offsets:
        pos = prev_end if s == e else s
        if s != e:
            prev_end = e
        out.append(next((k for k, st in enumerate(steps) if pos < st["end"]), None))
    return out


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("mode", ["last-token", "spread"])
def test_random_offsets_sum_as_documented(seed, mode):
    rng = random.Random(seed)
    response, steps, offsets, rewards = random_case(rng)
    own = owner(offsets, steps)
    if 0 not in own:
        with pytest.raises(stepscore.InvalidArgumentError):
            stepscore.dense_rewards(response, steps, rewards, offsets, mode=mode)
        return
    r = stepscore.dense_rewards(response, steps, rewards, offsets, mode=mode)
    assert r.shape == (len(offsets),)
    assert r.sum() == pytest.approx(sum(rewards), abs=1e-9)
    # Each step's reward on its own tokens, or (owning none) on the
    # previous owning step's last token.
    expected = [0.0] * len(steps)
    last = None
    for k, x in enumerate(rewards):
        if k in own:
            last = k
        expected[last] += x
    for k in range(len(steps)):
        got = sum(v for v, o in zip(r, own) if o == k)
        assert got == pytest.approx(expected[k], abs=1e-9)
    assert all(v == 0 for v, o in zip(r, own) if o is None)
    if mode == "last-token":
        for t, v in enumerate(r):
            if v != 0:
                assert own[t] is not None and own[t] not in own[t + 1:]


def test_byte_offsets_equal_char_offsets():
    response = "Réponse : 7 ✓\n\nИтак, 7."
    steps = stepscore.segment(response)
    char_offsets = [(0, 4), (4, 14), (14, 17), (17, len(response))]
    to_b = lambda i: len(response[:i].encode())  # noqa: E731
    byte_offsets = [(to_b(s), to_b(e)) for s, e in char_offsets]
    byte_spans = [(to_b(s["start"]), to_b(s["end"])) for s in steps]
    a = stepscore.dense_rewards(response, steps, [0.7, 0.2], char_offsets)
    b = stepscore.dense_rewards(response, byte_spans, [0.7, 0.2], byte_offsets, offsets_unit="byte")
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, [0, 0.7, 0, 0.2])


def test_shaping_before_placement():
    response = "ab\n\ncd\n\nef"
    steps = stepscore.segment(response)
    offsets = [(0, 2), (2, 6), (6, 10)]
    scores = [0.9, 0.3, 0.6]
    clip = stepscore.dense_rewards(response, steps, scores, offsets, shaping="clip", eta=0.5)
    np.testing.assert_allclose(clip, [0.0, -0.2, -0.0])  # min(s - 0.5, 0)
    cd = stepscore.dense_rewards(response, steps, scores, offsets, shaping="clip-delta", eta=0.5)
    c = np.minimum(np.array(scores) - 0.5, 0)
    np.testing.assert_allclose(cd, [c[0] - c[1], c[1] - c[2], c[2]])
    assert cd.sum() == pytest.approx(c[0])
    prog = stepscore.dense_rewards(response, steps, scores, offsets, shaping="progress", baseline=0.5)
    assert prog.sum() == pytest.approx(0.6 - 0.5)
    with pytest.raises(ValueError):
        stepscore.dense_rewards(response, steps, scores, offsets, shaping="bogus")


def test_dense_rewards_for_response(tiny):
    problem = "What is 2+3?"
    response = "2+3 = 5.\n\nThe answer is 5."
    offsets = [(0, 3), (3, 8), (8, 10), (10, 14), (14, len(response)), (0, 0)]
    r = stepscore.dense_rewards_for_response(tiny, problem, response, offsets)
    scores = tiny.score(problem, ["2+3 = 5.", "The answer is 5."]).step_scores
    np.testing.assert_allclose(r, [0, scores[0], 0, 0, scores[1], 0])


def test_bad_offsets_are_typed_errors():
    with pytest.raises(stepscore.InvalidArgumentError, match="token 1 starts"):
        stepscore.dense_rewards("abcd", [(0, 4)], [1.0], [(2, 4), (0, 2)])
    with pytest.raises(stepscore.InvalidArgumentError, match="past the end"):
        stepscore.dense_rewards("abcd", [(0, 4)], [1.0], [(0, 9)])
    with pytest.raises(TypeError):
        stepscore.dense_rewards("abcd", [(0, 4)], [1.0], [(0, 1, 2)])
    with pytest.raises(TypeError):
        stepscore.dense_rewards("abcd", [(0, 4)], [1.0], "0,4")
    with pytest.raises(stepscore.InvalidArgumentError):
        stepscore.dense_rewards("abcd", [(0, 4)], [1.0, 2.0], [(0, 4)])
