"""CEL language semantics as cel-go implements them (operators, equality, errors, macros)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cel.harness import COMPILE_ERROR, RUNTIME_ERROR, check

# (name, expression, expected, error substring)
Case = tuple[str, str, Any, str]
ARITHMETIC: list[Case] = [
    ("int-add", "1 + 2 == 3", True, ""),
    ("int-overflow", "9223372036854775807 + 1 > 0", RUNTIME_ERROR, "integer overflow"),
    ("int-min-literal", "-9223372036854775808 < 0", True, ""),
    ("int-neg-overflow", "-(-9223372036854775807 - 1) > 0", RUNTIME_ERROR, "integer overflow"),
    ("int-div-truncates", "-7 / 2 == -3", True, ""),
    ("int-mod-sign-of-dividend", "-7 % 2 == -1", True, ""),
    ("int-div-zero", "dyn(1) / 0 == 0", RUNTIME_ERROR, "division by zero"),
    ("int-mod-zero", "dyn(1) % 0 == 0", RUNTIME_ERROR, "modulus by zero"),
    ("uint-arith", "3u * 2u == 6u", True, ""),
    ("uint-underflow", "1u - 2u > 0u", RUNTIME_ERROR, "overflow"),
    ("double-div-zero-is-inf", "1.0 / 0.0 > 1e308", True, ""),
    ("mixed-arith-is-compile-error", "1 + 1.0 == 2.0", COMPILE_ERROR, "no matching overload for '_+_'"),
    ("string-concat", '"a" + "b" == "ab"', True, ""),
    ("list-concat", "[1] + [2] == [1, 2]", True, ""),
    ("precedence", "1 + 2 * 3 == 7 && (1 + 2) * 3 == 9", True, ""),
    ("hex-literal", "0x10 == 16", True, ""),
    ("unary-not-chain", "!!true", True, ""),
]

EQUALITY: list[Case] = [
    ("literal-int-string-compile-error", '1 == "1"', COMPILE_ERROR, "found no matching overload for '_==_'"),
    ("dyn-int-string-false", 'dyn(1) == "1"', False, ""),
    ("dyn-int-double-equal", "dyn(1) == 1.0", True, ""),
    ("dyn-uint-int-equal", "dyn(1u) == 1", True, ""),
    ("bool-is-not-int", "dyn(true) == 1", False, ""),
    ("nan-not-equal", "dyn(0.0/0.0) == 0.0/0.0", False, ""),
    ("list-deep", "[[1], [2, 3]] == [[1], [2, 3]]", True, ""),
    ("nested-list-literal-is-not-homogeneous", "[1, [2]] == [1, [2]]", COMPILE_ERROR, "expected type 'int'"),
    ("list-hetero", "[dyn(1), dyn('a')] == [dyn(1), dyn('a')]", True, ""),
    ("map-equal-order-free", "{'a': 1, 'b': 2} == {'b': 2, 'a': 1}", True, ""),
    ("null-equal", "null == null", True, ""),
    ("ne", "1 != 2", True, ""),
    ("type-values", "type(1) == int && type('a') == string && type([]) == list", True, ""),
    ("type-of-type", "type(int) == type", True, ""),
]

ORDERING: list[Case] = [
    ("cross-type-int-double", "1 < 1.5", True, ""),
    ("cross-type-uint-int", "2u > 1", True, ""),
    ("cross-type-exact", "9007199254740993 > 9007199254740992.0", True, ""),
    ("string-order", '"abc" < "abd"', True, ""),
    ("bool-order", "false < true", True, ""),
    ("bytes-order", 'b"a" < b"b"', True, ""),
    ("string-int-compile-error", '"a" < 1', COMPILE_ERROR, "found no matching overload for '_<_'"),
    ("dyn-string-int-runtime-error", 'dyn("a") < 1', RUNTIME_ERROR, "no such overload"),
]

LOGIC: list[Case] = [
    ("and-absorbs-error-right", "dyn(1) / 0 == 1 && false", False, ""),
    ("and-absorbs-error-left", "false && dyn(1) / 0 == 1", False, ""),
    ("or-absorbs-error", "dyn(1) / 0 == 1 || true", True, ""),
    ("or-error-when-undecided", "dyn(1) / 0 == 1 || false", RUNTIME_ERROR, "division by zero"),
    ("and-non-bool-runtime", "dyn(1) && true", RUNTIME_ERROR, "no such overload"),
    ("and-non-bool-compile", "1 && true", COMPILE_ERROR, "found no matching overload for '_&&_'"),
    ("ternary", "true ? 1 == 1 : dyn(1) / 0 == 0", True, ""),
    ("ternary-branch-types", 'true ? 1 : "a"', COMPILE_ERROR, "found no matching overload for '_?_:_'"),
    ("ternary-non-bool-cond", "dyn(1) ? true : false", RUNTIME_ERROR, "no such overload"),
    ("in-list", "2 in [1, 2, 3]", True, ""),
    ("in-map-keys", "'a' in {'a': 1}", True, ""),
    ("in-map-numeric-keys", "dyn(1u) in {1: 'x'}", True, ""),
]

LITERALS: list[Case] = [
    (
        "heterogeneous-list-literal",
        '[1, "a"] == [1, "a"]',
        COMPILE_ERROR,
        "expected type 'int' but found 'string'",
    ),
    ("heterogeneous-map-values", '{"a": 1, "b": "x"}.size() == 2', COMPILE_ERROR, "expected type 'int'"),
    ("dyn-allows-mixing", '[dyn(1), "a"].size() == 2', True, ""),
    ("map-duplicate-key", '{"a": 1, "a": 2}.size() == 1', RUNTIME_ERROR, "repeated key"),
    ("raw-string", r'r"\d" == "\\d"', True, ""),
    ("triple-quoted", '"""a"b""" == "a\\"b"', True, ""),
    ("escapes", r'"\x41\101\u0041" == "AAA"', True, ""),
    ("bytes-literal", 'b"\\xff".size() == 1', True, ""),
    ("index-list", "[1, 2, 3][1] == 2", True, ""),
    ("index-out-of-range", "[1, 2, 3][dyn(5)] == 2", RUNTIME_ERROR, "index out of range"),
    ("index-map-missing", "{'a': 1}['b'] == 1", RUNTIME_ERROR, "no such key: b"),
    ("syntax-error", "device.driver ==", COMPILE_ERROR, "Syntax error"),
    ("syntax-error-bad-char", "device.driver == #", COMPILE_ERROR, "Syntax error"),
    ("undeclared-variable", "foo == 1", COMPILE_ERROR, "undeclared reference to 'foo'"),
    ("undeclared-function", "foo(1)", COMPILE_ERROR, "undeclared reference to 'foo'"),
    ("message-construction", "Foo{a: 1} == 1", COMPILE_ERROR, "not supported"),
    ("int-literal-too-large", "9223372036854775808 > 0", COMPILE_ERROR, "invalid int literal"),
]

