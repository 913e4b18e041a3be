"""A run overlays one frost texture for its whole life: the reference's photographs or the procedural ice.

Which one frost uses depends on the environment (``imagecorruptions`` installed or not,
``DOMAINBENCH_FROST_PHOTOS``), and every unit records it (``UnitRecord.frost_texture``). Without
this check a ``--resume`` in another environment silently put units of both textures into one
frost cell: two definitions of the same severity, as a changed ladder or dataset would.
"""

from __future__ import annotations

from domainbench.corruptions.kernels import frost_photos
from domainbench.errors import UserInputError
from domainbench.store import Store
from domainbench.store.records import RunRecord

#: how to get each texture source back in the resuming environment
_FIX = {
    "imagenet-c": "install the reference's frost photographs (pip install 'domainbench[imagenet-c]', or "
                  f"pip install --no-deps imagecorruptions==1.1.2, or point {frost_photos.ENV} at its frost folder)",
    "procedural": f"set {frost_photos.ENV}=procedural",
}


def frost_cells(run: RunRecord) -> list[str]:
    """The run's cells that overlay frost: the corruption itself and every composition with a frost step."""
    cells = [c.name for c in run.domain.corruptions if c.name == "frost"]
    return cells + [comp.cell_name for comp in run.domain.compositions if any(n == "frost" for n, _ in comp.pairs)]


def stored_textures(store: Store, run: RunRecord) -> set[str]:
    """The frost textures the run's stored units used (units stored before textures were recorded say nothing)."""
    cells = set(frost_cells(run))
    pairs = {(model, cell) for _, model, cell, *_ in store.units.keys(run_id=run.run_id) if cell in cells}
    return {u.frost_texture for model, cell in sorted(pairs) for u in store.units(run.run_id, model=model, corruption=cell)
            if u.frost_texture is not None}


def check_same_frost_texture(store: Store, run: RunRecord) -> None:
    """Refuse to resume ``run`` where frost would now overlay another texture than its stored units did."""
    stored = stored_textures(store, run)
    if not stored:
        return
    now = frost_photos.texture_source()
    if stored == {now}:
        return
    before = " and ".join(sorted(stored))
    (only,) = stored if len(stored) == 1 else (None,)
    fix = f"{_FIX[only]} and resume again, or " if only in _FIX else ""
    here = f"the {now} texture" + (f" (photographs in {frost_photos.photo_folder()})" if now == "imagenet-c" else "")
    raise UserInputError(
        f"run {run.run_id} overlaid frost with the {before} texture, but frost here uses {here}: resuming would mix "
        f"two frost textures in one cell; {fix}start a new run of the same domain")
