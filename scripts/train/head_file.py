"""Head files for the training and eval scripts, read and written by the
safetensors library (`pip install safetensors numpy`): float32 tensors as
numpy arrays, and the string metadata the engine reads (`stepscore.*`,
crates/stepscore/src/prm/head_file.rs). A tensor of another dtype is refused:
every head stepscore writes is F32."""
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file


def read_head_file(path):
    """(tensors: name -> float32 array, metadata: str -> str) of a head file."""
    with safe_open(str(path), framework="np") as f:
        meta = dict(f.metadata() or {})
        tensors = {name: f.get_tensor(name) for name in f.keys()}
    for name, t in tensors.items():
        if t.dtype != np.float32:
            raise SystemExit(f"{path}: tensor {name} is {t.dtype}, not float32")
    return tensors, meta


def write_head_file(path, tensors, meta):
    """Writes `tensors` (arrays, as float32) and `meta` (strings) to `path`."""
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()},
              str(Path(path)), metadata={k: str(v) for k, v in meta.items()})