CONVERSIONS: list[Case] = [
    ("int-from-string", 'int("42") == 42', True, ""),
    ("int-from-bad-string", 'int("4x") == 4', RUNTIME_ERROR, "cannot convert"),
    ("int-from-double-truncates", "int(2.9) == 2", True, ""),
    ("int-from-huge-double", "int(1e19) == 0", RUNTIME_ERROR, "out of range"),
    ("uint-from-negative", "uint(-1) == 1u", RUNTIME_ERROR, "overflow"),
    ("double-from-string", 'double("1.5") == 1.5', True, ""),
    ("string-from-double-go-format", "string(1000000.0) == '1e+06' && string(2.5) == '2.5'", True, ""),
    ("string-from-int", "string(-3) == '-3'", True, ""),
    ("string-from-bool", "string(true) == 'true'", True, ""),
    ("bool-from-string", "bool('true') && !bool('0')", True, ""),
    ("bool-from-bad-string", "bool('yes')", RUNTIME_ERROR, "type conversion error"),
    ("bytes-roundtrip", "string(bytes('héllo')) == 'héllo'", True, ""),
    ("size-unicode", "size('héllo') == 5 && 'héllo'.size() == 5", True, ""),
    ("dyn-identity", "dyn(3) == 3", True, ""),
]

