"""The README's Python-side instructions, checked as text (no model, no
compiled core): the wheel's file name is the one maturin writes."""

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
