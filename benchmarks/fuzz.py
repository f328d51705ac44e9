"""The hostile-input fuzzer, long: the cases of ``tests/security/fuzz.py`` (CI runs 200 + 100 of them, derandomized)
drawn by hypothesis for as many examples as asked, over stdio and over streamable HTTP, with a seed.

    PYTHONPATH=. python benchmarks/fuzz.py --stdio 2000 --http 1000 --seed 7

Prints, per transport, how many cases of each kind ran, the calm call's latency at the start and the slowest calm
call sent alongside a case of each kind (as a ratio to the first), the proxy's RSS at the start and at its peak,
HTTP statuses, and whether any ledger entry was written twice. Exits 1 when a check failed (the failing case is
printed by hypothesis, shrunk). Every process started is stopped at the end; only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, seed, settings

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.security.fuzz import cases, http_cases, http_fuzz, stdio_fuzz  # noqa: E402

CALM_RATIO = 100.0


def _run(name: str, harness: Any, strategy: Any, examples: int, seed_value: int) -> bool:
    with tempfile.TemporaryDirectory() as tmp, harness(Path(tmp)) as fuzz:

        @seed(seed_value)
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(case=strategy)
        def check(case: tuple[str, object]) -> None:
            fuzz.run(case)

        ok = True
        try:
            check()
        except Exception as exc:  # hypothesis prints the shrunk case
            print(f"[{name}] FAILED: {type(exc).__name__}: {str(exc)[:500]}")
            ok = False
        stats = fuzz.stats
        twice = {k: n for k, n in collections.Counter(fuzz.ledger()).items() if n > 1}
        ratios = {kind: round(stats.ratio(kind), 1) for kind in stats.calm_by_kind}
        print(f"[{name}] {stats.summary()}")
        print(f"[{name}] slowest calm call alongside each kind / calm latency at start: {ratios}")
        if hasattr(fuzz, "statuses"):
            print(f"[{name}] HTTP statuses {dict(sorted(fuzz.statuses.items()))}")
        print(f"[{name}] ledger entries written twice: {twice or 'none'}")
        return ok and not twice and all(r <= CALM_RATIO for k, r in ratios.items() if k != "sampling")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stdio", type=int, default=2000, help="cases over stdio")
    parser.add_argument("--http", type=int, default=1000, help="cases over streamable HTTP")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    ok = True
    if args.stdio:
        ok &= _run("stdio", stdio_fuzz, cases, args.stdio, args.seed)
    if args.http:
        ok &= _run("http", http_fuzz, http_cases, args.http, args.seed)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
