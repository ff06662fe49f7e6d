"""The attribute a constraint compares for one device of one request (upstream ``lookupAttribute``).

DRADerivedAttributes (1.37, alpha): a request's ``derivedAttributes`` name CEL expressions
whose results stand in for the device attribute of that name in the claim's constraints: a
derived attribute shadows a driver attribute with the same name, and only the constraints see
it (selectors do not). Read in the 1.37-era experimental allocator
(structured/internal/experimental ``lookupAttribute``/``validateDeviceRequest``, pull request
kubernetes#140029; no file was stored at the v1.37.0 tag):

- the expression is evaluated only when a constraint covering the request checks a device,
  after the device passed every other check;
- a compile or evaluation error is fatal for the whole Allocate call (Filter: Error), with
  upstream's words;
- requests without a derived attribute of that name use the device's own attribute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.allocator.errors import AllocationError, AllocationTimeout
from extender.cel import CelCompileError, CelEnvironment, CelEvalError, CelInterruptedError, Mode
from extender.model.dra import Device


def derived_of(
    derived_attributes: tuple[tuple[str, str], ...], *, enabled: bool, where: str
) -> dict[str, str]:
    """A request's derived attributes by name (the last of a repeated name wins, as upstream's map).

    With the gate off 1.37 refuses such a request: the experimental allocator "to avoid silently
    ignoring constraints", the incubating one because the feature "is not supported in the
    incubating variant" (both read at 4426859, validateDeviceRequest); the stable one (gates
    that select it are off by default) is taken to do the same.
    """
    if derived_attributes and not enabled:
        raise AllocationError(
            f"{where}: cannot handle request with derived attributes, the feature is disabled"
        )
    return dict(derived_attributes)


class AttributeLookup:
    """Looks attributes up for one Allocate call, evaluating derived ones on demand."""

    def __init__(self, cel: CelEnvironment, deadline: float | None) -> None:
        self.cel = cel
        self.deadline = deadline

    def __call__(self, derived: Mapping[str, str], device: Device, name: str) -> tuple[str, Any] | None:
        expression = derived.get(name) if derived else None
        if expression is None:
            return device.attribute(name)
        program = self.cel.compile(expression, Mode.DERIVED)
        if isinstance(program, CelCompileError):
            raise AllocationError(f"compile derived attribute {name} failed: {program}")
        try:
            return self.cel.derive(program, device.cel(), self.deadline)
        except CelInterruptedError:
            raise AllocationTimeout("timed out trying to allocate devices (during CEL evaluation)") from None
        except CelEvalError as exc:
            raise AllocationError(
                f"evaluate derived attribute {name} on device {device.id} failed: {exc}"
            ) from None
