"""The CLI mutation harness (fuzz/cli_mutate.py) itself: its outcome classes, its limits, its
mutators (valid outer checksums where it says so), its determinism, and a short campaign."""

from __future__ import annotations

import hashlib
import io
import random
import sys
import time
import zipfile
from pathlib import Path

import pytest
from fuzz import cli_mutate as H
from fuzz.cli_mutators import (
    WHEEL_TAMPERS,
    ccob_inner_mutant,
    fields_of,
    manifest_mutant,
    msgpack_fields,
    mutate,
    tamper_wheel,
    zip_member_mutant,
)
from fuzz.cli_seeds import build_seeds

import devbin.cli.main as cli_main
from devbin.formats.bundle.compress import truncated_md5


@pytest.fixture(scope="module")
def seeds() -> dict[str, H.Seed]:
    return {s.fmt: s for s in build_seeds()}


@pytest.mark.parametrize("rc,err,want", [
    (0, "", "ok"),
    (0, "devbin: warning: x\n", "ok"),
    (1, "devbin: error: elf: bad (at offset 0x0)\n", "error"),
    (2, "devbin: error: usage\n", "error"),
    (1, "", "reported"),
    (1, "warning: elf: k.o: section [7]: sh_size past the end\nnote: k.o#0.1: skipped ptx image\n", "reported"),
    (1, "error: undefined symbol: f (referred to by k.o: kern)\n", "reported"),
    (2, "warning: x\n", "messy"),
    (1, "warning: x\nan error over\ntwo lines\n", "messy"),
    (1, "devbin: error: a\nb\n", "messy"),
    (1, "something else\n", "messy"),
    (1, "Traceback (most recent call last):\n  ...\nKeyError: 1\n", "traceback"),
    (70, "", "traceback"),
    (71, "", "memory"),
    (1, "MemoryError\n", "memory"),
    (1, "warning: x: skipped\nnote: y\ndevbin: error: z\n", "error"),
    (1, "devbin: error: z\nwarning: after the error\n", "messy"),
    (3, "devbin: k.o: does not contain device code\n", "no-device"),
    (3, "", "messy"),
    (4, "", "traceback"),
])
def test_classify(rc: int, err: str, want: str) -> None:
    assert H.classify(rc, err) == want


def _run_with(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake: object, timeout: float = 5.0,
              memory: int = 1 << 30) -> H.Result:
    monkeypatch.setattr(cli_main, "main", fake)  # the forked child imports it from the module
    return H.run_one(["list", "x"], str(tmp_path), timeout, memory)


def test_outcomes_of_children(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def clean(argv: list[str]) -> int:
        print("devbin: error: elf: x: bad (at offset 0x10)", file=sys.stderr)
        return 1

    def escapes(argv: list[str]) -> int:
        return {}["missing"]  # type: ignore[no-any-return]

    def hangs(argv: list[str]) -> int:
        time.sleep(30)
        return 0

    def eats_memory(argv: list[str]) -> int:
        blocks = [bytearray(64 << 20) for _ in range(64)]  # 4 GiB against 1 GiB more than the parent's
        return len(blocks)

    vm = next(int(ln.split()[1]) << 10 for ln in Path("/proc/self/status").read_text().splitlines()
              if ln.startswith("VmSize:"))
    got = {name: _run_with(monkeypatch, tmp_path, fn, timeout=1.0 if name == "hangs" else 20.0,
                           memory=vm + (1 << 30)) for name, fn in
           (("clean", clean), ("escapes", escapes), ("hangs", hangs), ("eats_memory", eats_memory))}
    assert got["clean"].outcome == "error" and got["clean"].rc == 1
    assert got["escapes"].outcome == "traceback" and "KeyError" in got["escapes"].stderr
    assert got["hangs"].outcome == "hang" and got["hangs"].seconds < 5
    assert got["eats_memory"].outcome == "memory"


def test_a_changed_input_is_damaged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                    seeds: dict[str, H.Seed]) -> None:
    def truncates(argv: list[str]) -> int:
        Path(argv[1]).write_bytes(b"")  # what issue 18's extract did to its input
        return 0

    monkeypatch.setattr(cli_main, "main", truncates)
    seed = seeds["cubin"]
    res = H.run_case(seed, seed.data, "list", tmp_path / "case", 5.0, 1 << 30)
    assert res.outcome == "damaged" and "changed" in res.stderr


def test_every_format_has_targeted_fields(seeds: dict[str, H.Seed]) -> None:
    groups = {fmt: {f.name.split("@")[0].split(".")[0] for f in fields_of(s.data)} for fmt, s in seeds.items()}
    assert {"fatbin", "elf"} <= groups["fatbin"]
    assert {"bundle", "elf"} <= groups["bundle"] and {"offload", "elf"} <= groups["offload"]
    assert "ccob" in groups["ccob-v2"] and "ccob" in groups["ccob-v3"] and "wrapped" in groups["wrapped"]
    assert "ar" in groups["ar"] and "ar" in groups["superarchive-packed"] and "zip" in groups["wheel"]
    assert {"fatbin", "bundle", "elf"} <= groups["host"]
    amd = [f.name for f in fields_of(seeds["amdgpu"].data)]
    assert any("msgpack" in n and ("strlen" in n or "fixstr" in n) for n in amd)
    assert any(".rel[" in n for n in fields_of_names(seeds["amdgpu-reloc"]))
    assert any(".sym[" in n for n in amd) and any(".note[" in n for n in amd)


