"""resource.k8s.io DeviceTaintRules: taints an admin puts on devices chosen by driver, pool and name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from extender.model.dra import Device, Taint
from extender.model.reader import Reader


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    name: str
    driver: str | None
    pool: str | None
    device: str | None
    taint: Taint
    #: The object as read.
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def selects(self, device: Device) -> bool:
        """Upstream selects by driver, pool and device name only (the alpha class and CEL selectors
        were removed in 1.35); an absent or empty selector matches every device, as upstream does."""
        return (
            (self.driver is None or self.driver == device.id.driver)
            and (self.pool is None or self.pool == device.id.pool)
            and (self.device is None or self.device == device.id.device)
        )


def parse_device_taint_rule(obj: dict[str, Any]) -> DeviceTaintRule:
    meta = Reader(obj.get("metadata"), "metadata")
    spec = Reader(obj.get("spec"), "spec")
    sel = spec.sub("deviceSelector")
    taint = spec.sub("taint")
    return DeviceTaintRule(
        name=meta.string("name"),
        driver=sel.opt_string("driver"),
        pool=sel.opt_string("pool"),
        device=sel.opt_string("device"),
        taint=Taint(taint.string("key"), taint.string("value"), taint.string("effect")),
        raw=obj,
    )
