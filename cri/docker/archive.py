"""Pulling one file out of the tar stream Docker's archive endpoint returns."""

from __future__ import annotations

import io
import tarfile

# Room for the tar member header plus PAX extended headers ahead of the file data.
TAR_HEADER_ALLOWANCE = 64 * 1024


def first_file_from_tar(data: bytes, limit: int) -> bytes | None:
    """Up to `limit` bytes of the first member if it is a regular file; `data` may be truncated
    after that member's first `limit` bytes."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as archive:
            member = archive.next()
    except (tarfile.TarError, EOFError):
        return None
    if member is None or not member.isfile():
        return None
    # Sliced by hand: tarfile's member reader reads ahead and fails on a truncated stream.
    start = member.offset_data
    return data[start : start + min(max(0, limit), member.size)]
