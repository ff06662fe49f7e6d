"""The K8s ``ip`` and ``cidr`` CEL libraries, with Go netip semantics."""

from __future__ import annotations

import ipaddress
from typing import Any

from extender.cel import types as t
from extender.cel.errors import CelEvalError
from extender.cel.library.registry import Registry, parses
from extender.cel.values import CelObject, no_such_overload

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class IP(CelObject):
    __slots__ = ("addr",)
    cel_type_name = "net.IP"

    def __init__(self, addr: Address) -> None:
        self.addr = addr

    def __repr__(self) -> str:
        return f"ip({str(self.addr)!r})"

    def __hash__(self) -> int:
        return hash(self.addr)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and other.addr == self.addr

    def cel_equals(self, other: Any) -> bool:
        if not isinstance(other, IP):
            raise no_such_overload()
        return self.addr == other.addr


class CIDR(CelObject):
    __slots__ = ("addr", "prefix_length")
    cel_type_name = "net.CIDR"

    def __init__(self, addr: Address, prefix_length: int) -> None:
        self.addr = addr
        self.prefix_length = prefix_length

    @property
    def network(self) -> Network:
        return ipaddress.ip_network(f"{self.addr}/{self.prefix_length}", strict=False)

    def __repr__(self) -> str:
        return f"cidr({self.text()!r})"

    def text(self) -> str:
        return f"{self.addr}/{self.prefix_length}"

    def __hash__(self) -> int:
        return hash((self.addr, self.prefix_length))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDR) and (other.addr, other.prefix_length) == (
            self.addr,
            self.prefix_length,
        )

    def cel_equals(self, other: Any) -> bool:
        if not isinstance(other, CIDR):
            raise no_such_overload()
        return self == other


def parse_ip(text: str) -> Address:
    if "%" in text:
        raise ValueError(f"IP address with zone value is not allowed: {text}")
    addr = ipaddress.ip_address(text)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address is not allowed: {text}")
    return addr


def _ip(text: str) -> IP:
    try:
        return IP(parse_ip(text))
    except ValueError as exc:
        raise CelEvalError(f"IP Address {text!r} parse error during conversion from string: {exc}") from None


def _is_canonical(text: str) -> bool:
    return str(_ip(text).addr) == text


def _link_local_multicast(a: Address) -> bool:
    if a.version == 4:
        return a in ipaddress.ip_network("224.0.0.0/24")
    return (int(a) >> 112) & 0xFF0F == 0xFF02


def _link_local_unicast(a: Address) -> bool:
    if a.version == 4:
        return a in ipaddress.ip_network("169.254.0.0/16")
    return a in ipaddress.ip_network("fe80::/10")


def _global_unicast(a: Address) -> bool:
    if a.is_unspecified or a.is_loopback or a.is_multicast or _link_local_unicast(a):
        return False
    return not (a.version == 4 and a == ipaddress.IPv4Address("255.255.255.255"))


def parse_cidr(text: str) -> CIDR:
    if "/" not in text:
        raise ValueError(f"netip.ParsePrefix({text!r}): no '/'")
    addr_text, bits_text = text.split("/", 1)
    addr = parse_ip(addr_text)
    if not bits_text.isdigit() or (len(bits_text) > 1 and bits_text[0] == "0"):
        raise ValueError(f"netip.ParsePrefix({text!r}): bad bits after slash: {bits_text!r}")
    bits = int(bits_text)
    if bits > addr.max_prefixlen:
        raise ValueError(f"netip.ParsePrefix({text!r}): prefix length out of range")
    return CIDR(addr, bits)


def _cidr(text: str) -> CIDR:
    try:
        return parse_cidr(text)
    except ValueError as exc:
        raise CelEvalError(f"network address parse error during conversion from string: {exc}") from None


def _contains_ip(c: CIDR, other: IP | str) -> bool:
    addr = other.addr if isinstance(other, IP) else _ip(other).addr
    return addr.version == c.addr.version and addr in c.network


def _contains_cidr(c: CIDR, other: CIDR | str) -> bool:
    o = other if isinstance(other, CIDR) else _cidr(other)
    if o.addr.version != c.addr.version or o.prefix_length < c.prefix_length:
        return False
    return o.network.subnet_of(c.network)  # type: ignore[arg-type]


def register(reg: Registry) -> None:
    S, B, Int, IPT, CT = t.STRING, t.BOOL, t.INT, t.IP, t.CIDR
    reg.register_object(IP, IPT)
    reg.register_object(CIDR, CT)
    reg.add("ip", "string_to_ip", (S,), IPT, _ip)
    reg.add("isIP", "is_ip", (S,), B, parses(parse_ip))
    reg.add("ip.isCanonical", "ip_is_canonical", (S,), B, _is_canonical)
    reg.add("family", "ip_family", (IPT,), Int, lambda v: v.addr.version, member=True)
    reg.add("isUnspecified", "ip_is_unspecified", (IPT,), B, lambda v: v.addr.is_unspecified, member=True)
    reg.add("isLoopback", "ip_is_loopback", (IPT,), B, lambda v: v.addr.is_loopback, member=True)
    reg.add(
        "isLinkLocalMulticast",
        "ip_is_link_local_multicast",
        (IPT,),
        B,
        lambda v: _link_local_multicast(v.addr),
        member=True,
    )
    reg.add(
        "isLinkLocalUnicast",
        "ip_is_link_local_unicast",
        (IPT,),
        B,
        lambda v: _link_local_unicast(v.addr),
        member=True,
    )
    reg.add(
        "isGlobalUnicast", "ip_is_global_unicast", (IPT,), B, lambda v: _global_unicast(v.addr), member=True
    )
    reg.add("string", "ip_to_string", (IPT,), S, lambda v: str(v.addr))
    reg.add("cidr", "string_to_cidr", (S,), CT, _cidr)
    reg.add("isCIDR", "is_cidr", (S,), B, parses(parse_cidr))
    reg.add("containsIP", "cidr_contains_ip_string", (CT, S), B, _contains_ip, member=True)
    reg.add("containsIP", "cidr_contains_ip_ip", (CT, IPT), B, _contains_ip, member=True)
    reg.add("containsCIDR", "cidr_contains_cidr_string", (CT, S), B, _contains_cidr, member=True)
    reg.add("containsCIDR", "cidr_contains_cidr", (CT, CT), B, _contains_cidr, member=True)
    reg.add("ip", "cidr_ip", (CT,), IPT, lambda c: IP(c.addr), member=True)
    reg.add("prefixLength", "cidr_prefix_length", (CT,), Int, lambda c: c.prefix_length, member=True)
    reg.add(
        "masked",
        "cidr_masked",
        (CT,),
        CT,
        lambda c: CIDR(c.network.network_address, c.prefix_length),
        member=True,
    )
    reg.add("string", "cidr_to_string", (CT,), S, lambda c: c.text())
