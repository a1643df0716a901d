#!/usr/bin/env python3
"""Check and time every numgemm kernel: python bench.py --all (options: --help)."""

import sys

from numgemm.bench import main

if __name__ == "__main__":
    sys.exit(main())
