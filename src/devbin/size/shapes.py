"""The size report's records: the ``devbin size --json`` document as typed records (docs/JSON.md,
``devbin schema size``; docs/REPORT.md: the HTML report renders the same document).

:func:`devbin.size.report.report_dict` builds a :class:`SizeReport`; :mod:`devbin.htmlreport.page`
takes one (:func:`check_size_report` refuses a document that lacks a key these records require,
rather than reading it as 0); tests/test_reports.py holds the records to the JSON schema.  The
``FileSize``/``ImageSize`` accounting records of :mod:`devbin.size.account` give the file, image and
function entries (their ``to_dict``).
"""

# (no "from __future__ import annotations": TypedDict reads NotRequired from evaluated annotations)

from collections.abc import Mapping
from functools import cache
from typing import Any, NotRequired, TypedDict, get_args, get_origin, get_type_hints, is_typeddict

from devbin.errors import FormatError
from devbin.targets.resource_records import ImageKeys

__all__ = ["ArchChange", "ArchRow", "Budget", "Change", "ContainerRow", "DiffTotals", "DuplicateFunction",
           "DuplicateImage", "Duplicates", "FileEntry", "FileSavings", "FunctionChange", "FunctionEntry",
           "ImageEntry", "KindRow", "ResourcesChange", "Savings", "SizeDiff", "SizeReport", "TopFunction", "Totals",
           "check_size_report"]


class FunctionEntry(TypedDict):
    """A function of an image: its symbol's size and the bytes that belong to it beside its code."""

    name: str
    demangled: str
    size: int
    kind: str
    related: dict[str, int]


class ImageEntry(ImageKeys):
    """An image of a file: the keys every command gives an image (:class:`ImageKeys`, one record for
    ``size``, ``resources``, ``inspect`` and ``callgraph``), then where it sits and its functions."""

    container: str
    section: str
    stored_exact: NotRequired[bool]
    functions: list[FunctionEntry]


class FileSavings(TypedDict):
    """What ``devbin prune --keep`` saves on one file (``refused``: why it saves nothing)."""

    bytes: int
    freed: int
    by_arch: dict[str, int]
    fallback_images: NotRequired[int]
    unloadable_containers: NotRequired[int]
    refused: NotRequired[str]
    wheel_bytes: NotRequired[int]


class PackageSavings(TypedDict):
    """What ``devbin prune --keep`` makes of a wheel (``kind`` wheel) or an installed environment's folder
    (``kind`` folder), with the keys of prune's ``package``: the wheel's compressed size and the installed
    size before and after, or ``refused``: why prune would refuse the wheel."""

    path: str
    kind: str
    package_size_before: NotRequired[int]
    package_size_after: NotRequired[int]
    installed_size_before: NotRequired[int]
    installed_size_after: NotRequired[int]
    refused: NotRequired[str]


class FileEntry(TypedDict):
    """One innermost file holding device code; ``images`` is their count in a summary (``detail=False``)."""

    path: str
    file_bytes: int
    device_bytes: int
    overhead: int
    headers: int
    stored_size: int
    size: int
    hidden: int
    sections: dict[str, int]
    images: list[ImageEntry] | int
    savings: NotRequired[FileSavings]


class ArchRow(TypedDict):
    vendor: str
    arch: str
    images: int
    stored_size: int
    size: int
    function_bytes: int


class KindRow(TypedDict):
    kind: str
    images: int
    stored_size: int
    size: int


class ContainerRow(TypedDict):
    file: str
    container: str
    format: str
    identifier: str
    images: int
    stored_size: int
    size: int
    archs: list[str]


class Totals(TypedDict):
    files: int
    file_bytes: int
    device_bytes: int
    overhead: int
    stored_size: int
    size: int
    images: int
    functions: int


class TopFunction(TypedDict):
    """A function summed over every copy and architecture, by mangled name."""

    name: str
    demangled: str
    kind: str
    size: int
    copies: int
    by_arch: dict[str, int]


class DuplicateImage(TypedDict):
    sha256: str
    kind: str
    arch: str
    stored_size: int
    size: int
    copies: list[str]
    wasted: int


