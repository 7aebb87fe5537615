"""CI's fuzz stage is a replay (issue 24, item 5): ``fuzz/run_all.py --replay`` runs every target once
on every seed and every kept crasher, and ``--cli-runs N`` runs the CLI harness for a fixed count of
mutants; no time budget, no chance: the same inputs and the same result every run.  A random run inside
CI once failed a submission on an old bug (defect 11); exploring now happens outside the gate."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest
from fuzz import run_all

ROOT = Path(__file__).resolve().parent.parent


def test_replay_holds_every_kept_crasher() -> None:
    names = [n for n, _ in run_all.named_seeds()]
    crashers = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "crashers").glob("*.bin"))
    assert "tests/crashers/elf-editor-overlapping-phdrs.bin" in crashers
    assert set(crashers) <= set(names)
    assert names == [n for n, _ in run_all.named_seeds()]  # the same seeds, in the same order, every run


def test_replay_of_the_elf_target_passes(capsys: pytest.CaptureFixture[str]) -> None:
    """fuzz_elf on every committed seed and crasher (the editor crasher among them) raises nothing."""
    run_all.replay(["fuzz_elf"], list(run_all.named_seeds()))
    assert re.search(r"fuzz_elf: \d+ inputs replayed, [\d.]+ s, no crash", capsys.readouterr().out)


def test_replay_stops_at_a_failure_naming_the_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    def target(data: bytes) -> None:
        if data == b"bad":
            raise IndexError("escaped")

    (tmp_path / "fuzz").mkdir()
    monkeypatch.setattr(run_all, "ROOT", tmp_path)
    monkeypatch.setattr(run_all.importlib, "import_module", lambda name: types.SimpleNamespace(TestOneInput=target))
    with pytest.raises(SystemExit) as e:
        run_all.replay(["fuzz_x"], [("good", b"good"), ("tests/crashers/bad.bin", b"bad"), ("never", b"bad")])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "IndexError: escaped" in err
    assert re.search(r"run_all: CRASH in fuzz_x on tests/crashers/bad\.bin; input saved to .*fuzz_x-[0-9a-f]{16}$",
                     err.strip())
    assert [p.read_bytes() for p in (tmp_path / "fuzz" / "crashes").iterdir()] == [b"bad"]


def test_ci_fuzz_stage_replays_and_does_not_explore() -> None:
    """scripts/test.sh step 4: the replay and a fixed count of CLI mutants, never a time budget."""
    script = (ROOT / "scripts" / "test.sh").read_text()
    calls = [ln for ln in script.splitlines() if "python3 fuzz/run_all.py" in ln and not ln.lstrip().startswith("#")]
    assert calls and all("--replay" in c and "--cli-runs" in c for c in calls), calls
    assert not any("--seconds" in c or "--cli-seconds" in c for c in calls), calls
