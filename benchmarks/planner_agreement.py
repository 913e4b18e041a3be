"""Agreement of the planners with the corruptions GPT-4o chose for the product paper's six domains.

Default: for every domain of ``tests/planner/paper_domains.toml`` (the paper's own dataset
descriptions, and the corruptions its text reports GPT-4o choosing), plans the description with
the offline planner and prints the Jaccard index with GPT-4o's set, what each side has alone, the
sanity-rule violations and the acquisition factors read; then the mean Jaccard (target >= 0.7
with no violation). Those six domains are an evaluation only: the planner's cues and factors are
never written for them (tests/planner/test_planner_acquisition.py checks its keywords).

``--vs-llm``: the older comparison of the offline and the LLM planner on the expert domains
(``tests/planner/expert_domains.toml``). Needs an LLM endpoint: DOMAINBENCH_LLM_API_KEY (or
OPENAI_API_KEY / DOMAINBENCH_LLM_BASE_URL, read as `domainbench plan --provider openai` reads
them); without one it says so and exits 2. ``--provider openai`` scores the LLM planner against
GPT-4o's choices instead of the offline one.

    python benchmarks/planner_agreement.py [--quick] [--samples N] [--provider offline|openai] [--vs-llm] [--only KEY ...]
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

DOMAINS_FILE = Path(__file__).resolve().parents[1] / "tests" / "planner" / "expert_domains.toml"
PAPER_FILE = Path(__file__).resolve().parents[1] / "tests" / "planner" / "paper_domains.toml"


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def paper_agreement(provider: str, samples: int, only: list[str] | None) -> float:
    """Per-domain Jaccard with the paper's GPT-4o choices; returns the mean."""
    from domainbench.planner import acquisition, plan, rules
    from domainbench.planner.catalogue import load_catalogue

    names = load_catalogue().names
    domains = tomllib.loads(PAPER_FILE.read_text(encoding="utf-8"))
    scores, violations = [], 0
    for key in only or list(domains):
        d = domains[key]
        got = {c.name for c in plan(d["text"], provider=provider, samples=samples).corruptions}
        ref = set(d["gpt4o"])
        j = jaccard(got, ref)
        scores.append(j)
        broken = rules.check(d["text"], got, names) + [f"{n!r} is on the paper's blacklist" for n in sorted(got & set(d["never"]))]
        violations += len(broken)
        factors = [f.factor for f in acquisition.read(d["text"])]
        print(f"{key:14s} jaccard {j:.2f}  planner-only {sorted(got - ref)}  gpt-4o-only {sorted(ref - got)}")
        print(f"{'':14s} acquisition: {', '.join(factors) or 'none read'}" + (f"; VIOLATIONS {broken}" if broken else ""))
    mean = sum(scores) / len(scores)
    print(f"mean jaccard with GPT-4o over {len(scores)} paper domains ({provider}): {mean:.3f}; rule violations: {violations}")
    return mean


def offline_vs_llm(samples: int, only: list[str] | None) -> int:
    from domainbench.planner import plan
    from domainbench.planner.settings import settings_from_env

    if not settings_from_env().configured:
        print("no LLM endpoint configured (set DOMAINBENCH_LLM_API_KEY, or DOMAINBENCH_LLM_BASE_URL for a "
              "local server); the offline/LLM agreement needs one", file=sys.stderr)
        return 2
    domains = tomllib.loads(DOMAINS_FILE.read_text(encoding="utf-8"))
    keys = only or list(domains)
    scores = []
    for key in keys:
        d = domains[key]
        off = {c.name for c in plan(d["text"], provider="offline", samples=samples).corruptions}
        llm = {c.name for c in plan(d["text"], provider="openai", samples=samples).corruptions}
        j = jaccard(off, llm)
        scores.append(j)
        print(f"{key:24s} jaccard {j:.2f}  offline-only {sorted(off - llm)}  llm-only {sorted(llm - off)}")
        for who, got in (("offline", off), ("llm", llm)):
            missing, wrong = set(d["expected"]) - got, set(d["forbidden"]) & got
            if missing or wrong:
                print(f"{'':24s} {who}: missing expected {sorted(missing)}, chose forbidden {sorted(wrong)}")
    print(f"mean jaccard over {len(scores)} domains: {sum(scores) / len(scores):.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=5, help="self-consistency samples per planner (default 5)")
    ap.add_argument("--quick", action="store_true", help="3 samples per plan")
    ap.add_argument("--provider", default="offline", choices=["offline", "openai"], help="the planner scored against GPT-4o")
    ap.add_argument("--vs-llm", action="store_true", help="compare the offline and the LLM planner on the expert domains")
    ap.add_argument("--only", nargs="*", default=None, help="domain keys to run (default: all)")
    args = ap.parse_args(argv)
    samples = 3 if args.quick else args.samples
    if args.vs_llm:
        return offline_vs_llm(samples, args.only)
    paper_agreement(args.provider, samples, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
