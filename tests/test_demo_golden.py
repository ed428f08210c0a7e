"""The demo through `halucheck run` with the fake profile gives the same results.jsonl as the stored one.

The stored files were written by the same command before the code was reorganised: any change in what a
run produces (claims, evidence, verdicts, coverage, their order) shows up here. After a deliberate change
of behaviour, rewrite them with ``HALUCHECK_UPDATE_GOLDEN=1 python -m pytest tests/test_demo_golden.py``.
"""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from halucheck.cli import app

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "corpora" / "demo"
GOLDEN = Path(__file__).parent / "data" / "golden"


def normalised(path: Path) -> list[dict]:
    """results.jsonl with the checkout's absolute path replaced, so the file compares on any machine."""
    text = path.read_text(encoding="utf-8").replace(str(REPO), "<repo>")
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("verifier", ["debate", "selfcheck,debate"])
def test_demo_results_unchanged(tmp_path, verifier):
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--corpus", str(DEMO / "docs"), "--input", str(DEMO / "answers.jsonl"),
                                   "--out", str(out), "-p", "fake", "-v", verifier, "--index", str(tmp_path / "ix.duckdb")])
    assert res.exit_code == 0, res.output
    got = normalised(out / "results.jsonl")
    golden = GOLDEN / f"demo-fake-{verifier.replace(',', '-')}.jsonl"
    if os.environ.get("HALUCHECK_UPDATE_GOLDEN"):
        golden.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in got), encoding="utf-8")
    want = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines()]
    assert len(got) == len(want) == 10
    for g, w in zip(got, want):
        assert g == w, f"answer {w['id']} differs"
