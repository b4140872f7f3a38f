"""scripts/early_stopping.py: where patience would have stopped finished runs, and what it cost."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "early_stopping.py"


def write_run(folder: Path, curve: list[tuple[int, float]]) -> Path:
    folder.mkdir()
    records = [{"kind": "train", "step": 1, "loss": 5.0}]
    records += [{"kind": "validation", "step": s, "bleu": b} for s, b in curve]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True)


def test_patience_stops_a_run_and_counts_what_it_lost(tmp_path):
    # a plateau at steps 200-400 (gains of 0.1), then a late rise to 12
    rising = write_run(tmp_path / "a", [(100, 5), (200, 10), (300, 10.1), (400, 10.2), (500, 12)])
    flat = write_run(tmp_path / "b", [(100, 5), (200, 6), (300, 7), (400, 8), (500, 9)])
    done = run(str(rising), str(flat), "--patience", "2", "--min-gain", "0", "0.15")
    assert done.returncode == 0, done.stderr
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines()[2:]]
    cells = [[cell.strip() for cell in row] for row in rows]
    # no minimum gain: every validation beats the best, so neither stops
    assert cells[0] == ["2", "0", "0 of 2", "0%", "0.00", "0.00"]
    # gains of 0.1 do not count: run a stops at step 400 (10.2 kept, 12 lost: 1.8), run b runs on
    assert cells[1] == ["2", "0.15", "1 of 2", "10%", "0.90", "1.80"]


def test_bad_input_names_the_file(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "metrics.jsonl").write_text('{"kind": "train", "step": 1}\n')
    done = run(str(empty))
    assert done.returncode == 1 and "metrics.jsonl: no validation" in done.stderr
    (empty / "metrics.jsonl").write_text("{broken\n")
    assert "metrics.jsonl:1: not a JSON record" in run(str(empty)).stderr
    assert "metrics.jsonl" in run(str(tmp_path / "none")).stderr
