"""Plans fitted to deployment photos: measure the degradations in a few unlabelled photos and pick the
corruption and continuous severity whose output on the clean dataset matches them (issue 39, Deliver 3).

A practitioner usually has a few pictures from the real camera. Their degradations are measured with
established no-reference estimators, each a number per image (averaged over the photos):

- noise σ: the median absolute deviation of the finest diagonal Haar wavelet coefficients / 0.6745
  (Donoho & Johnstone 1994; what ``skimage.restoration.estimate_sigma`` computes, written out here
  because that function needs PyWavelets, which the project does not install);
- sharpness: the variance of the Laplacian (Pech-Pacheco et al. 2000);
- blockiness: the mean jump across 8-pixel block borders over the mean jump inside blocks (JPEG's
  8x8 DCT grid); and, for JPEG files, the quality their quantisation tables were written with;
- exposure and contrast: the histogram's mean and standard deviation;
- haze: the mean of the dark channel (He, Sun & Tang 2009);
- impulses: the share of pixels at 0 or 255 that differ from their 3x3 median by more than 64;
- colour cast (colour datasets): the distance of the mean CIELAB chromaticity (a*, b*) from grey.

Every candidate corruption is applied to the clean images the run will use at severities 1..5 in
quarter steps (a continuous severity s interpolates the parameters of floor(s) and ceil(s)), and the
same statistics are measured on its output. The photos' statistics are compared with every
(corruption, severity) and with the clean images, each statistic scaled by its spread over the table
(log scale for σ, sharpness and blockiness, which act multiplicatively); a corruption's fit is its
closest severity. The plan names what was measured and why each corruption was chosen ("measured
noise σ 9.1 vs 1.2 in your clean images -> gaussian_noise 2.6").

Statistics are size-normalised: photos are resized to the clean images' size before they are measured.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import ndimage

from domainbench.errors import UserInputError
from domainbench.planner.audit import digest_files


#: corruptions whose look one of the statistics measures
CANDIDATES = (
    "gaussian_noise", "shot_noise", "iso_noise", "impulse_noise", "salt_and_pepper", "gaussian_blur", "defocus_blur",
    "motion_blur", "jpeg_compression", "pixelate", "brightness", "contrast", "low_light", "fog", "color_shift",
)
#: why the others cannot be measured in unlabelled photos
UNMEASURABLE = {
    "geometric (rotation, flips, perspective, elastic, grid and lens distortion)":
        "a tilt or a mirror image leaves no trace in a photo without a reference",
    "weather and occlusion with structure (rain, snow, frost, cloud_overlay, shadow, occluder, lens_spatter)":
        "their look is a scene layout, not an image statistic",
    "zoom_blur, glass_blur, speckle_noise, row_noise, vignetting, posterize, webp_compression, saturate, chromatic_aberration":
        "no statistic here separates them from the corruptions above",
}
STATS = ("noise_sigma", "sharpness", "blockiness", "mean", "contrast", "dark_channel", "impulses", "colour_cast")
LABELS = {
    "noise_sigma": "noise σ", "sharpness": "sharpness (variance of the Laplacian)", "blockiness": "8x8 blockiness",
    "mean": "mean level", "contrast": "RMS contrast", "dark_channel": "dark channel (haze)",
    "impulses": "impulse share", "colour_cast": "colour cast (CIELAB a*b* distance from grey)",
}
LOG_STATS = {"noise_sigma", "sharpness", "blockiness"}
GRID = np.round(np.arange(1.0, 5.0001, 0.25), 2)
MAX_PHOTOS = 64
#: clean images of the dataset the photos are compared with
REFERENCE_IMAGES = 48
PHOTO_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".gif"}


# ---------------------------------------------------------------------------- estimators
def _grey(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 3 and x.shape[2] == 3:
        return x @ np.array([0.299, 0.587, 0.114])  # ITU-R BT.601 luma
    return x.reshape(x.shape[0], x.shape[1])


def noise_sigma(x: np.ndarray) -> float:
    """Donoho's MAD estimate of Gaussian noise σ from the finest diagonal Haar detail (0-255 scale)."""
    g = _grey(x)
    h, w = (g.shape[0] // 2) * 2, (g.shape[1] // 2) * 2
    g = g[:h, :w]
    hh = (g[0::2, 0::2] - g[0::2, 1::2] - g[1::2, 0::2] + g[1::2, 1::2]) / 2.0
    return float(np.median(np.abs(hh)) / 0.6745)


def sharpness(x: np.ndarray) -> float:
    return float(ndimage.laplace(_grey(x)).var())


def blockiness(x: np.ndarray, block: int = 8) -> float:
    """Mean absolute jump across block borders over the mean jump between other neighbours (1: no grid)."""
    g = _grey(x)
    dh = np.abs(np.diff(g, axis=1))  # jump between column j and j+1
    dv = np.abs(np.diff(g, axis=0))
    on_h = (np.arange(dh.shape[1]) % block) == block - 1
    on_v = (np.arange(dv.shape[0]) % block) == block - 1
    border = np.concatenate([dh[:, on_h].ravel(), dv[on_v, :].ravel()])
    inside = np.concatenate([dh[:, ~on_h].ravel(), dv[~on_v, :].ravel()])
    if border.size == 0 or inside.size == 0:
        return 1.0
    return float((border.mean() + 1e-3) / (inside.mean() + 1e-3))


def dark_channel(x: np.ndarray) -> float:
    """Mean of the dark channel (min over colour channels, then a local minimum), on a 0-1 scale."""
    a = np.asarray(x, dtype=np.float64)
    m = a.min(axis=2) if a.ndim == 3 else a
    size = max(3, int(round(min(m.shape) / 15)) | 1)
    return float(ndimage.minimum_filter(m, size=size).mean() / 255.0)


def impulses(x: np.ndarray) -> float:
    g = _grey(x)
    med = ndimage.median_filter(g, size=3)
    extreme = (g <= 0.5) | (g >= 254.5)
    return float((extreme & (np.abs(g - med) > 64)).mean())


def colour_cast(x: np.ndarray) -> float:
    a = np.asarray(x)
    if a.ndim != 3 or a.shape[2] != 3:
        return 0.0
    from skimage.color import rgb2lab

    lab = rgb2lab(a.astype(np.float64) / 255.0)
    return float(math.hypot(lab[..., 1].mean(), lab[..., 2].mean()))


def statistics(images: Sequence[np.ndarray] | np.ndarray) -> dict[str, float]:
    """Every statistic, averaged over the images."""
    per = {k: [] for k in STATS}
    for x in images:
        g = _grey(x)
        per["noise_sigma"].append(noise_sigma(x))
        per["sharpness"].append(sharpness(x))
        per["blockiness"].append(blockiness(x))
        per["mean"].append(float(g.mean() / 255.0))
        per["contrast"].append(float(g.std() / 255.0))
        per["dark_channel"].append(dark_channel(x))
        per["impulses"].append(impulses(x))
        per["colour_cast"].append(colour_cast(x))
    return {k: float(np.mean(v)) for k, v in per.items()}


def jpeg_quality(path: Path) -> float | None:
    """The IJG quality a JPEG file's luminance quantisation table was scaled from (None: not a JPEG)."""
    from PIL import Image

    std = np.array([16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
                    14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
                    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99], dtype=np.float64)
    try:
        with Image.open(path) as im:
            tables = getattr(im, "quantization", None)
            if im.format != "JPEG" or not tables or 0 not in tables:
                return None
            q = np.asarray(tables[0], dtype=np.float64)
    except OSError:
        return None
    # Pillow gives the table in natural (row-major) order, as the IJG base table is written above
    base = std
    # IJG: table = floor((base * scale + 50) / 100), scale = 5000/Q (Q < 50) or 200 - 2Q; invert by least squares
    scale = float(np.clip(np.sum(q * base) / np.sum(base * base) * 100.0, 1e-6, None))
    quality = 5000.0 / scale if scale > 100 else (200.0 - scale) / 2.0
    return float(np.clip(quality, 1.0, 100.0))


# ---------------------------------------------------------------------------- continuous severities
def params_at(name: str, severity: float) -> dict:
    """The parameters of a continuous severity 1..5: those of floor and ceil, linearly interpolated."""
    from domainbench import corruptions

    s = float(np.clip(severity, 1.0, 5.0))
    lo, hi = int(math.floor(s)), int(math.ceil(s))
    a, b = corruptions.resolve_params(name, severity=lo), corruptions.resolve_params(name, severity=hi)
    t = s - lo
    out = {}
    for k, v in a.items():
        w = b[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v == w:
            out[k] = v if t < 0.5 else w
        elif isinstance(v, int) and isinstance(w, int):
            out[k] = int(round(v + t * (w - v)))
        else:
            out[k] = float(v + t * (w - v))
    return corruptions.validate_params(name, out)


def corrupt_at(images: np.ndarray, name: str, severity: float, seed: int = 0) -> np.ndarray:
    from domainbench import corruptions

    params = params_at(name, severity)
    return np.stack([np.asarray(corruptions.corrupt(x, name, params=params, seed=seed + i)) for i, x in enumerate(images)])


# ---------------------------------------------------------------------------- the fit
@dataclass
class Reference:
    """The clean images' statistics and every candidate's, per grid severity (a lookup table)."""

    clean: dict[str, float]
    table: dict[str, np.ndarray]  # corruption -> (len(GRID), len(STATS))
    scale: np.ndarray  # per statistic, in the (log) space distances are taken in
    colour: bool
    n_images: int
    #: digest of the clean pixels measured (the plan's "dataset" input)
    fingerprint: str = ""


def _vec(stats: dict[str, float]) -> np.ndarray:
    return np.array([math.log(max(stats[k], 1e-6)) if k in LOG_STATS else stats[k] for k in STATS])


def candidates(colour: bool) -> list[str]:
    return [c for c in CANDIDATES if colour or c != "color_shift"]


_REFERENCES: dict[tuple, Reference] = {}


def reference(clean: np.ndarray, seed: int = 0, names: Sequence[str] | None = None) -> Reference:
    """Measure the clean images and each candidate corruption at every grid severity on them (kept per
    process: the same clean images give the same table)."""
    clean = np.asarray(clean)
    import hashlib

    key = (hashlib.sha256(clean.tobytes()).hexdigest(), clean.shape, seed, tuple(names or ()), CANDIDATES)
    if key not in _REFERENCES:
        from domainbench.planner.audit import digest_pixels

        _REFERENCES[key] = dataclasses.replace(_reference(clean, seed, names), fingerprint=digest_pixels(clean))
    return _REFERENCES[key]


def _reference(clean: np.ndarray, seed: int, names: Sequence[str] | None) -> Reference:
    colour = clean.ndim == 4 and clean.shape[-1] == 3
    names = list(names or candidates(colour))
    table = {}
    for name in names:
        table[name] = np.stack([_vec(statistics(corrupt_at(clean, name, float(s), seed))) for s in GRID])
    base = _vec(statistics(clean))
    allrows = np.vstack([base[None, :], *table.values()])
    scale = allrows.std(axis=0)
    scale[scale < 1e-9] = np.inf  # a statistic nothing moves (colour on greyscale) counts for nothing
    return Reference(statistics(clean), table, scale, colour, len(clean))


@dataclass(frozen=True)
class Fit:
    name: str
    severity: float
    distance: float  # scaled distance of the photos' statistics from the corruption's at this severity


def _along(rows: np.ndarray, target: np.ndarray, scale: np.ndarray, steps: int = 20) -> tuple[float, float]:
    """(severity, distance) of the closest point on the piecewise-linear curve through the grid rows."""
    best = (float(GRID[0]), math.inf)
    for i in range(len(GRID) - 1):
        for t in np.linspace(0.0, 1.0, steps + 1):
            v = rows[i] + t * (rows[i + 1] - rows[i])
            d = float(np.sqrt(np.sum(((v - target) / scale) ** 2)))
            if d < best[1]:
                best = (float(GRID[i] + t * (GRID[i + 1] - GRID[i])), d)
    return best


def fit(photo_stats: dict[str, float], ref: Reference) -> tuple[list[Fit], float]:
    """Every candidate's best severity, closest first, and the photos' distance from the clean images."""
    target = _vec(photo_stats)
    clean_d = float(np.sqrt(np.sum(((_vec(ref.clean) - target) / ref.scale) ** 2)))
    fits = [Fit(name, *_along(rows, target, ref.scale)) for name, rows in ref.table.items()]
    return sorted(fits, key=lambda f: f.distance), clean_d


def _changed(photo: dict[str, float], ref: Reference, name: str, severity: float) -> str:
    """The measurement this corruption moves most (at its fitted severity), in words, for the reason."""
    base = _vec(ref.clean)
    rows = ref.table[name]
    at = np.array([np.interp(severity, GRID, rows[:, k]) for k in range(len(STATS))])
    z = np.abs((at - base) / ref.scale)
    z = np.where(np.isfinite(z), z, -1.0)
    parts = []
    for k in (STATS[i] for i in np.argsort(-z)[:2] if z[i] > 0):
        fmt = (lambda v: f"{v:.3g}") if k in LOG_STATS else (lambda v: f"{v:.3f}")
        parts.append(f"{LABELS[k]} {fmt(photo[k])} vs {fmt(ref.clean[k])}")
    return f"measured {' and '.join(parts)} in the clean images -> {name} {severity:.1f}"


# ---------------------------------------------------------------------------- photos
def load_photos(folder: Path, like: np.ndarray) -> tuple[np.ndarray, list[str], list[Path]]:
    """Decodable images of ``folder`` in the clean images' mode and size; warnings for what was skipped."""
    from PIL import Image

    folder = Path(folder)
    if not folder.is_dir():
        raise UserInputError(f"--photos {folder}: not a folder; give a folder of deployment photos (JPEG, PNG, ...)")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in PHOTO_SUFFIXES)
    if not files:
        raise UserInputError(f"--photos {folder}: no image files (.jpg, .png, ...) in it; add a few deployment photos")
    h, w = like.shape[1], like.shape[2]
    colour = like.ndim == 4 and like.shape[-1] == 3
    out, warnings, used = [], [], []
    for p in files[:MAX_PHOTOS]:
        try:
            with Image.open(p) as im:
                im = im.convert("RGB" if colour else "L")
                if im.size != (w, h):  # size-normalised: measured at the dataset's size
                    im = im.resize((w, h), Image.Resampling.BOX if im.width >= w else Image.Resampling.BICUBIC)
                out.append(np.asarray(im, dtype=np.uint8))
                used.append(p)
        except (OSError, ValueError, Image.DecompressionBombError) as e:
            warnings.append(f"skipped {p.name}: not a decodable image ({type(e).__name__})")
    if len(files) > MAX_PHOTOS:
        warnings.append(f"used the first {MAX_PHOTOS} of {len(files)} photos")
    if not out:
        raise UserInputError(f"--photos {folder}: none of its {len(files)} image files could be decoded; "
                             "give JPEG or PNG photos")
    return np.stack(out), warnings, used


@dataclass
class PhotoPlan:
    fits: list[Fit]
    clean_distance: float
    chosen: list[Fit]
    measured: dict[str, float]
    clean: dict[str, float]
    notes: list[str] = field(default_factory=list)
    jpeg_quality: float | None = None
    #: digest of the photo files read (the plan's "photos" input)
    photos_digest: str = ""


def quality_severity(quality: float) -> float | None:
    """The continuous jpeg_compression severity whose quality equals ``quality`` (None: milder than 1)."""
    from domainbench import corruptions

    qs = [corruptions.resolve_params("jpeg_compression", severity=s)["quality"] for s in range(1, 6)]
    if quality > qs[0]:
        return None
    return float(np.interp(-quality, [-q for q in qs], [1, 2, 3, 4, 5]))


#: a corruption is chosen when, applied to the clean images, it leaves at most this share of their
#: distance from the photos (other clean images of the same dataset stay at 0.9 or more: measured
#: on the bundled sample, images 500-515 against images 0-47)
EXPLAINS = 0.8


def plan_photos(photos: np.ndarray, ref: Reference, files: Sequence[Path] = (), top: int = 3) -> PhotoPlan:
    """The corruptions that explain the photos clearly better than the clean images do (at most ``top``)."""
    measured = statistics(photos)
    fits, clean_d = fit(measured, ref)
    chosen = [f for f in fits[:top] if f.distance <= EXPLAINS * clean_d]
    notes = [f"measured {len(photos)} photos against {ref.n_images} clean images: "
             + ", ".join(f"{LABELS[k]} {measured[k]:.3g} (clean {ref.clean[k]:.3g})" for k in STATS
                         if ref.colour or k != "colour_cast")]
    qualities = [q for q in (jpeg_quality(p) for p in files) if q is not None]
    pp = PhotoPlan(fits, clean_d, chosen, measured, ref.clean, notes, photos_digest=digest_files(files) if files else "")
    if qualities:
        pp.jpeg_quality = float(np.median(qualities))
        sev = quality_severity(pp.jpeg_quality)
        notes.append(f"{len(qualities)} photos are JPEG files saved at quality ≈ {pp.jpeg_quality:.0f} (quantisation tables)"
                     + (f" -> jpeg_compression {sev:.1f}" if sev else "; milder than jpeg_compression severity 1"))
        if sev is not None:
            pp.chosen = [f for f in pp.chosen if f.name != "jpeg_compression"] + [Fit("jpeg_compression", sev, 0.0)]
    if not pp.chosen:
        notes.append("the photos' statistics are as close to the clean images as to any corruption: none measured")
    return pp


def levels(severity: float) -> list[int]:
    """The integer severities a run uses for a fitted continuous severity: the two around it."""
    lo, hi = int(math.floor(severity)), int(math.ceil(severity))
    return sorted({min(max(lo, 1), 5), min(max(hi, 1), 5)})


def reason(pp: PhotoPlan, ref: Reference, f: Fit) -> str:
    if f.distance == 0.0 and pp.jpeg_quality is not None and f.name == "jpeg_compression":
        return f"Measured in the deployment photos: JPEG files saved at quality ≈ {pp.jpeg_quality:.0f} -> jpeg_compression {f.severity:.1f}."
    return (f"Measured in the deployment photos: {_changed(pp.measured, ref, f.name, f.severity)} "
            f"(closest match of {len(ref.table)} corruptions on the clean images, distance {f.distance:.2f} vs {pp.clean_distance:.2f} for none).")


# ---------------------------------------------------------------------------- validation
@dataclass(frozen=True)
class Trial:
    name: str
    severity: float
    top3: list[str]
    fitted: float | None
    recovered: bool


@dataclass
class Recovery:
    trials: list[Trial]
    unmeasurable: list[str]

    @property
    def hits(self) -> int:
        return sum(t.recovered for t in self.trials)

    @property
    def rate(self) -> float:
        return self.hits / len(self.trials) if self.trials else 0.0


@dataclass
class Measured:
    """Deployment photos measured against the clean dataset: what ``to_plan`` turns into a plan."""

    photos: PhotoPlan
    ref: Reference
    warnings: list[str]
    n_photos: int


def measure(folder: Path, dataset: str = "sample") -> Measured:
    """Measure the photos of ``folder`` against ``dataset``'s clean images (``plan --photos``, New domain's upload)."""
    clean, _ = probe_clean(dataset, n=REFERENCE_IMAGES)
    shots, warnings, files = load_photos(folder, like=clean)
    ref = reference(clean)
    return Measured(plan_photos(shots, ref, files), ref, warnings, len(shots))


def probe_clean(spec: str, n: int = 12, offset: int = 0) -> tuple[np.ndarray, str]:
    from domainbench.data import open_dataset

    ds = open_dataset(spec)
    idx = np.arange(offset, min(offset + n, len(ds)))
    return ds.load(idx).images, f"{ds.name}[{offset}:{offset + len(idx)}]"


def recovery(clean: np.ndarray, photos_clean: np.ndarray, severities: Sequence[float] = (1.5, 2.6, 3.7),
             names: Sequence[str] | None = None, seed: int = 1, tolerance: float = 0.75) -> Recovery:
    """Corrupt ``photos_clean`` with one known corruption at a known severity, fit it against ``clean``."""
    ref = reference(clean, seed=0, names=names)
    trials = []
    for name in ref.table:
        for s in severities:
            photos = corrupt_at(photos_clean, name, s, seed=seed)
            fits, _ = fit(statistics(photos), ref)
            top3 = [f.name for f in fits[:3]]
            mine = next(f for f in fits if f.name == name)
            ok = name in top3 and abs(mine.severity - s) <= tolerance
            trials.append(Trial(name, s, top3, round(mine.severity, 2), ok))
    colour = ref.colour
    unmeasurable = [*UNMEASURABLE] + ([] if colour else ["color_shift (the clean images are greyscale)"])
    return Recovery(trials, unmeasurable)


# ---------------------------------------------------------------------------- into a plan
def to_plan(pp: PhotoPlan, ref: Reference, cfg=None, source: str = "deployment photos"):  # noqa: ANN001, ANN201
    """A DomainConfig from the measured corruptions, or ``cfg`` (the text's plan) combined with them.

    With text, the measured corruptions the text's plan lacks are added (the measurement is the reason),
    a text choice the photos measure is given the measured severities, and every disagreement is
    stated in the plan's notes; the sanity rules of the text still forbid what its domain cannot show.
    """
    from domainbench.records.config import CorruptionChoice, DomainConfig, PlannerProvenance
    from domainbench.planner import rules
    from domainbench.planner.audit import stamp
    from domainbench.planner.catalogue import load_catalogue

    cat = load_catalogue()
    measured = {f.name: f for f in pp.chosen}
    notes = list(pp.notes)
    photo_choices = {f.name: CorruptionChoice(name=f.name, severities=levels(f.severity), reason=reason(pp, ref, f))
                     for f in pp.chosen}
    if cfg is None:
        text = source
        req = rules.requirements(text, cat.names)
        chosen = list(photo_choices.values())
        have = {c.name for c in chosen}
        by_name = cat.by_name()
        from domainbench.planner.llm import required_choice

        chosen += [required_choice(by_name[n], why) for n, why in req.required.items() if n not in have]
        planner = PlannerProvenance(provider="photos", model="photo-fit", prompt_version="photo-fit-1", samples=1,
                                    frequencies={n: (1.0 if n in have else 0.0) for n in cat.names}, violations=notes)
        return stamp(DomainConfig(domain=text, corruptions=chosen, planner=planner),
                     photos=pp.photos_digest, dataset=ref.fingerprint)
    req = rules.requirements(cfg.domain, cat.names)
    out = []
    text_names = {c.name for c in cfg.corruptions}
    for c in cfg.corruptions:
        if c.name in measured:
            f = measured[c.name]
            out.append(c.model_copy(update={"severities": levels(f.severity),
                                            "reason": c.reason.rstrip(".") + "; " + photo_choices[c.name].reason[0].lower()
                                            + photo_choices[c.name].reason[1:]}))
        else:
            out.append(c)
            if c.name in ref.table and pp.chosen:
                notes.append(f"disagreement: the description calls for {c.name} but the photos show no sign of it "
                             "(it is not among the corruptions that explain them); kept")
    for name, choice in photo_choices.items():
        if name in text_names:
            continue
        if name in req.forbidden:
            notes.append(f"disagreement: the photos measure {name} {measured[name].severity:.1f} but the sanity rules "
                         f"forbid it for {req.forbidden[name]}; left out")
            continue
        notes.append(f"disagreement: the photos measure {name} {measured[name].severity:.1f}, which the description "
                     "does not call for; added")
        out.append(choice)
    planner = cfg.planner.model_copy(update={"violations": [*cfg.planner.violations, *notes],
                                             "model": f"{cfg.planner.model}+photo-fit" if cfg.planner.model else "photo-fit"})
    return stamp(cfg.model_copy(update={"corruptions": out, "planner": planner}), photos=pp.photos_digest, dataset=ref.fingerprint)
