"""Whether a checkpoint file is whole: a file cut off part-way (an interrupted download or copy) is told apart from
one that is damaged or unsafe, before anything unpickles it.

``torch.save`` writes a zip archive: each entry (``archive/data.pkl``, ``archive/data/0`` ...) is a local header
(30 bytes from ``PK\\x03\\x04``, then the name and an extra field), the data, and, because torch sets flag bit 3,
a data descriptor after the data (``PK\\x07\\x08``, the CRC, then the data's size in 4 bytes, or 8 for ZIP64, twice);
then the central directory and, at the very end, the end record (22 bytes from ``PK\\x05\\x06`` plus a comment of
at most 65,535 bytes whose length its last two bytes give). A file that opens as a zip archive but does not end
with a whole end record was cut off. Walking the entries from the start (an entry without flag bit 3 gives its
size in its header) finds where: inside an entry's data (the entry is named), or after the last whole entry. An
empty file (a download or copy that stopped before its first byte) is cut off too.
"""
import mmap
import os
import struct

_LOCAL = b'PK\x03\x04'
_DESCRIPTOR = b'PK\x07\x08'
_END = b'PK\x05\x06'
_END_SEARCH = 22 + 0xFFFF      # the end record and the longest comment it may carry


class CheckpointTruncatedError(RuntimeError):
    """A checkpoint file that stops before the end of its archive (the message gives its size and where it stops)."""


def _sized_end(header, extra, start):
    """End of an entry's data from the size in its header (the ZIP64 extra field 0x0001 where that is 0xFFFFFFFF)."""
    size = struct.unpack_from('<I', header, 18)[0]
    at = 0
    while size == 0xFFFFFFFF and at + 4 <= len(extra):
        tag, length = struct.unpack_from('<HH', extra, at)
        if tag == 0x0001 and length >= 16:
            size = struct.unpack_from('<Q', extra, at + 12)[0]     # uncompressed size (8 bytes), then compressed
        at += 4 + length
    return start + size


def _described_end(data, start):
    """End of an entry whose sizes follow its data: just after the first data descriptor whose size field equals its
    distance from ``start`` (4-byte or ZIP64 8-byte fields); None if the file ends first."""
    at = data.find(_DESCRIPTOR, start)
    while at >= 0:
        if at + 16 <= len(data) and struct.unpack_from('<I', data, at + 8)[0] == at - start:
            return at + 16
        if at + 24 <= len(data) and struct.unpack_from('<Q', data, at + 8)[0] == at - start:
            return at + 24
        at = data.find(_DESCRIPTOR, at + 1)
    return None


def _where_cut(data):
    """``(name, start)`` of the entry whose data runs past the end of ``data``, with where its header starts, or
    ``(None, end of the last whole entry)`` (the file stops in a header or after the entries)."""
    at = 0
    while at + 30 <= len(data) and data[at:at + 4] == _LOCAL:
        header = data[at:at + 30]
        flags, name_len, extra_len = (struct.unpack_from('<H', header, o)[0] for o in (6, 26, 28))
        start = at + 30 + name_len + extra_len
        if start > len(data):
            break
        name = bytes(data[at + 30:at + 30 + name_len]).decode('utf-8', 'replace')
        end = (_described_end(data, start) if flags & 0x08 else
               _sized_end(header, data[at + 30 + name_len:start], start))
        if end is None or end > len(data):
            return name, at
        at = end
    return None, at


def _has_end_record(tail):
    """Whether ``tail`` (the file's last bytes) ends with a whole end record."""
    at = tail.rfind(_END)
    return at >= 0 and len(tail) >= at + 22 and at + 22 + struct.unpack_from('<H', tail, at + 20)[0] == len(tail)


def truncation_problem(path):
    """Why the zip archive at ``path`` is cut off, or None (whole, or not a zip archive at all). An empty file, or one
    that stops inside the signature every zip archive starts with, is cut off too."""
    size = os.path.getsize(path)
    with open(path, 'rb') as f:
        head = f.read(4)
        if head != _LOCAL:
            if not _LOCAL.startswith(head):
                return None
            return ('the file is empty (0 bytes)' if size == 0 else
                    f'the file has {size} bytes and stops inside the signature every zip archive starts with')
        f.seek(max(0, size - _END_SEARCH))
        if _has_end_record(f.read()):
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            name, at = _where_cut(data)
    if name is not None:
        return (f'the file has {size:,} bytes and stops inside its entry {name!r} (from byte {at:,}); the end record '
                'of the archive (which every torch.save file ends with) is missing')
    return (f'the file has {size:,} bytes and its entries are whole up to byte {at:,}, but the end record of the '
            'archive (which every torch.save file ends with) is missing')


def check_not_truncated(path):
    """Raise :class:`CheckpointTruncatedError` naming ``path`` if its archive is cut off."""
    problem = truncation_problem(path)
    if problem is not None:
        raise CheckpointTruncatedError(
            f'checkpoint {str(path)!r} is cut off: {problem}. The download or copy stopped part-way: fetch the '
            'file again')
