"""Whether a checkpoint file is whole: a file cut off part-way (an interrupted download or copy) is told apart from
one that is damaged or unsafe, before anything unpickles it.

``torch.save`` writes a zip archive: a local header and the data of each entry (``archive/data.pkl``,
``archive/data/0`` ...), then the central directory, then the end-of-central-directory record (22 bytes from
``PK\\x05\\x06``, plus a comment of at most 65,535 bytes) at the very end. A file that opens as a zip archive
(``PK\\x03\\x04``) but has no end record within its last 65,557 bytes was cut off. Walking its local headers (each
30 bytes from ``PK\\x03\\x04``, then the name, the extra field and the data, whose size the header gives; a ZIP64
entry gives it in extra field 0x0001) finds the first entry that runs past the end of the file: the archive needed
at least that entry's end.
"""
import os
import struct

_LOCAL = b'PK\x03\x04'
_END = b'PK\x05\x06'
_END_SEARCH = 22 + 0xFFFF      # the end record and the longest comment it may carry


class CheckpointTruncatedError(RuntimeError):
    """A checkpoint file that stops before the end of its archive (the message gives its size and what is missing)."""


def _entry_size(header, extra):
    """The stored size of a local entry: the header's 32-bit field, or the ZIP64 extra field's when it is 0xFFFFFFFF."""
    size = struct.unpack_from('<I', header, 18)[0]
    if size != 0xFFFFFFFF:
        return size
    at = 0
    while at + 4 <= len(extra):
        tag, length = struct.unpack_from('<HH', extra, at)
        if tag == 0x0001 and length >= 16:
            return struct.unpack_from('<Q', extra, at + 12)[0]     # uncompressed size (8 bytes), then compressed
        at += 4 + length
    return None


def _first_cut_entry(f, size):
    """``(name, end)`` of the first local entry whose header and name are in the file but whose data ends past
    ``size`` bytes, or ``(None, end of the last whole entry)`` (the file stops in a header, or after the entries)."""
    at = 0
    while at + 30 <= size:
        f.seek(at)
        header = f.read(30)
        if header[:4] != _LOCAL:
            break
        name_len, extra_len = struct.unpack_from('<HH', header, 26)
        name, extra = f.read(name_len), f.read(extra_len)
        data_size = _entry_size(header, extra)
        if len(name) < name_len or len(extra) < extra_len or data_size is None:
            break
        end = at + 30 + name_len + extra_len + data_size
        if end > size:
            return name.decode('utf-8', 'replace'), end
        at = end
    return None, at


def _has_end_record(tail):
    """Whether ``tail`` (the file's last bytes) ends with a whole end record: its signature, 18 more bytes, and the
    comment whose length the record's last two bytes give."""
    at = tail.rfind(_END)
    return at >= 0 and len(tail) >= at + 22 and at + 22 + struct.unpack_from('<H', tail, at + 20)[0] == len(tail)


def truncation_problem(path):
    """Why the zip archive at ``path`` is cut off, or None (whole, or not a zip archive at all)."""
    size = os.path.getsize(path)
    with open(path, 'rb') as f:
        if f.read(4) != _LOCAL:
            return None
        f.seek(max(0, size - _END_SEARCH))
        if _has_end_record(f.read()):
            return None
        name, end = _first_cut_entry(f, size)
    if name is not None:
        return (f'the file has {size:,} bytes but its entry {name!r} ends at byte {end:,}, and the end record of '
                'the archive (which every torch.save file ends with) is missing')
    return (f'the file has {size:,} bytes and its entries are whole up to byte {end:,}, but the end record of the '
            'archive (which every torch.save file ends with) is missing')


def check_not_truncated(path):
    """Raise :class:`CheckpointTruncatedError` naming ``path`` if its archive is cut off."""
    problem = truncation_problem(path)
    if problem is not None:
        raise CheckpointTruncatedError(
            f'checkpoint {str(path)!r} is cut off: {problem}. The download or copy stopped part-way: fetch the '
            'file again')
