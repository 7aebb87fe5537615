"""What every command shares: the image options, the JSON envelope, the streams and the exit statuses.

Image options (one helper, every command that reads images):

* ``--image ADDRESS`` (repeatable): only the images at these addresses (docs/IMAGES.md, as
  ``devbin list --all`` prints them).  Addresses are looked up in ``--all``'s scope, so every
  address ``list --all`` prints is accepted; an address that names no image is a usage error.
  When no PATH is given, the files the addresses start from are read.
* ``--arch ARCH`` (repeatable): only images of these architectures, matched as ``cuobjdump
  -arch`` matches them: ``sm_90`` takes every image of SM 9.0 (the ``sm_90`` and ``sm_90a``
  cubins, the ``compute_90`` PTX and LTO-IR); ``sm_90a`` takes the same; ``compute_90`` only
  the PTX and LTO-IR of 9.0; ``gfx90a`` every ``gfx90a`` target ID, ``gfx90a:xnack+`` only
  that one.  Repeatable and comma-separated (``--arch sm_80,sm_90``), case-insensitive
  (``SM_90``, ``gfx90A``); a name that is no known architecture is a usage error suggesting the
  one meant (``sm90``: "did you mean sm_90?"; :mod:`devbin.targets.archnames`, the one parser of
  architecture lists).  A filter that takes no image at all is an error (exit 1, one line naming
  the architectures the input holds), where ``cuobjdump -arch`` prints nothing and exits 0: an
  empty listing is easily taken for "nothing there".  ``resources --format cuobjdump`` promises
  cuobjdump's output, so there the same line is a note on stderr and stdout and the exit status are
  cuobjdump's.
* ``--all``: cuobjdump's ``-all`` scope (the relocatable ``__nv_relfatbin`` images too).

Exit statuses (docs/JSON.md): 0 success, 1 error, 2 usage error (argparse, and
:class:`BadArguments`: a flag's value the command cannot use), 3 no input holds device code
(:func:`no_device_code`: one line on stderr, nothing on stdout), 4 a ``size --budget`` rule exceeded.

Output files: every command names the file it writes with ``-o OUT``; a picture written beside what is
printed (``size --html``, ``callgraph --svg``) is a switch, its file ``-o OUT`` too
(:func:`add_picture_option`).  Their old spelling, ``--html OUT``, still works for one release, with a
note on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TextIO, TypeVar

from devbin.errors import DeviceBinaryError, UsageError
from devbin.escape.text import visible

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from devbin.images import Address, Image

#: The exit statuses of every command.
EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_NO_DEVICE_CODE: Final = 3
#: ``devbin size --budget``: a rule is exceeded (the report is printed; CI fails the job on it).
EXIT_OVER_BUDGET: Final = 4

#: The major version of each command's JSON schema, 1 where not listed (docs/JSON.md: what bumps it, and
#: its changelog): select/2 and load/2 spell an AMD device's vendor ``amd``, as every other record does; select/3
#: makes Intel SPIR-V a candidate and an ocloc archive one module.
SCHEMA_MAJOR: Final[Mapping[str, int]] = MappingProxyType({"select": 3, "load": 2})


class BadArguments(UsageError):
    """A value given on the command line that the command cannot use (exit status 2, as argparse's errors)."""


def exit_status(error: DeviceBinaryError) -> int:
    """The exit status for an error that reached the command line: 2 for :class:`BadArguments`, else 1."""
    return EXIT_USAGE if isinstance(error, BadArguments) else EXIT_ERROR


def schema_name(command: str) -> str:
    """The name and major version of a command's JSON schema: ``devbin.list/1``, ``devbin.select/3``."""
    return f"devbin.{command}/{SCHEMA_MAJOR.get(command, 1)}"


def dump(command: str, doc: dict[str, Any], out: TextIO, *, indent: int | None = 2) -> None:
    """Write a command's JSON: one object, its ``schema`` key first.  ``indent=None``: on one line, for
    outputs that can be very large (``size``: every function of a whole environment), which the C
    encoder writes many times faster; its large arrays may be :class:`~devbin.escape.jsontext.Stream` values,
    written item by item)."""
    from devbin.escape.jsontext import dumps, write  # the JSON rule: no raw surrogate or control ever written
    if indent is None:
        write({"schema": schema_name(command), **doc}, out)
    else:
        out.write(dumps({"schema": schema_name(command), **doc}, indent=indent))
    out.write("\n")


def warn(message: str) -> None:
    """A warning, on stderr (stdout carries results only)."""
    print(f"warning: {visible(message)}", file=sys.stderr)


def note(message: str) -> None:
    """A note, on stderr."""
    print(f"note: {visible(message)}", file=sys.stderr)


def no_device_code(paths: Iterable[str]) -> int:
    """Say on stderr, one line per input, that it holds no device code; the status to exit with (3)."""
    for path in paths:
        print(f"devbin: {visible(path)}: does not contain device code", file=sys.stderr)
    return EXIT_NO_DEVICE_CODE


def holds_device_code(paths: Iterable[str]) -> bool:
    """Whether any of ``paths`` holds a device image (``--all``'s scope), or gives a scan warning (a
    malformed file: the command's own reading then reports the error, exit 1)."""
    from devbin.images.scan import Scanner
    from devbin.images.scanreport import ScanReport
    report = ScanReport()
    scanner = Scanner(report, all=True)
    return any(next(iter(scanner.paths([path])), None) is not None or bool(report.warnings) for path in paths)


# --------------------------------------------------------------------------- image options


def add_image_options(p: argparse.ArgumentParser, *, all: bool = True, arch: bool = True) -> None:
    """``--image``, ``--arch`` and (unless ``all`` is False) ``--all``: see the module docstring."""
    p.add_argument("--image", action="append", default=[], metavar="ADDRESS",
                   help="only the image at this address, as `devbin list --all` prints it (repeatable)")
    if arch:
        p.add_argument("--arch", action="append", default=[], metavar="ARCH",
                       help="only images of these architectures, as cuobjdump -arch: sm_90 (also sm_90a and the "
                            "compute_90 PTX), compute_90, gfx90a, gfx90a:xnack+ (repeatable, or a comma list)")
    if all:
        p.add_argument("--all", action="store_true",
                       help="also the relocatable __nv_relfatbin images of host files that hold executable ones "
                            "in .nv_fatbin (cuobjdump -all)")


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a number of processes, 1 or more, not {text!r}")
    return n


def add_jobs_option(p: argparse.ArgumentParser) -> None:
    """``--jobs N``: files and images spread over N processes (devbin.images.parallel), the output
    the same as with one; default every processor, 1 works in this process."""
    p.add_argument("--jobs", "-j", type=_jobs, default=None, metavar="N",
                   help="processes to read files and images with (default: one per processor; 1: no pool); "
                        "the output is the same whatever N")


def add_scheduler_option(p: argparse.ArgumentParser) -> None:
    """``--scheduler ADDRESS``: the work on the workers of a Dask cluster instead of this machine's processes
    (devbin.images.units.connect; the extra devbin[dask]), the output the same as with ``--jobs 1``."""
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the work on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786; "
                        "pip install 'devbin[dask]'); the output is the same as with --jobs 1; a PATH may be a URL "
                        "(https://, s3://: read through fsspec by whichever process reads the file)")


