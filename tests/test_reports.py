"""The reports in the library (issue 25, item 4): ``devbin.resources_report``, ``inspect_report``,
``callgraph_report`` (``devbin.reports``) return what the commands print with ``--json``, in the shapes their
JSON schemas (``devbin/schemas/*.json``) accept, every record holding exactly its TypedDict's keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, get_type_hints

import jsonschema
import pytest

import devbin
from devbin.cli import resources_cmd, schema_cmd
from devbin.reports import resources as R
from devbin.samples import sample_path

from tests.runners import cli_ok

SAMPLES = ["sample_sm90.cubin", "sample_gfx90a.o"]


def _valid(command: str, doc: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(json.loads(schema_cmd.text(command))).validate(
        {"schema": f"devbin.{command}/1", **doc})


def _cli_doc(*argv: str) -> dict[str, Any]:
    doc = json.loads(cli_ok(*argv))
    del doc["schema"]
    return doc  # type: ignore[no-any-return]


def _keys(td: type) -> set[str]:
    return set(get_type_hints(td))


@pytest.mark.parametrize("name", SAMPLES)
def test_resources_report_is_the_commands_json_in_its_types(name: str) -> None:
    path = str(sample_path(name))
    doc = devbin.resources_report([path])
    _valid("resources", dict(doc))
    assert json.loads(json.dumps(doc)) == _cli_doc("resources", "--json", path)
    assert set(doc) == _keys(R.ResourcesReport)
    (image,) = doc["images"]
    typed = R.NvidiaImage if "common" in image else R.AmdImage
    assert set(image) == _keys(typed)
    for fn in image["functions"]:
        assert _keys(R.FunctionResources) - {"source"} <= set(fn) <= _keys(R.FunctionResources)
        assert fn["resources"] is not None


def test_resources_report_function_filter() -> None:
    path = str(sample_path("sample_sm90.cubin"))
    assert devbin.resources_report([path], functions=["nothing*"])["images"][0]["functions"] == []
    assert [f["name"] for f in devbin.resources_report([path], functions=["sax*"])["images"][0]["functions"]] == \
        ["saxpy"]


def test_text_table_rows_have_their_types() -> None:
    """The text tables the command renders come from the library, each row exactly its TypedDict."""
    for name in SAMPLES:
        (image,) = devbin.open(sample_path(name)).images
        r = R.analyse_image(image, json=True, text=True)
        assert isinstance(r, R.ImageResources) and r.table is not None
        row_type = R.NvidiaRow if "common" in r.table else R.AmdRow
        assert r.table["functions"] and all(set(row) == _keys(row_type) for row in r.table["functions"])


def test_the_cli_spells_the_librarys_sort_keys() -> None:
    assert resources_cmd.SORT_KEYS == R.SORT_KEYS


@pytest.mark.parametrize("name", SAMPLES)
def test_inspect_and_callgraph_reports_are_the_commands_json(name: str) -> None:
    path = str(sample_path(name))
    for command, report in (("inspect", devbin.inspect_report(path)), ("callgraph", devbin.callgraph_report(path))):
        _valid(command, dict(report))
        assert json.loads(json.dumps(report)) == _cli_doc(command, "--json", path), command


def test_the_reports_are_imported_on_first_use() -> None:
    """``import devbin`` (and ``import devbin.reports``) imports no report, model or reader."""
    code = ("import sys, devbin, devbin.reports; "
            "print(sorted(m for m in sys.modules if m.startswith(('devbin.reports.', 'devbin.model', "
            "'devbin.importers', 'devbin.size'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(devbin.__file__).parent.parent)}).stdout
    assert out.strip() == "[]"
    assert devbin.resources_report is R.resources_report


def test_size_report_is_its_records_and_its_schema() -> None:
    """``devbin.size_report`` gives a SizeReport: the JSON schema accepts it and it holds every key its
    records require (the HTML page's check passes: nothing is read as 0)."""
    from devbin.size.shapes import SizeReport, check_size_report
    doc = devbin.size_report([sample_path(n) for n in SAMPLES], keep=["sm_90"])
    _valid("size", dict(doc))
    assert check_size_report(doc) is doc
    assert SizeReport.__required_keys__ <= set(doc) <= _keys(SizeReport)
    assert SizeReport.__optional_keys__ == {"savings", "budget"} and "savings" in doc


def test_optional_keys_are_only_the_documented_ones() -> None:
    """``NotRequired`` is read from evaluated annotations (the records' modules have no postponed ones)."""
    assert R.FunctionResources.__optional_keys__ == {"source"}
    assert R.ResourcesReport.__optional_keys__ == frozenset()


def test_size_diff_report_is_the_commands_json() -> None:
    from devbin.size.diff import diff_report
    from devbin.size.shapes import SizeDiff
    old, new = (str(sample_path(n)) for n in ("sample_sm90.cubin", "sample_sm90_rdc.cubin"))
    d, violations = diff_report(old, new)
    _valid("size-diff", dict(d))
    assert violations == [] and SizeDiff.__required_keys__ <= set(d) <= _keys(SizeDiff)
    assert json.loads(json.dumps(d)) == _cli_doc("size", "--diff", old, new, "--json")


def test_report_graphs(tmp_path: Path) -> None:
    """The HTML page's call graphs (``size --html``'s default and ``--graph``) come from the library."""
    from devbin.errors import UsageError
    from devbin.htmlreport import report_graphs

    from tests.runners import cli_err
    rdc = str(sample_path("sample_sm90_rdc.cubin"))
    fatbin = tmp_path / "k.fatbin"
    fatbin.write_bytes(devbin.pack([sample_path("sample.ptx"), sample_path("sample_sm90.cubin")], format="fatbin").data)
    (ptx,) = [str(i.address) for i in devbin.open(fatbin).images if i.kind == "ptx"]
    doc = devbin.size_report([rdc])
    (address,) = report_graphs(doc)  # its kernel calls a device function: drawn by default
    assert address == rdc and report_graphs(doc, [rdc]).keys() == {rdc}
    with pytest.raises(UsageError, match="not a cubin or AMDGPU code object"):
        report_graphs(doc, [ptx])
    code, _, err = cli_err("size", rdc, "--html", str(tmp_path / "r.html"), "--graph", ptx)
    assert code == 2 and f"--graph {ptx}: not a cubin or AMDGPU code object" in err
