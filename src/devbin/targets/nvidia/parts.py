"""What belongs to each function of a cubin beside its code, from the symbol and section tables alone
(``devbin size``'s ``related``, docs/JSON.md), and which functions are kernels.

* kernels: ``STO_CUDA_ENTRY`` (0x10) in the symbol's ``st_other`` (as cuobjdump -elf shows it;
  :mod:`devbin.targets.nvidia.cubin`);
* a function's own sections, ``<prefix><function name>``: ``.nv.constant0.<f>`` (``constant_bank``),
  other banks (``constant<N>``), ``.nv.info.<f>`` (``nv_info``), ``.rel(a).text.<f>``
  (``relocations``), the sm_100+ Mercury copies ``.nv.capmerc.text.<f>``/``.nv.merc.*.<f>``
  (``mercury``); each with its file bytes, summed per key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import compress
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile

__all__ = ["function_parts"]

#: NVIDIA kernels' symbols carry ``STO_CUDA_ENTRY`` in ``st_other``.
STO_CUDA_ENTRY: Final = 0x10

#: Section name prefixes of what belongs to one cubin function (``<prefix><function name>``), longest first,
#: and the ``related`` key each is reported under.
_RELATED: Final = (
    (".nv.capmerc.text.", "mercury"), (".nv.merc.rela.text.", "mercury"), (".nv.merc.rel.text.", "mercury"),
    (".nv.merc.nv.info.", "mercury"), (".nv.merc.text.", "mercury"),
    (".rela.text.", "relocations"), (".rel.text.", "relocations"), (".nv.info.", "nv_info"),
)
_RELATED_KEY: Final = dict(_RELATED)
#: A constant bank's section (``.nv.constant<bank>.``: group 1 the bank) or any of the prefixes of
#: :data:`_RELATED` (no two of which both begin one name), matched at once.
_RELATED_PREFIX: Final = re.compile("|".join([r"\.nv\.constant([^.]*)\.", *(re.escape(p) for p, _ in _RELATED)]))


def function_parts(elf: ElfFile, rows: Sequence[int], names: Sequence[str],
                   ) -> tuple[list[bool], dict[str, tuple[tuple[str, int], ...]]]:
    """Per symbol row (``rows``, named ``names``) whether it is a kernel, and per function name its
    related sections' bytes by key (module docstring)."""
    assert elf.symtab is not None
    other = elf.symtab.columns.st_other
    own: dict[str, dict[str, int]] = {}
    match = _RELATED_PREFIX.match
    file_sizes = elf.section_file_sizes
    for n, file_size in compress(zip(elf.section_names, file_sizes, strict=True), file_sizes):  # no Section made
        m = match(n)
        if m is None:
            continue
        fn = n[m.end():]
        bank = m.group(1)
        if bank is None:
            key = _RELATED_KEY[m.group()]
        elif bank.isdigit() and fn:
            key = "constant_bank" if bank == "0" else f"constant{bank}"
        else:
            continue
        mine = own.get(fn)
        if mine is None:
            own[fn] = {key: file_size}
        else:
            mine[key] = mine.get(key, 0) + file_size
    return [bool(other[i] & STO_CUDA_ENTRY) for i in rows], {fn: tuple(d.items()) for fn, d in own.items()}
