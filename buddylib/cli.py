"""The ``buddy`` command line: the suite's jobs, each a subcommand with ``--help``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _bench(args: argparse.Namespace) -> int:
    from buddylib import bench

    df = bench.run(mib=args.mib, repeat=args.repeat, seed=args.seed)
    paths = bench.write(df, Path(args.out))
    print(paths["markdown"].read_text())
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    from buddylib import reproduce

    index = reproduce.run(Path(args.out), bench_mib=args.bench_mib)
    print(f"wrote {index}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="buddy", description=__doc__.split(":")[0] + ".")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    b = sub.add_parser("bench", help="compressor throughput and ratios beside zstd and lz4",
                       description="Time every compressor on sparse, smooth and random data "
                                   "and write CSV, Markdown and a figure.")
    b.add_argument("--mib", type=_positive_int, default=256, help="MiB per data kind (default 256)")
    b.add_argument("--repeat", type=_positive_int, default=3, help="timed calls, best kept (default 3)")
    b.add_argument("--seed", type=int, default=0, help="seed of the generated data (default 0)")
    b.add_argument("--out", default="reports/bench", help="output folder (default reports/bench)")
    b.set_defaults(func=_bench)

    r = sub.add_parser("reproduce", help="run the main job into reports/ with an index",
                       description="Run every result of the suite at default scale into a "
                                   "reports folder and write its index.")
    r.add_argument("--out", default="reports", help="reports folder (default reports)")
    r.add_argument("--bench-mib", type=_positive_int, default=256,
                   help="MiB per data kind in the compressor benchmark (default 256)")
    r.set_defaults(func=_reproduce)
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError) as exc:
        print(f"buddy {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
