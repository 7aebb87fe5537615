"""Fuzz target: the SYCL host-binary reader (:mod:`devbin.formats.sycl.reader`) over any bytes read as an
ELF: the ``.tgtimg`` records, the image descriptors (version 2 and 3, relocated or stored pointers), their
offload entries and property sets, the zstd frames measured from their headers and decoded.

Contract under test: for any bytes, :func:`read_sycl_images` either succeeds or raises
:class:`devbin.errors.DeviceBinaryError`, and so does every image's ``image_data`` (capped at 16 MiB);
what it returns is consumed.  Each section is then rewritten by prune's :func:`devbin.formats.sycl.prune.
prune_section` with every image cut to half its bytes: it writes or gives its reason, and the file keeps
its length.  The SYCL seeds are the structural host libraries ``tests/test_sycl.py``
builds (:func:`fuzz.run_all.named_seeds`, at run time: nothing committed).

Run with atheris (coverage-guided):  PYTHONPATH=src:. python fuzz/fuzz_sycl.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import contextlib

from devbin.errors import DeviceBinaryError
from devbin.formats.elf.reader import open_elf
from devbin.formats.sycl.prune import prune_section
from devbin.formats.sycl.reader import read_sycl_images, sycl_sections

_CAP = 1 << 24


def TestOneInput(data: bytes) -> None:  # atheris' required name
    try:
        elf = open_elf(data, where="fuzz")
        images = read_sycl_images(elf)
    except DeviceBinaryError:
        return
    for img in images:
        _ = (img.format_name, img.compression, img.target, img.entries, img.compile_options, img.link_options,
             [(p.name, p.type, p.value) for ps in img.property_sets for p in ps.properties])
        try:
            out = img.image_data(_CAP)
            assert img.compressed or bytes(out) == bytes(img.stored)
            assert not img.compressed or len(out) == img.decoded_size
        except DeviceBinaryError:
            pass
        img.forget()
    for sec in sycl_sections(elf):
        own = [i for i in images if i.section == sec.name]
        buf = bytearray(data)
        with contextlib.suppress(DeviceBinaryError):
            prune_section(elf, buf, sec, own, {i.index: (bytes(i.stored[:len(i.stored) // 2]), 1) for i in own})
        assert len(buf) == len(data)


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
