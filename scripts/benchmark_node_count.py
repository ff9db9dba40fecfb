"""TGN's ms per history batch at many nodes, before and after (advance and scoring):
``python scripts/benchmark_node_count.py --nodes 6000 638486``."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from cftgnn.cli import ArgumentParser, friendly_errors


def main() -> None:
    parser = ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[6000, 638486],
                        help="node counts (default: 6000 638486)")
    parser.add_argument("--events", type=int, default=60_000,
                        help="events of each stream of random pairs (default: 60000)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timings of each, the fastest kept (default: 3)")
    args = parser.parse_args()
    if min(args.nodes) < 2 or args.events < 2_400 or args.repeats < 1:
        parser.error("--nodes must be >= 2, --events >= 2400, --repeats >= 1")
    from cftgnn.benchmarks.node_count import measure, table  # heavy (torch): after the checks

    print(table(measure(args.nodes, num_events=args.events, repeats=args.repeats)))


if __name__ == "__main__":
    with friendly_errors():
        main()