def scheduler_client(address: str | None) -> AbstractContextManager[Any]:
    """:func:`devbin.images.units.connect` for ``--scheduler ADDRESS``; a malformed address is
    :class:`BadArguments` (one line, exit 2), raised before any client is made."""
    from devbin.images.units import check_address, connect
    if address is not None:
        try:
            check_address(address)
        except UsageError as e:
            raise BadArguments(e.message) from None
    return connect(address)


def add_max_segments_option(p: argparse.ArgumentParser) -> None:
    """``--max-segments N`` (prune, size --keep): the most program headers a pruned linked file may have;
    read by :func:`max_segments` (a bad value is one line, exit 2, with the number meant)."""
    p.add_argument("--max-segments", metavar="N", default=None,
                   help="the most program headers a pruned library may have (default 2,048): each range of "
                        "freed pages cut out adds one, and glibc holds them on the stack of the thread that "
                        "loads the library (docs/PRUNE.md)")


def max_segments(text: str | None) -> int | None:
    """``--max-segments``'s value (None: not given, the default), checked by
    :func:`devbin.formats.elf.pages.check_max_segments`; BadArguments naming the number meant for ``4k``,
    ``4KiB``, ``0x1000`` or ``4,096.0``."""
    if text is None:
        return None
    from devbin.formats.elf.pages import check_max_segments
    t = text.strip().replace(",", "").replace("_", "")
    meant: int | None = None
    try:
        value = int(t, 10)
    except ValueError:
        low = t.lower().removesuffix("ib").removesuffix("b")
        try:
            if low[-1:] in ("k", "m") and low[:-1]:
                meant = int(float(low[:-1]) * (1024 if low[-1] == "k" else 1024 * 1024))
            elif low.startswith("0x"):
                meant = int(low, 16)
            elif float(low).is_integer():
                meant = int(float(low))
        except ValueError:
            meant = None
        hint = f"; did you mean {meant}?" if meant is not None and meant >= 1 else ", such as 4096"
        raise BadArguments(f"--max-segments {text!r}: expected a whole number of program headers{hint}") from None
    try:
        return check_max_segments(value)
    except UsageError as e:
        raise BadArguments("--max-segments " + e.message.removeprefix("max_segments=")) from None


