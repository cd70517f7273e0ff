"""``python -m acp_proxy`` is the same as ``acp-proxy``."""

from acp_proxy.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
