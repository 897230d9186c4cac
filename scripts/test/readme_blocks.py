#!/usr/bin/env python3
"""Runs the code blocks of README.md and pkg/README.md as a reader would.

Every fenced block must be preceded by a directive line saying what is done
with it, so that no block is skipped without the text saying so:

  <!-- readme-test: run -->        sh: bash in the repository root, `stepscore` (and the
                                    README's `cargo run --release -p stepscore-cli --`) being the
                                    debug CLI (CI builds no release binary; the engine gives the
                                    same bits); python: the test venv's interpreter (the wheel
                                    installed); js: node, `stepscore` resolving to pkg/
  <!-- readme-test: expect -->     the exact stdout of the nearest `run` block above (less
                                    trailing blank lines, which a fenced block cannot show)
  <!-- readme-test: continues -->  run after the nearest `run` block above of the same
                                    language, in one program (a snippet that uses its names)
  <!-- readme-test: flags -->      sh examples on files a reader supplies: every
                                    `stepscore SUB --flag` must be listed by `stepscore SUB --help`
  <!-- readme-test: doctest -->    rust: compiled and run by `cargo test --doc -p stepscore`
                                    (crates/stepscore/src/lib.rs includes README.md)
  <!-- readme-test: not run: WHY -->

Prints one line per block (file:line, language, what was done, the result)
and exits 1 when a block has no directive, fails, or differs from its
expected output.

  scripts/test/readme_blocks.py --python target/pyenv/bin/python [--only README.md]
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = ["README.md", "pkg/README.md"]
DIRECTIVE = re.compile(r"^<!-- readme-test: (run|expect|continues|flags|doctest|not run: .+?) -->$")
RELEASE_CLI = re.compile(r"cargo run (?:-q )?--release -p stepscore-cli --(?= |$)")
TIMEOUT = 900


class Block:
    def __init__(self, file, line, lang, text, directive):
        self.file, self.line, self.lang, self.text, self.directive = file, line, lang, text, directive
        self.stdout = None
        self.code = None

    @property
    def where(self):
        return f"{self.file}:{self.line}"


def blocks(file):
    lines = (ROOT / file).read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang = lines[i][3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            m = DIRECTIVE.match(lines[i - 1].strip()) if i > 0 else None
            out.append(Block(file, i + 1, lang, "\n".join(lines[i + 1 : j]) + "\n", m.group(1) if m else None))
            i = j + 1
        else:
            i += 1
    return out


def cli_dir(tmp):
    """A directory whose `stepscore` is the debug CLI."""
    d = Path(tmp) / "bin"
    d.mkdir(exist_ok=True)
    link = d / "stepscore"
    if not link.exists():
        link.symlink_to(ROOT / "target" / "debug" / "stepscore")
    return d


def run_sh(block, tmp, env):
    script = RELEASE_CLI.sub("stepscore", block.text)
    script = script.replace("alias stepscore='stepscore'\n", "")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)


def run_python(code, python, tmp, env):
    path = Path(tmp) / "block.py"
    path.write_text(code)
    return subprocess.run([python, str(path)], cwd=tmp, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def run_js(code, tmp, env):
    mods = Path(tmp) / "node_modules"
    mods.mkdir(exist_ok=True)
    if not (mods / "stepscore").exists():
        (mods / "stepscore").symlink_to(ROOT / "pkg")
    path = Path(tmp) / "block.mjs"
    path.write_text(code)
    return subprocess.run(["node", str(path)], cwd=tmp, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def commands(text):
    """Each command of a shell block, continuation lines joined: `(SUB, flags)` for a
    `stepscore SUB ...` command, `(None, text)` for any other (a trainer, a script)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.split("\n"):
        line = re.sub(r"\s+#.*$", "", line.strip())
        if not line or line.startswith("#") or line.startswith("alias "):
            continue
        for part in re.split(r"\|(?!\|)|&&|;", line):
            try:
                words = shlex.split(RELEASE_CLI.sub("stepscore", part))
            except ValueError:
                words = part.split()
            while words and re.match(r"^[A-Z_]+=", words[0]):
                words = words[1:]
            if len(words) >= 2 and words[0] == "stepscore" and not words[1].startswith("-"):
                yield words[1], [w.split("=")[0] for w in words[2:] if w.startswith("--")]
            elif words and words[0] not in ("echo", "curl"):
                yield None, part.strip()


def check_flags(block, env):
    """Flags checked, flags missing, and the commands that are not `stepscore`'s."""
    helps, missing, checked, others = {}, [], 0, []
    for sub, flags in commands(block.text):
        if sub is None:
            others.append(flags)
            continue
        if sub not in helps:
            r = subprocess.run(["stepscore", sub, "--help"], env=env, capture_output=True, text=True)
            helps[sub] = r.stdout if r.returncode == 0 else None
        if helps[sub] is None:
            missing.append(f"`stepscore {sub}` is not a subcommand of this build")
            continue
        for f in flags:
            checked += 1
            if not re.search(re.escape(f) + r"(?![\w-])", helps[sub]):
                missing.append(f"stepscore {sub} {f}")
    return checked, missing, others


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=str(ROOT / "target" / "pyenv" / "bin" / "python"))
    ap.add_argument("--only", action="append", help="a file of the two (default: both)")
    args = ap.parse_args()
    # Absolute, not resolved: a venv's python is a symlink that must stay in its venv.
    args.python = os.path.abspath(args.python)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env["PATH"] = f"{cli_dir(tmp)}:{Path(args.python).parent}:{env['PATH']}"
        for file in args.only or FILES:
            last_run = {}
            for b in blocks(file):
                what, result, ok = b.directive or "no directive", "", True
                if b.directive is None:
                    ok, result = False, "every block needs a <!-- readme-test: ... --> line above it"
                elif b.directive.startswith("not run: "):
                    result = "listed"
                elif b.directive == "doctest":
                    ok = b.lang.startswith("rust")
                    result = "cargo test --doc -p stepscore" if ok else "only rust blocks are doctests"
                elif b.directive == "expect":
                    prev = last_run.get("sh")
                    # A fenced block cannot end in a blank line; the rest must match.
                    ok = prev is not None and prev.stdout.rstrip("\n") == b.text.rstrip("\n")
                    result = "matches" if ok else f"differs from {prev.where if prev else 'no run block'}'s output:\n{prev.stdout if prev else ''}"
                elif b.directive == "flags":
                    checked, missing, others = check_flags(b, env)
                    ok = not missing
                    result = f"{checked} flags found in --help" if ok else "missing: " + "; ".join(missing)
                    if others:
                        result += f"; {len(others)} other commands not run: " + "; ".join(o[:60] for o in others)
                else:
                    code = b.text
                    if b.directive == "continues":
                        prev = last_run.get(b.lang)
                        if prev is None:
                            ok, result = False, f"no {b.lang} block above to continue"
                        code = (prev.code if prev else "") + code
                    if ok:
                        if b.lang == "sh":
                            r = run_sh(b, tmp, env)
                        elif b.lang == "python":
                            r = run_python(code, args.python, tmp, env)
                        elif b.lang == "js":
                            r = run_js(code, tmp, env)
                        else:
                            r = None
                            ok, result = False, f"cannot run a `{b.lang or 'plain'}` block"
                        if r is not None:
                            b.stdout, b.code = r.stdout, code
                            last_run[b.lang] = b
                            ok = r.returncode == 0
                            result = "exit 0" if ok else f"exit {r.returncode}:\n{r.stderr[-3000:]}"
                failed += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {b.where:22} {b.lang or 'plain':8} {what}: {result}", flush=True)
    print(f"readme blocks: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