def fields_of_names(seed: H.Seed) -> list[str]:
    return [f.name for f in fields_of(seed.data)]


def test_msgpack_walk_finds_every_length() -> None:
    import msgpack  # type: ignore[import-untyped]

    doc = msgpack.packb({"amdhsa.kernels": [{".name": "k" * 40, ".args": list(range(20))}], "v": [1, 2]})
    kinds = [k for _, _, k in msgpack_fields(doc, 0, len(doc))]
    assert kinds.count("fixmap") == 2 and "strlen" in kinds and "arraylen" in kinds and "fixarray" in kinds


def test_ccob_inner_mutants_keep_a_valid_hash(seeds: dict[str, H.Seed]) -> None:
    from devbin.formats.bundle.compress import decompress

    for fmt in ("ccob-v2", "ccob-v3"):
        data = seeds[fmt].data
        for i in range(10):
            m = ccob_inner_mutant(random.Random(i), data, [data])
            assert m is not None and m[0] != data and "hash recomputed" in m[1]
            out = m[0]
            version, method = int.from_bytes(out[4:6], "little"), int.from_bytes(out[6:8], "little")
            hsize, usize, hsum = ((24, int.from_bytes(out[12:16], "little"), out[16:24]) if version == 2 else
                                  (32, int.from_bytes(out[16:24], "little"), out[24:32]))
            inner = decompress(method, out[hsize:], usize)
            assert int.from_bytes(hsum, "little") == truncated_md5(inner)


def test_manifest_mutants_keep_a_valid_sha256(seeds: dict[str, H.Seed]) -> None:
    from devbin.formats.ar import ArchiveFile

    for fmt in ("superarchive", "superarchive-packed"):
        data = seeds[fmt].data
        changed = 0
        for i in range(10):
            m = manifest_mutant(random.Random(i), data, [data])
            assert m is not None
            man = next(bytes(x.data) for x in ArchiveFile(m[0]).members if x.name == "__devbin_sa.idx")
            size = int.from_bytes(man[12:16], "little")
            assert hashlib.sha256(man[48:48 + size]).digest() == man[16:48]
            changed += m[0] != data
        assert changed >= 8


def test_zip_member_mutants_keep_valid_crcs(seeds: dict[str, H.Seed]) -> None:
    data = seeds["zip"].data
    m = zip_member_mutant(random.Random(3), data, [data])
    assert m is not None
    with zipfile.ZipFile(io.BytesIO(m[0])) as z:
        assert z.testzip() is None


@pytest.mark.parametrize("how", WHEEL_TAMPERS)
def test_tampered_wheels_are_refused_in_one_line(seeds: dict[str, H.Seed], tmp_path: Path, how: str) -> None:
    """Every tampered wheel through prune (-o and --dry-run, --force) and list in a forked child: prune
    refuses it in one 'devbin: error:' line naming the check and writes nothing, the input's bytes kept;
    list reads the wheel or, truncated, says 'not a zip file' (issue 24)."""
    seed = seeds["wheel"]
    m = tamper_wheel(random.Random(how), seed.data, how)
    assert m is not None and m[0] != seed.data
    forced_ok = how in ("wrong hash", "wrong size", "missing row", "extra row", "md5 row", "not utf-8")
    for cmd, extra in (("w:prune", []), ("w:prune", ["--force"]), ("w:prune-dry", [])):
        H.COMMANDS["t:prune"] = [*H.COMMANDS[cmd], *extra]
        try:
            res = H.run_case(seed, m[0], "t:prune", tmp_path / "case", 60, 2048 << 20)
        finally:
            del H.COMMANDS["t:prune"]
        if forced_ok and extra:
            assert res.outcome == "ok", res.stderr
            assert (tmp_path / "case" / "tmp" / "pruned").exists()
            continue
        assert res.outcome == "error", res.stderr
        assert res.stderr.count("\n") == 1 and not (tmp_path / "case" / "tmp" / "pruned").exists()
        assert ("not a zip file" if how == "truncated" else "refusing to rewrite the wheel") in res.stderr
    res = H.run_case(seed, m[0], "list", tmp_path / "case", 60, 2048 << 20)
    assert res.outcome == ("error" if how == "truncated" else "ok"), res.stderr


def test_mutants_are_deterministic(seeds: dict[str, H.Seed]) -> None:
    pool = [s.data for s in seeds.values()]
    for s in seeds.values():
        a = mutate(random.Random(f"5:{s.fmt}"), s.data, pool)
        b = mutate(random.Random(f"5:{s.fmt}"), s.data, pool)
        assert a == b
    assert [s.data for s in build_seeds()] == pool


def test_a_short_campaign(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "counts.json"
    assert H.main(["--runs", "45", "--seed", "2", "--format", "cubin", "--format", "ccob-v2",
                   "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "per format (45 runs" in text and "no traceback, hang, memory failure or damaged input" in text
    import json

    counts = json.loads(out.read_text())
    assert counts["runs"] == 45 and sum(sum(v.values()) for v in counts["counts"].values()) == 45
