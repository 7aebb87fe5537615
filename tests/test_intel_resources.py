"""``devbin resources`` on Intel zebins (alone, in an ocloc fat archive, in a SYCL host library) against
``ocloc disasm -dump``'s ``.ze_info`` (read by PyYAML), on inputs ocloc compiles at test time
(tests/intelbuild.py); the JSON against the schema, ``--sort`` and ``--function`` on Intel tables."""

from __future__ import annotations

import json
from importlib import resources as importlib_resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.intelbuild import build_intel, ocloc_dump
from tests.runners import cli_ok, run_tool

#: The Intel text table's columns after ``kind`` (cli/resources_cmd.py), then the function's name.
COLUMNS = ("grf", "grf_bytes", "simd", "private", "spill", "scratch", "slm", "barriers", "reqd_wg", "reqd_sg")


@pytest.fixture(scope="module")
def intel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_intel(tmp_path_factory.mktemp("intel"))


def _schema() -> dict[str, Any]:
    return json.loads(importlib_resources.files("devbin.schemas").joinpath("resources.json").read_text())  # type: ignore[no-any-return]


def _tables(text: str) -> dict[str, dict[str, dict[str, str]]]:
    """The text output's tables: image address -> function -> column -> cell."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    rows: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if not line.startswith(" "):
            rows = out.setdefault(line.split(" (")[0], {})
        elif line.split()[0] != "kind":
            kind, *cells, name = line.split()
            rows[name] = {"kind": kind, **dict(zip(COLUMNS, cells, strict=True))}
    return out


def _expected(kernel: dict[str, Any]) -> dict[str, str]:
    """A kernel's row as ``.ze_info`` (the oracle's YAML) gives it: the runtime's reading (compute-runtime
    ``zebin_decoder.cpp``): spill ``spill_size``, else scratch slot 0; private ``private_size``, else the
    global per-thread buffers (SIMT buffers: per work-item, times the SIMD width)."""
    env = kernel["execution_env"]
    buffers = kernel.get("per_thread_memory_buffers", [])
    scratch = [b["size"] for b in buffers if b["type"] == "scratch"]
    private = env.get("private_size", sum(b["size"] * (env["simd_size"] if b.get("is_simt_thread") else 1)
                                          for b in buffers if b["type"] == "global"))
    wg = env.get("required_work_group_size")
    return {"kind": "kernel", "grf": str(env["grf_count"]), "simd": str(env["simd_size"]), "private": str(private),
            "spill": str(env.get("spill_size", scratch[0] if scratch else 0)), "scratch": str(sum(scratch)),
            "slm": str(env.get("slm_size", 0)), "barriers": str(env.get("barrier_count", 0)),
            "reqd_wg": ",".join(map(str, wg)) if wg else "?",
            "reqd_sg": str(env.get("required_sub_group_size",
                                   kernel.get("user_attributes", {}).get("intel_reqd_sub_group_size", "?")))}


def _oracle(zebin: Path, device: str, tmp: Path) -> dict[str, dict[str, Any]]:
    dump = ocloc_dump(zebin, device, tmp)
    return {k["name"]: k for k in yaml.safe_load((dump / ".ze_info").read_bytes())["kernels"]}


@pytest.mark.parametrize(("key", "device", "grf_bytes"),
                         [("zebin", "dg2", 32), ("zebin_pvc", "pvc", 64), ("spill", "dg2", 32), ("calls", "dg2", 32)])
def test_resources_match_ocloc_dump(intel: dict[str, Path], key: str, device: str, grf_bytes: int,
                                    tmp_path: Path) -> None:
    oracle = _oracle(intel[key], device, tmp_path)
    (table,) = _tables(cli_ok("resources", intel[key])).values()
    kernels = {name: row for name, row in table.items() if row["kind"] == "kernel"}
    assert set(kernels) == set(oracle) != set()
    for name, k in oracle.items():
        assert kernels[name] == {**_expected(k), "grf_bytes": str(grf_bytes)}, name
    # functions .ze_info does not list (stack-called ones) are unknown, never guessed
    assert all(set(row.values()) == {"device", "?"} for row in table.values() if row["kind"] == "device")
    doc = json.loads(cli_ok("resources", "--json", intel[key]))
    jsonschema.validate(doc, _schema())
    (image,) = doc["images"]
    assert (image["vendor"], image["kind"], image["source"]) == ("intel", "zebin", "vendor")
    assert [f["name"] for f in image["functions"]] == list(table)  # the text's order: the file's
    for f in image["functions"]:
        if f["name"] in oracle:
            env = oracle[f["name"]]["execution_env"]
            assert f["kind"] == "kernel"
            r = f["resources"]
            assert (r["registers"], r["shared"]) == (env["grf_count"], env.get("slm_size", 0))


def test_fat_archive_one_table_per_member(intel: dict[str, Path], tmp_path: Path) -> None:
    """Each zebin of the archive (by IP version, as ``ar t`` names them) against its own dump."""
    tables = _tables(cli_ok("resources", intel["fat"]))
    members = [m for m in run_tool(["ar", "t", intel["fat"]]).stdout.split() if m[:3] in ("64.", "32.")]
    assert list(tables) == [f"{intel['fat']}!{m}" for m in members] and len(members) == 2
    for member, device in zip(members, ("acm-g10", "pvc"), strict=True):
        one = tmp_path / member
        one.mkdir()
        run_tool(["ar", "x", intel["fat"], member], cwd=one)
        oracle = _oracle(one / member, device, one)
        rows = tables[f"{intel['fat']}!{member}"]
        assert {n: {c: v for c, v in r.items() if c != "grf_bytes"} for n, r in rows.items()} == \
            {n: _expected(k) for n, k in oracle.items()}
    doc = json.loads(cli_ok("resources", "--json", intel["fat"]))
    jsonschema.validate(doc, _schema())
    assert [i["address"] for i in doc["images"]] == list(tables)


def test_sort_and_function_on_intel_tables(intel: dict[str, Path]) -> None:
    path = intel["fat"]
    by_private = _tables(cli_ok("resources", "--sort", "stack", path))
    for rows in by_private.values():
        values = [int(r["private"]) for r in rows.values()]
        assert values == sorted(values, reverse=True)
    assert [list(r) for r in _tables(cli_ok("resources", "--sort", "name", path)).values()] == \
        [sorted(r) for r in by_private.values()]
    kept = _tables(cli_ok("resources", "--function", "re*", "--function", "vadd", path))
    assert [sorted(r) for r in kept.values()] == [["reduce_slm", "vadd"]] * 2
    doc = json.loads(cli_ok("resources", "--json", "--function", "priv2", path))
    assert [[f["name"] for f in i["functions"]] for i in doc["images"]] == [["priv2"]] * 2


def test_sycl_host_library(intel: dict[str, Path], tmp_path: Path) -> None:
    """A SYCL host library's zebins (zstd frames holding the fat archive): the same tables as the archive's."""
    from tests.test_sycl import sycl_host
    host = tmp_path / "libk.so"
    host.write_bytes(sycl_host([intel["fat"].read_bytes()], [intel["spv"].read_bytes()], kernels=["vadd"]))
    got = _tables(cli_ok("resources", host))
    want = _tables(cli_ok("resources", intel["fat"]))
    assert [a.rpartition("!")[2] for a in got] == [a.rpartition("!")[2] for a in want]
    assert list(got.values()) == list(want.values())
    doc = json.loads(cli_ok("resources", "--json", host))
    jsonschema.validate(doc, _schema())
    assert {i["compression"] for i in doc["images"]} == {"zstd"}
