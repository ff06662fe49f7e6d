"""The LALR parser is built once per process and shared by every environment (it cost each
environment half a second): parses on several threads at once give what one thread gives."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from extender.cel import CelEnvironment
from extender.cel.parser import Parser, build_lark

EXPRESSIONS = [
    'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100"',
    "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "[1, 2, 3].all(x, x > 0) ? {'a': [?optional.none()]} : {}",
    'has(device.attributes["x"].y) || device.attributes["x"].z in ["a", "b", "c"]',
    "1 +",  # an error, with cel-go's message
]


def parsed(parser: Parser, source: str) -> str:
    try:
        return repr(parser.parse(source))
    except Exception as exc:  # the error's text is part of the answer
        return f"{type(exc).__name__}: {exc}"


def test_environments_share_one_parser() -> None:
    CelEnvironment()
    CelEnvironment()
    assert build_lark.cache_info().currsize == 1
    assert build_lark() is build_lark()


def test_concurrent_parses_agree_with_serial_ones() -> None:
    parser = Parser(())
    expected = [parsed(parser, e) for e in EXPRESSIONS]
    sources = EXPRESSIONS * 200
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda s: parsed(Parser(()), s), sources))
    assert found == expected * 200
