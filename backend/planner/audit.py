"""Plans people can audit: what a plan rests on (inputs' hashes, version, LLMs) and why each choice is in or out.

``stamp`` records the provenance when a plan is made; ``explain`` reads a plan back (a stored one too:
it needs nothing but the plan and the rule book) and says why each corruption is in and why the
notable ones are out: forbidden by a sanity rule, chosen by too few samples or planners, left out by
the image fit, or simply not called for by the description.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from domainbench.records.config import DomainConfig

#: corruptions every domain's photos can show: their absence is worth a line in the explanation
NOTABLE = ("brightness", "contrast", "gaussian_noise", "motion_blur", "jpeg_compression")


def digest_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def digest_files(files: Iterable[Path]) -> str:
    """One hash over the files' names and bytes, in name order (the folder as the planner read it)."""
    h = hashlib.sha256()
    for f in sorted(Path(p) for p in files):
        h.update(f.name.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def digest_pixels(images: np.ndarray) -> str:
    """The pixels a fit was measured on (the dataset's probe), shape included."""
    a = np.ascontiguousarray(images)
    return hashlib.sha256(repr((a.shape, str(a.dtype))).encode() + a.tobytes()).hexdigest()[:16]


def llm_label(model: str, base_url: str | None) -> str:
    """MODEL@HOST[:PORT]: never the URL's user, password, path or query (they can hold credentials)."""
    if not base_url:
        return model
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    return f"{model}@{host}{f':{parts.port}' if parts.port else ''}"


def stamp(cfg: DomainConfig, *, llms: Sequence[str] = (), **inputs: str) -> DomainConfig:
    """``cfg`` with its provenance completed: this version, the inputs' hashes (added to those it has) and the LLMs."""
    from domainbench import __version__

    prov = cfg.planner
    update = {
        "planner_version": __version__,
        "inputs": {**prov.inputs, **{k: v for k, v in inputs.items() if v}},
        "llms": list(dict.fromkeys([*prov.llms, *llms])),
    }
    return cfg.model_copy(update={"planner": prov.model_copy(update=update)})


@dataclass
class Choice:
    name: str
    severities: list[int]
    why: str


@dataclass
class Left:
    name: str
    why: str


@dataclass
class Explanation:
    domain: str
    chosen: list[Choice] = field(default_factory=list)
    left_out: list[Left] = field(default_factory=list)
    #: (label, value) lines of the plan's provenance
    provenance: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _out_of_vote(freq: float, samples: int, provider: str) -> str:
    who = "planners" if provider == "council" else "samples"
    if samples > 1:
        return f"chosen by {round(freq * samples)} of {samples} {who}, short of the majority"
    return f"chosen in {freq:.0%} of the {who}, short of the majority"


def explain(cfg: DomainConfig, catalogue_names: Iterable[str] | None = None) -> Explanation:
    """Why each corruption of ``cfg`` is in, and why the notable others are out."""
    from domainbench.planner import rules
    from domainbench.planner.catalogue import load_catalogue

    names = list(catalogue_names) if catalogue_names is not None else load_catalogue().names
    prov = cfg.planner
    out = Explanation(domain=cfg.domain, notes=list(prov.violations))
    out.chosen = [Choice(c.name, list(c.severities), c.reason) for c in cfg.corruptions]
    chosen = {c.name for c in cfg.corruptions}
    req = rules.requirements(cfg.domain, names)
    seen: set[str] = set()
    for name, why in sorted(req.forbidden.items()):
        if name not in chosen:
            out.left_out.append(Left(name, f"forbidden: {why}"))
            seen.add(name)
    for note in prov.violations:  # the image fit names what it removed (image_fit: "left out NAME: why")
        name = note.removeprefix("left out ").split(":", 1)[0]
        if note.startswith("left out ") and name in names and name not in chosen and name not in seen:
            out.left_out.append(Left(name, note.removeprefix(f"left out {name}: ")))
            seen.add(name)
    for name, freq in sorted(prov.frequencies.items(), key=lambda kv: (-kv[1], kv[0])):
        if name in chosen or name in seen or freq <= 0:
            continue
        out.left_out.append(Left(name, _out_of_vote(freq, prov.samples, prov.provider)))
        seen.add(name)
    for name in NOTABLE:
        if name in names and name not in chosen and name not in seen:
            out.left_out.append(Left(name, "not chosen: no phrase of the description or measurement of the photos calls for it"))
    out.provenance = [
        ("provider", prov.provider),
        ("model", prov.model or "—"),
        ("planner version", prov.planner_version or "— (made before plans recorded it)"),
        ("rules and prompts", prov.prompt_version or "—"),
        ("samples", str(prov.samples)),
        ("LLMs asked", ", ".join(prov.llms) or "none"),
        ("inputs (sha256)", ", ".join(f"{k} {v}" for k, v in sorted(prov.inputs.items())) or "— (made before plans recorded them)"),
        ("made", prov.created_at or "—"),
    ]
    return out