def add_picture_option(p: argparse.ArgumentParser, flag: str, help: str) -> None:
    """``FLAG`` (``--html``, ``--svg``): also write a picture, to ``-o OUT`` (the one output convention,
    see the module docstring); ``FLAG OUT``, the old spelling, still accepted (:func:`picture_output`)."""
    p.add_argument(flag, nargs="?", const="", default=None, metavar="OUT", help=f"{help}, to -o OUT")
    p.add_argument("-o", "--output", metavar="OUT", help=f"the file {flag} writes")


def picture_output(args: argparse.Namespace, flag: str) -> str | None:
    """The file :func:`add_picture_option`'s ``flag`` writes, or None; BadArguments for ``-o`` without
    the flag, the flag without ``-o``, or a file named twice."""
    value: str | None = getattr(args, flag.lstrip("-"))
    if value is None:
        if args.output is not None:
            raise BadArguments(f"-o OUT goes with {flag} (the file {flag} writes)")
        return None
    if not value:
        if args.output is None:
            raise BadArguments(f"{flag} writes to -o OUT: give -o OUT")
        return str(args.output)
    if args.output is not None:
        raise BadArguments(f"{flag} {value} -o {args.output}: name the file once, with -o")
    note(f"{flag} OUT is the old spelling of {flag} -o OUT; it goes in the next release")
    return value


def add_image_inputs(p: argparse.ArgumentParser) -> None:
    """``--image ADDRESS`` for commands whose inputs are files (link, load): the image at the address is
    one more input, after the files."""
    p.add_argument("--image", action="append", default=[], metavar="ADDRESS",
                   help="also the device image at this address, as `devbin list --all` prints it (repeatable)")


def image_inputs(addresses: Sequence[str]) -> list[tuple[Image, bytes]]:
    """The images at ``addresses`` and their bytes (what ``extract --image`` writes); BadArguments for an
    address that names no image."""
    from devbin.images import Address, find_image
    from devbin.images.scan import scan
    out: list[tuple[Image, bytes]] = []
    for text in addresses:
        try:
            address = Address.parse(text)
            image = find_image(scan([address.path], all=True), address)
        except UsageError as e:
            raise BadArguments(f"--image: {e}") from None
        out.append((image, bytes(image.data())))
    return out


