"""A user's domain text is shown literally (never Markdown) and a long one is folded behind "more"."""

from __future__ import annotations

import fe_synthetic as syn
from test_app import app, run_page, texts

from domainbench.store import Store
from domainbench.frontend.ui import md_escape

HOSTILE = "**bold** $x^2$ [a link](http://evil.example) :red[alarm] <b>tag</b> `code`"
RUN = "20250101-000000-night-abcd"


def test_domain_markup_is_shown_as_typed_and_long_text_folds(store: Store) -> None:
    long_text = HOSTILE + " filler" * 800  # about 5,700 characters
    syn.populate(store, run_id=RUN, domain=long_text)
    at = run_page(RUN)
    shown = [t.value for t in at.text]
    assert any(v.startswith(HOSTILE) and v.endswith(" …") and len(v) < 320 for v in shown), shown[:3]
    assert long_text in shown  # the whole text, behind the "more" expander
    assert any(e.label.startswith("more (5,") for e in at.expander)
    assert "alarm" not in texts(at.markdown)  # never rendered through Markdown
    # the list page's plan of the chosen domain, too
    at = app()
    next(s for s in at.selectbox if s.key == "domain-filter").set_value("d" + RUN[-4:]).run()
    assert any(v.startswith(HOSTILE) for v in (t.value for t in at.text))


def test_md_escape_leaves_no_markdown_construct() -> None:
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").render(md_escape(HOSTILE))
    assert "<strong>" not in html and "<a " not in html and "<code>" not in html and "<b>" not in html
    assert "**bold**" in html and "[a link](http://evil.example)" in html and ":red[alarm]" in html
