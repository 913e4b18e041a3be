"""Built-in label sets and prompt templates, read from ``open_clip.zero_shot_metadata`` (no copied data).

``--classes imagenet1k``: the 1,000 ImageNet class names of CLIP's zero-shot evaluation, in
synset order (so an ImageFolder of the 1,000 synset folders, sorted, lines up). open_clip's list
names two pairs of classes alike: 657 and 744 are both "missile", 836 and 837 both
"sunglasses". Identical names give identical classifier rows, so one class of each pair could
never be predicted, and a label set with duplicates is refused everywhere; the second synset of
each pair is therefore named by its WordNet synonym: 744 "projectile" (n04008634 "projectile,
missile"), 836 "sunglass" (n04355933 "sunglass").

``--template openai80``: CLIP's 80 ImageNet templates; ``--template simple``: open_clip's 7.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from domainbench.errors import UserInputError

#: ImageNet-1k indices whose open_clip name repeats another class's, and the name used instead
IMAGENET_RENAMED = {744: "projectile", 836: "sunglass"}


def imagenet1k() -> list[str]:
    from open_clip.zero_shot_metadata import IMAGENET_CLASSNAMES

    names = list(IMAGENET_CLASSNAMES)
    for i, name in IMAGENET_RENAMED.items():
        names[i] = name
    return names


def _templates(name: str) -> list[str]:
    from open_clip import zero_shot_metadata as meta

    fns = meta.OPENAI_IMAGENET_TEMPLATES if name == "openai80" else meta.SIMPLE_IMAGENET_TEMPLATES
    return [f("{}") for f in fns]  # open_clip keeps them as functions of the class name


LABEL_SETS = {"imagenet1k": imagenet1k}
TEMPLATE_SETS = {"openai80": lambda: _templates("openai80"), "simple": lambda: _templates("simple")}


def resolve_classes(classes: Sequence[str] | None) -> list[str] | None:
    """``["imagenet1k"]`` -> the built-in names; any list is checked for duplicate names."""
    if classes is None:
        return None
    names = LABEL_SETS[classes[0]]() if len(classes) == 1 and classes[0] in LABEL_SETS else list(classes)
    check_unique(names, "--classes")
    return names


def resolve_templates(templates: Sequence[str] | None) -> list[str] | None:
    """``["openai80"]`` / ``["simple"]`` -> the built-in templates; others are used as given."""
    if templates is None:
        return None
    if len(templates) == 1 and templates[0] in TEMPLATE_SETS:
        return TEMPLATE_SETS[templates[0]]()
    return list(templates)


def check_unique(names: Sequence[str], what: str) -> None:
    dup = sorted(n for n, k in Counter(names).items() if k > 1)
    if dup:
        shown = ", ".join(repr(d) for d in dup[:10]) + (f" and {len(dup) - 10} more" if len(dup) > 10 else "")
        raise UserInputError(f"{what} names a class more than once ({shown}); give every class a distinct name")
