"""Build of the optional compiled run path (issue 29; docs/PERFORMANCE.md).

Everything else is in ``pyproject.toml``. The one C extension,
``acp_proxy.core.wire._chunkscan``, is optional: where no C compiler (or no
Python headers) is found the build goes on without it, and the proxy runs the
pure-Python run path, which is also the reference it is tested against.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from setuptools import Extension, setup

_SOURCE = "acp_proxy/core/wire/_chunkscan.c"
_CRC32 = zlib.crc32((Path(__file__).parent / _SOURCE).read_bytes())


def _pure_python() -> bool:
    """``ACP_PROXY_PURE_PYTHON`` set (as ``acp_proxy.PURE_PYTHON`` reads it): build
    no extension, for a pure-Python wheel (``py3-none-any``) any Python 3.11+ takes."""
    value = os.environ.get("ACP_PROXY_PURE_PYTHON", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


setup(
    ext_modules=[]
    if _pure_python()
    else [
        Extension(
            "acp_proxy.core.wire._chunkscan",
            [_SOURCE],
            # the source's CRC-32: a build of another source is not used (runs.py)
            define_macros=[("ACP_CHUNKSCAN_CRC32", f'"{_CRC32:08x}"')],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
