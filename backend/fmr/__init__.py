"""Foundation-model-oriented robustness (FMR): oracle-checked, dynamically generated test images.

From the FMR paper (Algorithm 1): for each test image, search for a perturbed version that is
as hard as possible for the tested model while a zoo of zero-shot foundation models (majority
vote, ties reject) still assigns it the true label. SA is the tested model's clean accuracy,
PA its accuracy on the generated images, FMR = PA / SA × 100.

Modules: ``oracle`` (the zoo and its vote), ``tested`` (the model under test: a zero-shot VLM, a
torchvision classifier or a Python callable), ``generator`` (the greedy search over the domain's
corruption catalogue), ``differentiable`` (torch corruptions and the gradient-guided search),
``images`` (PNG payloads), ``units`` (one (tested model, shard) unit, the same code on every
executor), ``kind`` (the FMR run kind of the engine's one lifecycle), ``runner`` (``FmrRunner``: the
engine started with FMR settings). SA, PA and FMR are computed in ``domainbench.metrics.fmr``; the
settings are ``domainbench.records.config.FmrSettings``.
"""
