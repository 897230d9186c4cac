"""Ray Data on a local cluster (2 CPUs): 200 traces scored by two actors
through `stepscore.ray.score_jsonl`, equal to `stepscore score` on the
same file (1e-6), and the class used directly in `map_batches`."""

import pytest

from conftest import TINY, cli_scores, make_traces, write_jsonl

ray = pytest.importorskip("ray", reason="SKIPPED: ray is not installed")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


def test_score_jsonl_equals_cli(tmp_path, cli, cluster):
    import stepscore.ray

    rows = make_traces(200, seed=21)
    rows[7]["steps"] = ["1 + " * 400]  # unscorable: over the tiny model's 512-token context
    path = write_jsonl(tmp_path / "traces.jsonl", rows)
    want = cli_scores(cli, path, "--model", str(TINY), "--threads", "1")
    # Two actors at half a CPU each leave a CPU for the read tasks (actors
    # holding every CPU would starve them).
    ds = stepscore.ray.score_jsonl(str(path), str(TINY), concurrency=2, batch_size=25, threads=1, num_cpus=0.5)
    out = {r["id"]: r for r in ds.take_all()}
    assert len(out) == 200
    for rid, scores in want.items():
        got = list(out[rid]["step_scores"])
        assert len(got) == len(scores)
        assert all(abs(a - b) <= 1e-6 for a, b in zip(got, scores)), rid
        assert out[rid]["error"] is None
        assert abs(out[rid]["score"] - min(scores)) <= 1e-6
    assert out["t7"]["error"] and "t7" not in want
    # Output files when asked.
    stepscore.ray.score_jsonl(str(path), str(TINY), output=str(tmp_path / "scored"), concurrency=1, threads=1,
                               num_cpus=0.5)
    assert any((tmp_path / "scored").iterdir())


def test_map_batches_with_the_class(cluster):
    import stepscore
    import stepscore.ray

    rows = make_traces(20, seed=4)
    ds = ray.data.from_items(rows).map_batches(
        stepscore.ray.StepScorer, fn_constructor_kwargs={"model": str(TINY), "threads": 1},
        compute=ray.data.ActorPoolStrategy(size=1), batch_size=8, num_cpus=0.5,
    )
    scorer = stepscore.Scorer(TINY, threads=1)
    for r in ds.take_all():
        want = scorer.score(r["problem"], list(r["steps"])).step_scores
        assert list(r["step_scores"]) == want


def test_an_actor_runs_the_cpus_ray_reserved(cluster):
    import stepscore

    # OMP_NUM_THREADS set by the user (Ray leaves it alone): Ray's own reservation still wins.
    @ray.remote(num_cpus=1, runtime_env={"env_vars": {"OMP_NUM_THREADS": "2"}})
    class Probe:
        def info(self, model):
            return stepscore.Scorer(model).info()

    info = ray.get(Probe.remote().info.remote(str(TINY)))
    assert info["threads"] == 1
    assert info["threads_source"] == "1: Ray reserved CPU=1 for this worker", info


def test_a_scorer_ships_to_a_ray_task(cluster):
    import stepscore

    scorer = stepscore.Scorer(TINY, threads=1)
    steps = ["12 + 21 = 33.", "The answer is 33."]

    @ray.remote(num_cpus=0.5)
    def score(s):  # Ray pickles the scorer into the worker
        return s.score("What is 12 + 21?", steps).step_scores

    assert ray.get(score.remote(scorer)) == scorer.score("What is 12 + 21?", steps).step_scores
