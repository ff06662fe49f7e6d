"""One request of a claim as the allocator works on it (upstream ``requestData``): shared by the
search and the results it builds, so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field

from extender.allocator.inventory import Pool
from extender.model.dra import Device, DeviceClass, ExactRequest, ResourceSlice


@dataclass(slots=True, eq=False)
class RequestData:
    """One request, or one alternative of a ``firstAvailable`` request (upstream ``requestData``)."""

    claim_index: int
    request: ExactRequest
    #: Name in results: ``req`` or ``req/sub``.
    name: str
    #: The top-level request name and the subrequest name ('' for plain requests).
    base: str
    sub: str
    device_class: DeviceClass
    num_devices: int
    #: For allocationMode All: the fixed device set, with each device's slice and pool.
    all_devices: list[tuple[Device, ResourceSlice, Pool]] | None = None
    #: DRADerivedAttributes: this request's (or subrequest's) derived attributes, name -> CEL.
    derived: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Candidate:
    """A device the node could use, with its slice and pool."""

    device: Device
    slice: ResourceSlice
    pool: Pool
