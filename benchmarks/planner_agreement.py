"""Agreement of the offline planner with the LLM planner on the expert domains (not in CI).

For every domain in ``tests/planner/expert_domains.toml``, plans the description with both
providers and prints the Jaccard index of the chosen corruption sets, their differences, and
whether each plan holds the domain's expected and forbidden choices; then the mean Jaccard.
Needs an LLM endpoint: DOMAINBENCH_LLM_API_KEY (or OPENAI_API_KEY / DOMAINBENCH_LLM_BASE_URL,
read as `domainbench plan --provider openai` reads them); without one it says so and exits 2.

    python benchmarks/planner_agreement.py [--samples N] [--only KEY ...]
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

DOMAINS_FILE = Path(__file__).resolve().parents[1] / "tests" / "planner" / "expert_domains.toml"


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=5, help="self-consistency samples per planner (default 5)")
    ap.add_argument("--only", nargs="*", default=None, help="domain keys to run (default: all)")
    args = ap.parse_args(argv)

    from domainbench.planner import plan
    from domainbench.planner.settings import settings_from_env

    if not settings_from_env().configured:
        print("no LLM endpoint configured (set DOMAINBENCH_LLM_API_KEY, or DOMAINBENCH_LLM_BASE_URL for a "
              "local server); the offline/LLM agreement needs one", file=sys.stderr)
        return 2
    domains = tomllib.loads(DOMAINS_FILE.read_text(encoding="utf-8"))
    keys = args.only or list(domains)
    scores = []
    for key in keys:
        d = domains[key]
        off = {c.name for c in plan(d["text"], provider="offline", samples=args.samples).corruptions}
        llm = {c.name for c in plan(d["text"], provider="openai", samples=args.samples).corruptions}
        j = jaccard(off, llm)
        scores.append(j)
        print(f"{key:24s} jaccard {j:.2f}  offline-only {sorted(off - llm)}  llm-only {sorted(llm - off)}")
        for who, got in (("offline", off), ("llm", llm)):
            missing, wrong = set(d["expected"]) - got, set(d["forbidden"]) & got
            if missing or wrong:
                print(f"{'':24s} {who}: missing expected {sorted(missing)}, chose forbidden {sorted(wrong)}")
    print(f"mean jaccard over {len(scores)} domains: {sum(scores) / len(scores):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