TIME: list[Case] = [
    ("duration-parse", 'duration("1h30m") == duration("90m")', True, ""),
    (
        "duration-literal-invalid",
        'duration("1x") == duration("1s")',
        COMPILE_ERROR,
        "duration validation failed",
    ),
    ("timestamp-compare", 'timestamp("2024-01-01T00:00:00Z") < timestamp("2024-01-02T00:00:00Z")', True, ""),
    (
        "timestamp-arith",
        'timestamp("2024-01-01T00:00:00Z") + duration("24h") == timestamp("2024-01-02T00:00:00Z")',
        True,
        "",
    ),
    (
        "timestamp-getters",
        'timestamp("2024-03-05T06:07:08Z").getFullYear() == 2024 && timestamp("2024-03-05T06:07:08Z").getMonth() == 2',
        True,
        "",
    ),
    ("timestamp-tz", 'timestamp("2024-03-05T01:00:00Z").getHours("-02:00") == 23', True, ""),
    (
        "timestamp-literal-invalid",
        'timestamp("yesterday") == timestamp("2024-01-01T00:00:00Z")',
        COMPILE_ERROR,
        "timestamp validation failed",
    ),
    ("duration-string", 'string(duration("1.5s")) == "1.5s"', True, ""),
]

MACROS: list[Case] = [
    ("all-true", "[1, 2, 3].all(x, x > 0)", True, ""),
    ("all-false-beats-error", "[0, 1].all(x, 1 / x > 5)", False, ""),
    ("all-error-when-undecided", "[0, 1].all(x, 1 / x < 5)", RUNTIME_ERROR, "division by zero"),
    ("exists", "[1, 2, 3].exists(x, x == 2)", True, ""),
    ("exists-true-beats-error", "[0, 1].exists(x, 1 / x == 1)", True, ""),
    ("exists-one", "[1, 2, 3].exists_one(x, x > 2)", True, ""),
    ("exists-one-two", "[1, 2, 3].exists_one(x, x > 1)", False, ""),
    ("map", "[1, 2].map(x, x * 10) == [10, 20]", True, ""),
    ("map-filter", "[1, 2, 3].map(x, x > 1, x * 10) == [20, 30]", True, ""),
    ("filter", "[1, 2, 3].filter(x, x % 2 == 1) == [1, 3]", True, ""),
    ("map-over-map-keys", "{'a': 1, 'b': 2}.map(k, k) == ['a', 'b']", True, ""),
    ("two-var-all-list", "['a', 'b'].all(i, v, i < 2 && v != '')", True, ""),
    ("two-var-exists-map", "{'a': 1}.exists(k, v, k == 'a' && v == 1)", True, ""),
    ("two-var-exists-one", "[5, 6].existsOne(i, v, v == 6 && i == 1)", True, ""),
    ("transform-map", "{'a': 1}.transformMap(k, v, v + 1) == {'a': 2}", True, ""),
    ("transform-map-entry", "{'a': 1}.transformMapEntry(k, v, {v: k}) == {1: 'a'}", True, ""),
    ("transform-list-filter", "[1, 2, 3].transformList(i, v, i > 0, v) == [2, 3]", True, ""),
    ("sort-by", "[3, 1, 2].sortBy(x, -x) == [3, 2, 1]", True, ""),
    ("bind", "cel.bind(x, 2, x * x == 4)", True, ""),
    ("bind-shadows", "cel.bind(x, 1, cel.bind(x, 2, x == 2) && x == 1)", True, ""),
    ("macro-var-must-be-ident", "[1].all(1, true)", COMPILE_ERROR, "argument is not an identifier"),
    ("range-of-string-compile", "'abc'.all(c, c != '')", COMPILE_ERROR, "cannot be range of a comprehension"),
    (
        "range-of-dyn-string-runtime",
        "dyn('abc').all(c, c != '')",
        RUNTIME_ERROR,
        "got 'types.String', expected iterable type",
    ),
    ("body-must-be-bool", "[1].all(x, x)", COMPILE_ERROR, "found no matching overload"),
    ("has-on-map", "has({'a': 1}.a) && !has({'a': 1}.b)", True, ""),
    ("has-needs-selection", "has([1][0])", COMPILE_ERROR, "invalid argument to has() macro"),
    ("has-propagates-errors", "has({'a': {'b': 1}}.x.b)", RUNTIME_ERROR, "no such key: x"),
]

