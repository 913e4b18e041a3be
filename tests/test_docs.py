"""The front door and the docs: the README stays short, and no link in README.md or docs/ points nowhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # a '# comment' in a code block is no heading
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.M)}


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    return broken


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert [h for h in headings if h.startswith("Quick start")] == [
        "Quick start 1: the demo (no network, no GPU)",
        "Quick start 2: your own images and a pretrained CLIP / SigLIP on a GPU",
        "Quick start 3: the UI",
    ]
    assert "pip install -e ." in text and "HF_HUB_OFFLINE=0" in text and "domainbench.run(" in text
    # one namespace, no design file outside the repository (issue 35's stale statements)
    assert "four packages" not in text and "../" not in text


def test_every_link_of_the_readme_and_the_docs_resolves() -> None:
    assert {page.relative_to(ROOT).as_posix(): broken_links(page) for page in PAGES if broken_links(page)} == {}


def test_the_link_checker_sees_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Top\n## Error contract\n[ok](#error-contract) [bad](#nope) [gone](b.md) [ok2](a.md#top)\n")
    assert broken_links(tmp_path / "a.md") == ["#nope", "b.md"]
