"""The wheel's ``stepscore`` command: runs the CLI binary the wheel carries.

``scripts/release.sh`` puts the CLI (the binary of the CLI archive) at
``stepscore/_bin/stepscore`` before it builds the wheel; this entry point
replaces itself with it, so arguments, signals (``stepscore serve`` stops on
SIGTERM) and the exit status are the binary's own. A build from source
(the sdist, ``pip install ./crates/stepscore-py``) has no binary and says so.
"""

import os
import sys
from pathlib import Path


def binary() -> Path:
    """Where the wheel keeps the CLI binary."""
    name = "stepscore.exe" if os.name == "nt" else "stepscore"
    return Path(__file__).resolve().parent / "_bin" / name


def main() -> None:
    exe = binary()
    if not exe.is_file():
        sys.stderr.write(
            f"stepscore: this installation has no command-line binary ({exe} is missing): "
            "it was built from source, which gives the Python package only. Install a release "
            "wheel (scripts/release.sh builds one), or use the CLI archive.\n"
        )
        raise SystemExit(127)
    args = ["stepscore", *sys.argv[1:]]
    if os.name == "nt":
        import subprocess

        raise SystemExit(subprocess.call(args, executable=str(exe)))
    os.execv(str(exe), args)
