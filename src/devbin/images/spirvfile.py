"""A SPIR-V module named on the command line (``devbin list k.spv``): one image, the whole file.

Found by walking a folder or a zip, a file that is only a SPIR-V module is passed over (the scan's
registry has no entry for the magic): a folder or a wheel of Vulkan shaders would flood every listing.
A file the user names explicitly is read (:meth:`devbin.images.scan.Scanner.file`), by its header
(:mod:`devbin.formats.spirv`; SPIR-V specification §2.3, §2.4,
https://registry.khronos.org/SPIR-V/specs/unified1/SPIRV.html):

* a module declaring the ``Kernel`` capability (OpenCL/SYCL compute: what ``ocloc -spv_only``,
  ``llvm-spirv`` and SYCL's ``spir64`` images are) is one image, kind ``spirv``, container ``file``
  (a bare image, as a bare cubin is), with metadata ``triple`` from its addressing model
  (``Physical64`` -> ``spir64-unknown-unknown``); the vendor is the one that triple names
  (:func:`devbin.images.sniff.vendor_of`: ``spir64`` is Intel's JIT code, the SPIR-V its runtime
  compiles, as for SPIR-V found in a SYCL library or an ocloc fat archive); arch ``""``;
* a module without it (``Shader``: Vulkan/OpenGL, ``Logical`` addressing) is no vendor's device code:
  it is not an image; a warning says what it is (so the command fails for it as for any named file it
  could not read as device code, rather than saying nothing);
* a module whose header cannot be read is a warning too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from devbin.binary import Buffer, ByteView
from devbin.errors import DeviceBinaryError
from devbin.formats.spirv import read_spirv
from devbin.images.frame import Frame, Hit
from devbin.images.oclelf import SectionImage
from devbin.images.record import SPIRV, Image
from devbin.images.sniff import vendor_of

if TYPE_CHECKING:
    from devbin.images.scanreport import ScanReport

__all__ = ["CAPABILITY_KERNEL", "CONTAINER", "SHADER_NOTE", "spirv_file"]

#: The container of a bare image (:data:`devbin.images.containers.BARE`): the whole file.
CONTAINER: Final = "file"
#: ``SpvCapabilityKernel`` (SPIRV-Headers ``include/spirv/unified1/spirv.h``).
CAPABILITY_KERNEL: Final = 6
#: The warning for a module that is no vendor's device code.
SHADER_NOTE: Final = ("a SPIR-V shader module (no Kernel capability: Vulkan/OpenGL, not compute device code of any "
                      "vendor); not an image")


def spirv_file(rep: ScanReport, data: Buffer, frame: Frame) -> Iterator[Hit]:
    """The image a named SPIR-V file is (module docstring), or nothing and a warning."""
    where = frame.where
    view = ByteView(data, fmt="spirv", where=where)
    try:
        module = read_spirv(view, where=where)
    except DeviceBinaryError as e:
        rep.warn(where, str(e))
        return
    if CAPABILITY_KERNEL not in module.capabilities:
        rep.warn(where, SHADER_NOTE)
        return
    triple = module.triple
    whole = memoryview(data)
    yield Image(address=frame.address, vendor=vendor_of(SPIRV, triple), kind=SPIRV, arch="", size=len(whole),
                stored_size=len(whole), compression="none", container=CONTAINER, section="", offset=0,
                metadata=(("triple", triple),) if triple else (), native=SectionImage(whole)), frame
