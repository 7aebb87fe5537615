"""Inputs named by URL, read through fsspec: ``https://host/wheels/x.whl``, ``s3://bucket/x.whl``.

A path that starts with a scheme of two or more letters and ``://`` (:func:`is_url`) is opened with
``fsspec`` (https://filesystem-spec.readthedocs.io), so that the workers of a Dask cluster
(``--scheduler``, :mod:`devbin.images.parallel`) read the files from object storage or a web server
instead of a shared disk.  Which schemes work is fsspec's: ``http``/``https`` need ``aiohttp``, ``s3``
needs ``s3fs``; a scheme whose package is missing is one :class:`~devbin.errors.UsageError` naming it.
fsspec itself comes with the extra ``devbin[dask]``.

What is read, and what is not (:meth:`devbin.images.scan.Scanner.file`):

* a **zip** (a wheel) is read as a seekable file: :mod:`zipfile` reads the end-of-central-directory
  record and the central directory, then each member's first bytes, and the members whose magic is a
  format devbin reads whole.  Over HTTP every read is a ``Range`` request (RFC 9110 section 14) of
  :data:`BLOCK_SIZE`-aligned blocks, each fetched once (fsspec's ``blockcache``: the first block, read
  for the magic, the central directory at the end and the members' headers are not fetched again, as
  the read-ahead cache did: 1.5 % more than the file on a wheel that is all device code), so a
  wheel's Python files and data without device code are never downloaded, only the block their
  first bytes sit in.  (A host library is an ELF: read whole, to find its device sections.)
* any **other file** is read whole once its first bytes name a format devbin reads (an ELF's section
  table points anywhere in the file, and its device sections are most of a GPU library); a file of no
  such format is left after its first block.

A URL is always a file: folders (an S3 prefix, a web server's index) are not listed.
"""

from __future__ import annotations

import re
from typing import IO, Any

from devbin.errors import UsageError

__all__ = ["BLOCK_SIZE", "is_url", "open_url", "url_size"]

#: The least bytes one read asks the server for (fsspec's ``block_size``): small enough that the first
#: bytes of a member without device code cost little, large enough that a member is not many requests.
BLOCK_SIZE = 1 << 20

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")


def is_url(path: object) -> bool:
    """Whether ``path`` (a str) names a file through fsspec (``scheme://...``, the scheme two letters or
    more, so that a Windows drive ``C:/`` is a path)."""
    return isinstance(path, str) and _URL.match(path) is not None


def _filesystem(url: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise UsageError(f"{url}: reading URLs needs fsspec: pip install 'devbin[dask]'") from None
    try:
        return fsspec.core.url_to_fs(url)  # type: ignore[no-any-return]
    except ImportError as e:  # the scheme's own package (aiohttp, s3fs) is missing
        raise UsageError(f"{url}: {e}") from None
    except ValueError as e:  # a scheme fsspec does not know
        raise UsageError(f"{url}: {e}") from None


def open_url(url: str) -> IO[bytes]:
    """``url`` opened for reading, seekable, read in cached blocks of :data:`BLOCK_SIZE` (raises OSError when
    it cannot be opened: not found, refused)."""
    fs, path = _filesystem(url)
    try:
        return fs.open(path, "rb", block_size=BLOCK_SIZE, cache_type="blockcache")  # type: ignore[no-any-return]
    except FileNotFoundError as e:  # fsspec's http says only the URL, its cause (refused, 404) is chained
        cause = e.__cause__ or e.__context__
        why = f"{type(cause).__name__}: {cause}" if cause is not None else "no such file"
        raise FileNotFoundError(f"cannot open {url}: {why}") from e
    except OSError:
        raise
    except Exception as e:  # aiohttp's ClientError and the like: the file cannot be read
        raise OSError(f"cannot open {url}: {type(e).__name__}: {e}") from e


def url_size(url: str) -> int:
    """The bytes of the file at ``url`` (0 when its size cannot be asked: the scan then reports it)."""
    try:
        fs, path = _filesystem(url)
        return int(fs.size(path) or 0)
    except UsageError:
        raise
    except Exception:
        return 0
