"""The Kubernetes CEL libraries DRA selectors may use, with their error cases."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cel import CelOptions
from tests.cel.builders import device
from tests.cel.harness import COMPILE_ERROR, RUNTIME_ERROR, check

#: (name, expression, expected, error substring)
Case = tuple[str, str, Any, str]

QUANTITY: list[Case] = [
    ("equal-across-units", 'quantity("1Gi") == quantity("1024Mi")', True, ""),
    ("decimal-vs-binary", 'quantity("1G") == quantity("1Gi")', False, ""),
    ("compare-to", 'quantity("2k").compareTo(quantity("1999")) == 1', True, ""),
    (
        "greater-less",
        'quantity("1.5").isGreaterThan(quantity("1")) && quantity("1m").isLessThan(quantity("1"))',
        True,
        "",
    ),
    ("add-int", 'quantity("1k").add(1) == quantity("1001")', True, ""),
    ("sub", 'quantity("1Gi").sub(quantity("1Mi")) == quantity("1023Mi")', True, ""),
    ("milli-is-not-integer", 'quantity("1000m").isInteger()', False, ""),
    ("fraction-binary-is-not-integer", 'quantity("1.5Gi").isInteger()', False, ""),
    (
        "as-integer-milli",
        'quantity("1000m").asInteger() == 1',
        RUNTIME_ERROR,
        "cannot convert value to integer",
    ),
    ("approximate-float", 'quantity("1.5").asApproximateFloat() == 1.5', True, ""),
    ("exponent-suffix", 'quantity("1e3") == quantity("1k")', True, ""),
    ("bare-suffix-is-zero", 'quantity("Mi") == quantity("0")', True, ""),
    ("trailing-dot", 'quantity("1.G") == quantity("1G")', True, ""),
    ("rounds-up-to-nano", 'quantity("0.0000000001") == quantity("1n")', True, ""),
    ("negative", 'sign(quantity("-5m")) == -1', True, ""),
    ("is-quantity", 'isQuantity("10Gi") && !isQuantity("10 Gi") && !isQuantity("")', True, ""),
    (
        "bad-format",
        'quantity("1.2.3") == quantity("1")',
        RUNTIME_ERROR,
        "quantities must match the regular expression",
    ),
    (
        "sign-is-global-only",
        'quantity("1").sign() == 1',
        COMPILE_ERROR,
        "found no matching overload for 'sign'",
    ),
    (
        "relational-ops-compile-error",
        'quantity("1") < quantity("2")',
        COMPILE_ERROR,
        "applied to '(kubernetes.Quantity, kubernetes.Quantity)'",
    ),
    ("equality-with-foreign-type", 'dyn(quantity("1")) == 1', RUNTIME_ERROR, "no such overload"),
    ("foreign-type-with-quantity", '1 == dyn(quantity("1"))', False, ""),
]

SEMVER: list[Case] = [
    ("compare", 'semver("1.2.3").isLessThan(semver("1.10.0"))', True, ""),
    ("prerelease-lower", 'semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', True, ""),
    ("prerelease-numeric-vs-alpha", 'semver("1.0.0-1").isLessThan(semver("1.0.0-alpha"))', True, ""),
    ("build-ignored", 'semver("1.0.0+a") == semver("1.0.0+b")', True, ""),
    (
        "parts",
        'semver("3.4.5").major() == 3 && semver("3.4.5").minor() == 4 && semver("3.4.5").patch() == 5',
        True,
        "",
    ),
    ("normalize", 'semver("v1.2", true) == semver("1.2.0")', True, ""),
    ("normalize-leading-zeros", 'semver("01.02.03", true) == semver("1.2.3")', True, ""),
    ("strict-leading-zero", 'semver("01.2.3") == semver("1.2.3")', RUNTIME_ERROR, "leading zeroes"),
    ("compare-to", 'semver("2.0.0").compareTo(semver("1.9.9")) == 1', True, ""),
    (
        "relational-compile-error",
        'semver("1.0.0") < semver("2.0.0")',
        COMPILE_ERROR,
        "found no matching overload for '_<_'",
    ),
]

STRINGS: list[Case] = [
    ("char-at-end", '"abc".charAt(3) == ""', True, ""),
    ("char-at-out-of-range", '"abc".charAt(4) == ""', RUNTIME_ERROR, "index out of range"),
    ("index-of-offset", '"abcabc".indexOf("a", 1) == 3', True, ""),
    ("last-index-of-offset", '"abcabc".lastIndexOf("a", 2) == 0', True, ""),
    ("split-limit", '"a,b,c".split(",", 2) == ["a", "b,c"]', True, ""),
    ("split-zero", '"a,b".split(",", 0) == []', True, ""),
    ("substring-bad-range", '"abc".substring(2, 1) == ""', RUNTIME_ERROR, "invalid substring range"),
    ("replace-all", '"aaa".replace("a", "b") == "bbb"', True, ""),
    ("upper-ascii-only", '"é-a".upperAscii() == "é-A"', True, ""),
    ("join-default-sep", '["a", "b"].join() == "ab"', True, ""),
    (
        "format",
        '"%s has %d GPUs (%.1f%%)".format([dyn("n1"), dyn(8), dyn(12.5)]) == "n1 has 8 GPUs (12.5%)"',
        True,
        "",
    ),
    (
        "format-args-must-be-homogeneous",
        '"%s %d".format(["a", 1]) == "a 1"',
        COMPILE_ERROR,
        "expected type 'string'",
    ),
    ("format-hex", '"%x %X %o %b".format([255, 255, 8, 5]) == "ff FF 10 101"', True, ""),
    ("format-bad-clause", '"%d".format(["x"]) == ""', RUNTIME_ERROR, "decimal clause"),
    (
        "reverse-is-not-v2",
        '"abc".reverse() == "cba"',
        COMPILE_ERROR,
        "found no matching overload for 'reverse'",
    ),
    (
        "contains-starts-ends",
        '"gpu-a100".contains("a1") && "gpu".startsWith("g") && "gpu".endsWith("u")',
        True,
        "",
    ),
    ("matches-partial", '"nvidia-a100".matches("a1[0-9]+")', True, ""),
    ("matches-invalid-literal", '"x".matches("(")', COMPILE_ERROR, "invalid matches argument"),
    ("matches-invalid-dynamic", '"x".matches(dyn("("))', RUNTIME_ERROR, "error parsing regexp"),
    ("find", '"abc123".find("[0-9]+") == "123" && "abc".find("[0-9]+") == ""', True, ""),
    ("quote-escapes", 'strings.quote("a\\nb") == "\\"a\\\\nb\\""', True, ""),
]

LISTS: list[Case] = [
    ("is-sorted", "[1, 2, 2].isSorted() && ![2, 1].isSorted()", True, ""),
    ("sum", "[1, 2, 3].sum() == 6 && [1.5, 2.5].sum() == 4.0", True, ""),
    ("min-max", "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3", True, ""),
    ("min-empty", "dyn([]).min() == 0", RUNTIME_ERROR, "min called on empty list"),
    ("index-of", "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2", True, ""),
    (
        "flatten",
        "[[1], [2, 3]].flatten() == [1, 2, 3] && [dyn([1]), [dyn([2])]].flatten(2) == [1, 2]",
        True,
        "",
    ),
    ("slice-bad", "[1, 2].slice(1, 5) == []", RUNTIME_ERROR, "cannot slice"),
    ("sort-strings", '["b", "a"].sort() == ["a", "b"]', True, ""),
    (
        "sets",
        "sets.contains([1, 2, 3], [1, 3]) && sets.equivalent([1, 1, 2], [2, 1]) && sets.intersects([1], [1, 5])",
        True,
        "",
    ),
    ("sets-negative", "!sets.contains([1], [2]) && !sets.intersects([1], [2])", True, ""),
]

NETWORK: list[Case] = [
    ("ip-family", 'ip("10.0.0.1").family() == 4 && ip("fe80::1").family() == 6', True, ""),
    ("ip-leading-zero-rejected", 'isIP("010.0.0.1")', False, ""),
    ("ip-mapped-rejected", 'isIP("::ffff:1.2.3.4")', False, ""),
    ("ip-zone-rejected", 'isIP("fe80::1%eth0")', False, ""),
    ("ip-canonical", 'ip.isCanonical("2001:db8::1") && !ip.isCanonical("2001:DB8::1")', True, ""),
    (
        "ip-kinds",
        'ip("127.0.0.1").isLoopback() && ip("169.254.1.1").isLinkLocalUnicast() && ip("224.0.0.1").isLinkLocalMulticast() && ip("0.0.0.0").isUnspecified()',
        True,
        "",
    ),
    (
        "ip-global-unicast",
        'ip("10.1.2.3").isGlobalUnicast() && !ip("255.255.255.255").isGlobalUnicast()',
        True,
        "",
    ),
    ("ip-string", 'string(ip("2001:db8:0:0::1")) == "2001:db8::1"', True, ""),
    ("ip-invalid", 'ip("300.1.1.1").family() == 4', RUNTIME_ERROR, "parse error"),
    (
        "cidr-contains",
        'cidr("10.0.0.0/8").containsIP("10.1.2.3") && cidr("10.0.0.0/8").containsIP(ip("10.0.0.1"))',
        True,
        "",
    ),
    (
        "cidr-contains-cidr",
        'cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16") && !cidr("10.1.0.0/16").containsCIDR("10.0.0.0/8")',
        True,
        "",
    ),
    (
        "cidr-masked",
        'cidr("192.168.0.1/24").masked() == cidr("192.168.0.0/24") && cidr("192.168.0.1/24").ip() == ip("192.168.0.1")',
        True,
        "",
    ),
    (
        "cidr-prefix",
        'cidr("10.0.0.0/8").prefixLength() == 8 && isCIDR("::/0") && !isCIDR("10.0.0.0/33")',
        True,
        "",
    ),
]

URLS: list[Case] = [
    ("parts", 'url("https://user@example.com:8443/a%20b?x=1&x=2").getScheme() == "https"', True, ""),
    ("host", 'url("https://example.com:8443/p").getHost() == "example.com:8443"', True, ""),
    (
        "ipv6-host",
        'url("https://[::1]:80/").getHostname() == "::1" && url("https://[::1]:80/").getPort() == "80"',
        True,
        "",
    ),
    ("query", 'url("https://e.com/?x=1&x=2&y=").getQuery() == {"x": ["1", "2"], "y": [""]}', True, ""),
    ("path", 'url("https://e.com/a%20b").getEscapedPath() == "/a%20b"', True, ""),
    (
        "relative-rejected",
        '!isURL("example.com/x") && isURL("/abs/path") && isURL("https://e.com")',
        True,
        "",
    ),
    ("invalid", 'url("not a url").getScheme() == ""', RUNTIME_ERROR, "URL parse error"),
]

FORMATS: list[Case] = [
    ("named", 'format.named("dns1123Label").hasValue() && !format.named("nope").hasValue()', True, ""),
    ("valid-label", 'format.dns1123Label().validate("my-name").hasValue() == false', True, ""),
    ("invalid-label", 'format.dns1123Label().validate("My_Name").value().size() > 0', True, ""),
    (
        "label-too-long",
        f'format.dns1123Label().validate("{"a" * 64}").value() == ["must be no more than 63 characters"]',
        True,
        "",
    ),
    ("qualified-name", 'format.qualifiedName().validate("example.com/my-key").hasValue() == false', True, ""),
    ("uuid", 'format.uuid().validate("4cf8db2d-06c0-7d70-1a51-e59b25b2c16c").hasValue() == false', True, ""),
    ("date", 'format.date().validate("2024-02-30").hasValue()', True, ""),
]

TABLES: dict[str, list[Case]] = {
    "quantity": QUANTITY,
    "semver": SEMVER,
    "strings": STRINGS,
    "lists": LISTS,
    "network": NETWORK,
    "urls": URLS,
    "formats": FORMATS,
}
ALL_CASES = [(f"{table}/{name}", e, w, c) for table, rows in TABLES.items() for name, e, w, c in rows]


@pytest.mark.parametrize(
    ("name", "expression", "expected", "contains"), ALL_CASES, ids=[c[0] for c in ALL_CASES]
)
def test_library(name: str, expression: str, expected: object, contains: str) -> None:
    check(expression, expected, contains)


LIST_ATTRIBUTES = CelOptions(list_type_attributes=True)


def test_includes_on_list_attribute() -> None:
    dev = device("d.example.com", models=("strings", ("a100", "h100")))
    check(
        'device.attributes["d.example.com"].models.includes("h100")', True, dev=dev, options=LIST_ATTRIBUTES
    )
    check('device.attributes["d.example.com"].models.includes("t4")', False, dev=dev, options=LIST_ATTRIBUTES)


def test_includes_needs_the_list_feature() -> None:
    check('device.attributes["d"].x.includes(1)', COMPILE_ERROR, "undeclared reference to 'includes'")


def test_list_attribute_without_the_feature_fails_every_expression() -> None:
    dev = device("d.example.com", models=("strings", ("a100",)))
    check("true", RUNTIME_ERROR, "attribute models: unsupported attribute value", dev=dev)
