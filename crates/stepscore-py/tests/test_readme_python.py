"""The README's Python-side instructions, checked as text (no model, no
compiled core): the wheel's file name is the one maturin writes, the
Python snippet defines every name it uses, the Ray Data example says what
to install, the speed claim is the measured one, and the OpenRLHF example
finds a release build of the CLI as well as a debug one."""

import ast
import builtins
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()


def version():
    return re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)


def python_blocks(text):
    return re.findall(r"```python\n(.*?)```", text, re.S)


def undefined_names(code):
    """Names a block loads that nothing in it defines (imports, assignments,
    loop and comprehension targets) and that are not builtins."""
    tree = ast.parse(code)
    defined = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            defined.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - defined)


def test_the_wheel_name_is_the_one_maturin_writes():
    # maturin --compatibility manylinux2014 tags the wheel manylinux2014 first, then its PEP 600 alias.
    names = re.findall(r"stepscore-[^\s/\"'`]*?\.whl", README)
    assert names, "the README names no wheel"
    exact = f"stepscore-{version()}-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    for name in names:
        assert name == exact or name == f"stepscore-{version()}-cp39-abi3-*.whl", name


def test_the_python_quickstart_defines_what_it_uses():
    section = README[README.index("## Python: RL trainers, reward server, Ray"):]
    quickstart = python_blocks(section)[0]
    assert "scorer = stepscore.Scorer()" in quickstart
    assert undefined_names(quickstart) == []


def test_the_ray_example_says_what_to_install():
    section = README[README.index("Ray Data, one model per actor"):]
    assert 'pip install "ray[data]"' in section[:400]
    assert 'pip install "ray[data]"' in (ROOT / "examples" / "ray" / "score_jsonl.py").read_text()


def test_the_fast_model_claim_is_the_measured_one():
    assert "10x faster" not in README
    assert "about 6x faster (699 vs 112 tokens/s" in README


def test_the_openrlhf_example_finds_a_release_build():
    text = (ROOT / "examples" / "openrlhf" / "reward.py").read_text()
    assert '"target" / "release" / "stepscore"' in text and '"target" / "debug" / "stepscore"' in text
