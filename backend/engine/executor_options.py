"""Where a run executes: in this process (``local``) or on a Ray cluster (``ray``); its options.

The executor is how a run is computed, not what it computes, so it is not part of the stored
``RunConfig``: a run started on one executor resumes on the other, and both store the same
units (the store's idempotent upsert by unit key is the only coordination between them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ExecutorKind = Literal["local", "ray"]
ENV_EXECUTOR = "DOMAINBENCH_EXECUTOR"
ENV_RAY_ADDRESS = "DOMAINBENCH_RAY_ADDRESS"


class ExecutorOptions(BaseModel):
    """The executor and its resources; every field is a ``domainbench run`` option."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ExecutorKind = "local"
    #: Ray only. None: a Ray instance this process already joined, else a new local one;
    #: "auto": the cluster this machine belongs to; "ray://HOST:10001": a remote cluster (Ray client)
    address: str | None = None
    #: model actors per model group (each shard goes to one actor of every group); None: the
    #: cluster's GPUs shared out over the groups, 1 without GPUs
    actors: int | None = Field(default=None, ge=1)
    #: models one actor holds (a group); None: all of the run's models on every actor. Lower it
    #: when the run's models do not fit on one GPU together: each shard is corrupted once and
    #: scored by one actor of each group
    models_per_actor: int | None = Field(default=None, ge=1)
    #: GPUs reserved per actor; None: 1 when the cluster has GPUs and the run's device is not cpu, else 0
    gpus_per_actor: float | None = Field(default=None, ge=0)
    cpus_per_actor: float = Field(default=1.0, ge=0)
    #: CPUs reserved per corruption task (one task corrupts one shard for one cell)
    cpus_per_task: float = Field(default=1.0, gt=0)
    #: shards queued per actor: enough to keep it busy while the next shard is corrupted
    shards_in_flight: int = Field(default=2, ge=1)
    #: Python modules every Ray worker imports first: plugins that register corruptions or models
    modules: list[str] = Field(default_factory=list)
    #: seconds to wait for a Ray cluster to answer before the address is reported unreachable
    connect_timeout_s: float = Field(default=30.0, gt=0)

    @field_validator("address")
    @classmethod
    def _address_shape(cls, v: str | None) -> str | None:
        if v is None or v == "auto" or v.startswith("ray://") or (":" in v and not v.startswith(("http", "/"))):
            return v
        raise ValueError(f"Ray address {v!r} is not understood: use auto, ray://HOST:10001 or HOST:6379")


def options_from_env(environ: Mapping[str, str]) -> ExecutorOptions:
    """The executor a long-running worker uses: $DOMAINBENCH_EXECUTOR and $DOMAINBENCH_RAY_ADDRESS.

    Read by the entry point (the CLI reads the same variables through its options).
    """
    from pydantic import ValidationError

    from domainbench.errors import UserInputError, first_validation_error

    kind = environ.get(ENV_EXECUTOR) or "local"
    if kind not in ("local", "ray"):
        raise UserInputError(f"{ENV_EXECUTOR}={kind!r} is not known; set it to local or ray")
    address = environ.get(ENV_RAY_ADDRESS) or None
    if address is not None and kind != "ray":
        address = None  # the compose file may name the head for workers that run locally
    try:
        return ExecutorOptions(kind=kind, address=address)  # type: ignore[arg-type]
    except ValidationError as e:
        raise UserInputError(f"{ENV_RAY_ADDRESS}={address}: {first_validation_error(e)[1]}") from None
