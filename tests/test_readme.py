"""README's examples run as written."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def python_example(section: str) -> str:
    """The first ```python block under README's heading `section`."""
    text = README.read_text(encoding="utf-8").split(f"## {section}\n", 1)[1]
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_the_python_api_example_runs_as_written(trained_run, tmp_path):
    shutil.copy(trained_run / "best.pt", tmp_path / "best.pt")  # the example's file name
    example = python_example("Python API")
    assert len(example.strip().splitlines()) <= 5
    result = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert line and "[(" in line  # the best text, then the n-best pairs