def arch_list(values: Sequence[str] | None, option: str) -> tuple[str, ...]:
    """The architectures of a repeatable, comma-separated option (``--arch``, ``--keep``, ``--drop``),
    made canonical (:func:`devbin.targets.archnames.parse_arch_list`); BadArguments naming the option
    and the architecture meant for a name that is none.  Empty for an option not given."""
    if not values:
        return ()
    from devbin.targets.archnames import parse_arch_list
    try:
        return parse_arch_list(values, option=option)
    except UsageError as e:
        raise BadArguments(e.message) from None


class ImageFilter:
    """The ``--image``/``--arch`` choice of one command line."""

    def __init__(self, args: argparse.Namespace) -> None:
        from devbin.images import Address
        self.addresses: list[Address] = []
        for text in getattr(args, "image", None) or []:
            try:
                self.addresses.append(Address.parse(text))
            except UsageError as e:
                raise BadArguments(f"--image: {e}") from None
        self.archs: list[str] = list(arch_list(getattr(args, "arch", None), "--arch"))
        self.matched: set[Address] = set()
        self.taken = 0  # images taken
        self.seen: set[str] = set()  # the architectures of the images --arch looked at

    @property
    def active(self) -> bool:
        return bool(self.addresses or self.archs)

    @property
    def all(self) -> bool:
        """Whether the scan must take ``--all``'s scope (an address may name an __nv_relfatbin image)."""
        return bool(self.addresses)

    def paths(self, given: Sequence[str]) -> list[str]:
        """The paths to read: those given, or the files the ``--image`` addresses start from."""
        if given:
            return list(given)
        if not self.addresses:
            raise BadArguments("give a PATH (or --image ADDRESS)")
        return list(dict.fromkeys(a.path for a in self.addresses))

    def __call__(self, image: Image) -> bool:
        if self.addresses:
            if image.address not in self.addresses:
                return False
            self.matched.add(image.address)
        if image.arch:
            self.seen.add(image.arch)
        from devbin.targets.registry import arch_option_matches  # cuobjdump -arch's rule, per vendor
        taken = not self.archs or any(arch_option_matches(image.arch, a) for a in self.archs)
        self.taken += taken
        return taken

    def check(self, *, like_cuobjdump: bool = False) -> None:
        """BadArguments naming every ``--image`` address that matched no image (after the scan);
        UsageError (exit 1) when ``--arch`` took no image of the input, or with ``like_cuobjdump`` (an
        output that must be cuobjdump's: ``resources --format cuobjdump``) a note on stderr, stdout and the
        exit status staying cuobjdump's."""
        missing = [str(a) for a in self.addresses if a not in self.matched]
        if missing:
            raise BadArguments(f"--image: no device image at {', '.join(repr(m) for m in missing)} "
                               "(`devbin list --all` prints the addresses)")
        if self.archs and not self.taken and self.seen:
            message = f"--arch {','.join(self.archs)} matches no image; the input holds {', '.join(sorted(self.seen))}"
            if not like_cuobjdump:
                raise UsageError(message)
            note(message)


T = TypeVar("T")


def keep(items: Iterable[T], choose: ImageFilter, image: Callable[[T], Image], *,
         like_cuobjdump: bool = False) -> list[T]:
    """The items whose image ``choose`` takes; BadArguments for an ``--image`` address that named none
    (``like_cuobjdump``: :meth:`ImageFilter.check`'s)."""
    kept = [x for x in items if choose(image(x))]
    choose.check(like_cuobjdump=like_cuobjdump)
    return kept


def image_keys(image: Image) -> dict[str, Any]:
    """The keys every command gives an image (``Image.to_dict()``)."""
    return image.to_dict()

