"""The wheel's `stepscore` command (stepscore/_cli.py)."""

import subprocess
import sys
from pathlib import Path

from stepscore import _cli


def test_the_wheel_installs_the_stepscore_command():
    """Issue 41 item 9: `pip install` of a release wheel puts `stepscore` (the
    CLI binary the wheel carries) on the environment's PATH. A wheel built from
    source has no binary: the command then says so, exit 127."""
    command = Path(sys.executable).with_name("stepscore")
    assert command.is_file(), f"no {command}: the wheel's console script is missing"
    out = subprocess.run([str(command), "serve", "--help"], capture_output=True, text=True, timeout=60)
    if _cli.binary().is_file():
        assert out.returncode == 0, out.stderr
        assert "--unscored-reward" in out.stdout and "Usage: stepscore serve" in out.stdout
    else:
        assert out.returncode == 127
        assert "has no command-line binary" in out.stderr and str(_cli.binary()) in out.stderr
