"""No code from data (issue 31, item 3): gradcheck keeps compiled kernels in memory
only, so a file planted where the old disk cache was (``$GRADCHECK_CACHE_DIR/kernels/``,
``$XDG_CACHE_HOME/gradcheck/kernels/``, ``~/.cache/gradcheck/kernels/``) is never
executed. The planted entry (tests/hostile/cache/planted_entry.json) is one the old
cache would have run: well-formed, its checksum right, under the name gradcheck 0.1.0
(1ae95ce) gave the kernel of wrong_tanh.toml; with that code it wrote the marker and
turned the wrong op's failure into a pass."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "tests" / "hostile" / "cache"
#: the name 1ae95ce's cache gave the reference kernel of wrong_tanh.toml, and others
NAMES = ["5ac147e3806d6aa142307217b0da9823d6681c02d53bce571c31fbfdf1ba4f0a",
         "0" * 64, "f" * 64, "anything"]


def plant(folder: Path, marker: Path) -> dict[Path, bytes]:
    """The payload under every name of :data:`NAMES` in ``folder/kernels``; the files."""
    template = json.loads((HERE / "planted_entry.json").read_text(encoding="utf-8"))
    source = template["source"].replace("MARKER", repr(str(marker)))
    planted = {}
    for name in NAMES:
        entry = dict(template, name=name, source=source,
                     sha256=hashlib.sha256(source.encode("utf-8")).hexdigest())
        path = folder / "kernels" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(entry), encoding="utf-8")
        planted[path] = path.read_bytes()
    return planted


@pytest.mark.parametrize("how", [[], ["--in-process"], ["-j", "2"]],
                         ids=["worker", "in-process", "jobs"])
def test_a_planted_kernel_is_never_executed(tmp_path, how):
    marker = tmp_path / "marker"
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GRADCHECK_", "GITHUB_"))}
    env.update(GRADCHECK_CACHE_DIR=str(tmp_path / "cache"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"), HOME=str(home),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH"))
                                          if p))
    planted = {**plant(tmp_path / "cache", marker),
               **plant(tmp_path / "xdg" / "gradcheck", marker),
               **plant(home / ".cache" / "gradcheck", marker)}
    proc = subprocess.run([sys.executable, "-m", "gradcheck", "run", "wrong_tanh.toml",
                           "--format", "json", *how], cwd=HERE, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]     # the wrong op fails
    report = json.loads(proc.stdout)
    assert [c["status"] for c in report["cases"]] == ["failed"]
    assert not marker.exists()                            # the payload never ran
    assert {p: p.read_bytes() for p in planted} == planted   # nor was replaced


def test_the_cache_command_never_opens_the_planted_files(tmp_path):
    marker = tmp_path / "marker"
    planted = plant(tmp_path / "cache", marker)
    env = dict(os.environ, GRADCHECK_CACHE_DIR=str(tmp_path / "cache"))
    for args in (["cache"], ["cache", "--clear"]):
        proc = subprocess.run([sys.executable, "-m", "gradcheck", *args], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    assert f"removed {len(planted)} old cached kernels" in proc.stdout
    assert not marker.exists() and not any(p.exists() for p in planted)
