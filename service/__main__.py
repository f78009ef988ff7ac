"""`python -m placement_service [--host H] [--port P] [--workers N]`: the same as `placement serve`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from placement_service.server import run


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m placement_service", description="Serve the placement HTTP API.")
    parser.add_argument("--host", default=None, help="bind address (default: PLACEMENT_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (default: PLACEMENT_PORT or 8000)")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes (default 1)")
    args = parser.parse_args(argv)
    run(args.host, args.port, args.workers)


if __name__ == "__main__":
    main()