class DuplicateFunction(TypedDict):
    name: str
    demangled: str
    arch: str
    size: int
    copies: list[str]
    wasted: int


class Duplicates(TypedDict):
    images: list[DuplicateImage]
    functions: list[DuplicateFunction]
    image_bytes: int
    function_bytes: int


class Savings(TypedDict):
    """What ``devbin prune --keep`` saves in all."""

    keep: list[str]
    bytes: int
    freed: int
    by_arch: dict[str, int]
    # added in devbin.size/1's minor versions: a document of an earlier devbin has none of them
    fallback_images: NotRequired[int]
    unloadable_containers: NotRequired[int]
    packages: NotRequired[list[PackageSavings]]
    wheel_bytes: NotRequired[int]


class Budget(TypedDict):
    """``--budget``: the rules and each violation (:meth:`devbin.size.budget.Violation.to_dict`)."""

    rules: list[str]
    violations: list[dict[str, Any]]


class SizeReport(TypedDict):
    """``devbin size --json``'s document, less its ``schema`` key."""

    files: list[FileEntry]
    by_arch: list[ArchRow]
    by_kind: list[KindRow]
    by_container: list[ContainerRow]
    totals: Totals
    top_functions: list[TopFunction]
    duplicate_bytes: int
    duplicates: Duplicates
    savings: NotRequired[Savings]
    warnings: list[str]
    budget: NotRequired[Budget]


def check_size_report(doc: Mapping[str, object]) -> SizeReport:
    """``doc`` as a :class:`SizeReport`, after checking that it holds every key the records require, at
    every level (a document read back from ``devbin size --json``, say); FormatError naming the first
    key missing.  Types are not checked beyond that (the JSON schema does)."""
    _check(doc, SizeReport, "size report")
    return doc  # type: ignore[return-value]


@cache
def _hints(shape: Any) -> dict[str, Any]:
    return get_type_hints(shape)


def _check(value: object, shape: Any, where: str) -> None:
    if is_typeddict(shape):
        if not isinstance(value, Mapping):
            raise FormatError(f"{where} is not an object", fmt="size-report")
        hints = _hints(shape)
        for key in sorted(shape.__required_keys__):
            if key not in value:
                raise FormatError(f"{where} has no {key!r}", fmt="size-report")
        for key, hint in hints.items():
            if key in value:
                _check(value[key], hint, f"{where}.{key}")
        return
    origin = get_origin(shape)
    args = get_args(shape)
    if origin is list and args and isinstance(value, list):
        for i, v in enumerate(value):
            _check(v, args[0], f"{where}[{i}]")
    elif args and origin is not dict:  # a union (list[ImageEntry] | int): each member that fits the value
        for a in args:
            if (get_origin(a) or a) is type(value) or (is_typeddict(a) and isinstance(value, Mapping)):
                _check(value, a, where)


# --------------------------------------------------------------------------- devbin size --diff


class Change(TypedDict):
    old: int
    new: int
    delta: int


class DiffTotals(TypedDict):
    files: Change
    device_bytes: Change
    stored_size: Change
    size: Change


class ArchChange(TypedDict):
    vendor: str
    arch: str
    old: int
    new: int
    delta: int
    old_size: int
    new_size: int
    status: str


class FunctionChange(TypedDict):
    vendor: str
    arch: str
    name: str
    demangled: str
    kind: str
    old: int
    new: int
    delta: int
    status: str


class ResourcesChange(TypedDict):
    """A function whose resources differ: each field that changed, ``{"old", "new"}`` (None: not recorded)."""

    vendor: str
    arch: str
    name: str
    demangled: str
    kind: str
    changes: dict[str, dict[str, Any]]


class SizeDiff(TypedDict):
    """``devbin size --diff OLD NEW``'s document, less its ``schema`` key (``diff`` gives it without
    ``old``, ``new`` and ``budget``; :func:`devbin.size.diff.diff_report` with them)."""

    old: NotRequired[str]
    new: NotRequired[str]
    totals: DiffTotals
    by_arch: list[ArchChange]
    functions: list[FunctionChange]
    resources: list[ResourcesChange]
    budget: NotRequired[Budget]
