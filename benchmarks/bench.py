"""Thin script over ``calyrex bench``: ``python benchmarks/bench.py --quick --json out.json``."""

import sys

from calyrex.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