OPTIONALS: list[Case] = [
    ("optional-select-present", "{'a': 1}.?a.orValue(0) == 1", True, ""),
    ("optional-select-absent", "{'a': 1}.?b.orValue(7) == 7", True, ""),
    ("optional-index", "{'a': 1}[?'b'].hasValue() == false", True, ""),
    ("optional-list-index", "[1][?3].orValue(9) == 9", True, ""),
    ("optional-of", "optional.of(1).value() == 1", True, ""),
    ("optional-none-value", "optional.none().value() == 1", RUNTIME_ERROR, "optional.none() dereference"),
    ("optional-or", "optional.none().or(optional.of(2)).value() == 2", True, ""),
    (
        "optional-nonzero",
        "!optional.ofNonZeroValue('').hasValue() && optional.ofNonZeroValue(1).hasValue()",
        True,
        "",
    ),
    (
        "optional-chain",
        "{'a': {'b': 1}}.?a.?b.orValue(0) == 1 && {'a': {'b': 1}}.?x.?b.orValue(0) == 0",
        True,
        "",
    ),
    ("opt-map", "optional.of(2).optMap(x, x * 2).value() == 4", True, ""),
    ("opt-flat-map", "optional.of(2).optFlatMap(x, optional.none()).hasValue() == false", True, ""),
    ("list-optional-elements", "[?optional.of(1), ?optional.none(), 3] == [1, 3]", True, ""),
    ("list-optional-from-select", "[?{'a': 1}.?a, ?{'a': 1}.?b] == [1]", True, ""),
    ("list-optional-all-absent", "size([?optional.none()]) == 0", True, ""),
    (
        "list-optional-needs-optional",
        "[?1] == [1]",
        COMPILE_ERROR,
        "expected type 'optional_type(int)' but found 'int'",
    ),
    (
        "list-optional-dyn-not-optional",
        "[?dyn(1)] == [1]",
        RUNTIME_ERROR,
        "cannot initialize optional list element from non-optional value",
    ),
    (
        "list-optional-element-type",
        "[?optional.of(1), 'a']",
        COMPILE_ERROR,
        "expected type 'int' but found 'string'",
    ),
    (
        "map-optional-entries",
        "{?'a': optional.of(1), ?'b': optional.none(), 'c': 3} == {'a': 1, 'c': 3}",
        True,
        "",
    ),
    (
        "map-optional-needs-optional",
        "{?'a': 1}.size() == 1",
        COMPILE_ERROR,
        "expected type 'optional_type(int)'",
    ),
    ("map-optional-from-index", "{?'x': {'y': 2}[?'y']}.x == 2", True, ""),
    ("list-trailing-comma", "[1, 2,] == [1, 2]", True, ""),
    ("map-trailing-comma", "{'a': 1,} == {'a': 1}", True, ""),
    ("list-lone-comma", "[,] == []", COMPILE_ERROR, "Syntax error"),
]

TABLES: dict[str, list[Case]] = {
    "arithmetic": ARITHMETIC,
    "equality": EQUALITY,
    "ordering": ORDERING,
    "logic": LOGIC,
    "literals": LITERALS,
    "conversions": CONVERSIONS,
    "time": TIME,
    "macros": MACROS,
    "optionals": OPTIONALS,
}
ALL_CASES = [
    (f"{table}/{name}", expr, want, contains)
    for table, rows in TABLES.items()
    for name, expr, want, contains in rows
]


@pytest.mark.parametrize(
    ("name", "expression", "expected", "contains"), ALL_CASES, ids=[c[0] for c in ALL_CASES]
)
def test_language(name: str, expression: str, expected: object, contains: str) -> None:
    check(expression, expected, contains)


def test_deep_nesting_is_a_compile_error_not_a_crash() -> None:
    check("(" * 300 + "true" + ")" * 300, COMPILE_ERROR, "recursion limit")


def test_long_and_chains_are_balanced() -> None:
    check(" && ".join(["true"] * 2000), True)
