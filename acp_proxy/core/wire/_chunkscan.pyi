# Types of the optional C extension built from _chunkscan.c (docstrings there).
from collections.abc import Collection

SOURCE_CRC32: str

def fast_stretch(
    data: bytes, pos: int, known: Collection[str], max_depth: int, /
) -> tuple[int, int, int]: ...
