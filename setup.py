"""Build of the optional compiled run path (issue 29; docs/PERFORMANCE.md).

Everything else is in ``pyproject.toml``. The one C extension,
``acp_proxy.core.wire._chunkscan``, is optional: where no C compiler (or no
Python headers) is found the build goes on without it, and the proxy runs the
pure-Python run path, which is also the reference it is tested against.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from setuptools import Extension, setup

_SOURCE = "acp_proxy/core/wire/_chunkscan.c"
_DIGEST = hashlib.sha256((Path(__file__).parent / _SOURCE).read_bytes()).hexdigest()

setup(
    ext_modules=[
        Extension(
            "acp_proxy.core.wire._chunkscan",
            [_SOURCE],
            # the source's digest: a stale build is caught (tests/core/wire/test_chunkscan.py)
            define_macros=[("ACP_CHUNKSCAN_SHA256", f'"{_DIGEST}"')],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
