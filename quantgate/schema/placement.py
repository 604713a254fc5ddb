"""Records of where work runs: what a study's placement is asked (``PlacementRequest``: the device
pool, the servers mode, each variant's parallel settings and memory fraction) and what it gives
(``Placement``: per variant its devices and its wave); ``run.json``'s ``ServerLayout`` carries one
``VariantPlacement``, whose ``identity`` decides whether a rerun resumes. ``QuantizeDevices``: how
``quantize --devices`` spread a model over several GPUs, recorded in ``quantgate.json``."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from quantgate.schema.base import Record as _R  # extra="forbid", like every record


class ParallelSettings(_R):
    """A server's parallel layout, as the backend's own options name it (vLLM's ``tensor_parallel_size`` and
    ``data_parallel_size``): it needs ``tensor_parallel_size × data_parallel_size`` GPUs."""

    tensor_parallel_size: int = Field(1, ge=1)
    data_parallel_size: int = Field(1, ge=1)

    @property
    def devices_needed(self) -> int:
        return self.tensor_parallel_size * self.data_parallel_size

    def label(self) -> str:
        return f"TP={self.tensor_parallel_size} × DP={self.data_parallel_size}"


class Device(_R):
    """One device of the pool: a GPU index on a host (``local``: this machine; a Ray node's id otherwise)."""

    host: str = "local"
    index: int = Field(ge=0)


class VariantDemand(_R):
    name: str
    parallel: ParallelSettings = Field(default_factory=ParallelSettings)
    # the share of each of its GPUs the server takes: None = the whole GPU (vLLM without
    # gpu_memory_utilization takes most of it); 0.0 = nothing up front (a backend without a memory option)
    memory_fraction: float | None = Field(None, ge=0, le=1)


class PlacementRequest(_R):
    schema_version: int = 1
    pool: list[Device] = Field(default_factory=list)  # empty: no pool — servers get the devices they inherit
    servers: Literal["one_at_a_time", "all_at_once"] = "one_at_a_time"
    variants: list[VariantDemand]

    @model_validator(mode="after")
    def _unique(self):
        keys = [(d.host, d.index) for d in self.pool]
        if len(set(keys)) != len(keys):
            raise ValueError(f"the device pool lists a device twice: {[f'{h}:{i}' for h, i in keys]}")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"variant names must be unique: {names}")
        return self


PlacedBy = Literal["study", "ray", "inherited"]


class VariantPlacement(_R):
    """Where one variant's server runs. ``gpus``: its CUDA_VISIBLE_DEVICES in order, when the study placed it;
    ``wave``: servers of one wave are up together (all_at_once), a later wave starts when the one before is
    done; ``shares_gpu_with``: the servers of its wave on any of its GPUs. With Ray, the node and GPUs Ray
    gave the server are filled in once it started."""

    schema_version: int = 1
    variant: str
    parallel: ParallelSettings = Field(default_factory=ParallelSettings)
    placed_by: PlacedBy = "study"
    host: str | None = None  # the pool's host the study placed it on (local), or None
    gpus: list[int] | None = None
    wave: int = Field(0, ge=0)
    memory_fraction: float | None = None
    shares_gpu_with: list[str] = Field(default_factory=list)
    node: str | None = None  # Ray: the node the server ran on (known after the start)
    node_ip: str | None = None
    node_gpus: list[str] | None = None  # Ray: the GPU ids Ray assigned

    def identity(self) -> dict:
        """What a run's records depend on: the parallel settings, and the GPUs when the study chose them. A
        node or GPUs Ray chose are not part of it, so a study resumes on another node after one is lost."""
        return {"parallel": self.parallel.model_dump(), "gpus": self.gpus if self.placed_by == "study" else None}


class Placement(_R):
    schema_version: int = 1
    kind: Literal["quantgate.placement"] = "quantgate.placement"
    request: PlacementRequest
    waves: list[list[str]]  # variant names per wave, in the order they start
    variants: dict[str, VariantPlacement]


def same_placement(old, new) -> bool:
    """Whether a run served under layout ``old`` may resume under ``new`` (``ServerLayout`` or None). A run.json
    from before placements were recorded, or a server started without a study (``quantgate serve``), is taken
    as it is."""
    a, b = getattr(old, "placement", None), getattr(new, "placement", None)
    return a is None or b is None or a.identity() == b.identity()


class QuantizeDevices(_R):
    """``quantize --devices``: the GPUs a model too big for one was spread over (accelerate's device map, each
    module's weights resident on one device), the caps it was planned under (the peak per device is
    the manifest's ``peak_gpu_mb_per_device``)."""

    schema_version: int = 1
    devices: list[int]
    max_memory: dict[str, str]  # device ("0", "1", "cpu") -> cap as given
    device_map: dict[str, str]  # module -> device it was loaded on ("0", "1", "cpu")
    bytes_per_device: dict[str, int]  # planned weight bytes per device


class ClusterSpec(_R):
    """A study's ``cluster:`` block (or ``quantgate study --ray ADDRESS``): run each variant's quantize as a Ray
    task and its server as a Ray actor, on whichever node has what it needs (``quantgate.study.cluster``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    ray: str = Field(min_length=1)  # the head's GCS address host:port, ray://host:port (Ray Client), or auto
    # custom resources every quantize task and every server asks for (a CPU cluster's way of saying which nodes
    # run quantgate's work, and how many at once); GPUs are asked for as each variant needs them
    resources: dict[str, float] = Field(default_factory=dict)
    connect_timeout_s: float = Field(30.0, gt=0, le=600)  # bounded wait for the address to answer
    node_timeout_s: float = Field(60.0, gt=0, le=3600)  # bounded wait for each node's storage check
