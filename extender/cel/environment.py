"""The DRA CEL environment: compile selectors once, evaluate them against devices, memoized.

Two environments exist upstream. ``STORED`` is the scheduler's: every library and every device
field, no static cost rejection, a runtime cost limit. ``NEW`` is API-server validation of new
or changed expressions: feature-gated fields, the 10 KiB length limit and the static cost limit.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from extender.cel import ast
from extender.cel import types as t
from extender.cel.checker import Checker
from extender.cel.compiler import Compiler, Eval, Frame
from extender.cel.cost import estimate
from extender.cel.derived import output_type_error, to_attribute
from extender.cel.device import CelDevice, RawAttribute
from extender.cel.errors import CelCompileError, CelCostLimitError, CelEvalError, CelInterruptedError
from extender.cel.library import build_registry
from extender.cel.parser import Parser
from extender.cel.reads import Path, derive_reads, key_function
from extender.cel.values import type_name

#: ``CELSelectorExpressionMaxCost`` / ``CELSelectorExpressionMaxLength`` in resource.k8s.io/v1.
MAX_COST = 1_000_000
MAX_EXPRESSION_LENGTH = 10 * 1024

NO_SUCH_KEY_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
    "for optional fields"
)


class Mode(enum.Enum):
    STORED = "stored"
    NEW = "new"
    #: A derived attribute's expression (DRADerivedAttributes): the scheduler's environment,
    #: with a scalar or list result instead of a bool.
    DERIVED = "derived"


@dataclass(frozen=True, slots=True)
class CelOptions:
    #: DRAListTypeAttributes: list-valued attributes and ``includes()``.
    list_type_attributes: bool = False
    #: DRAConsumableCapacity: only changes the NEW environment (``allowMultipleAllocations``).
    consumable_capacity: bool = True
    #: Runtime cost limit per evaluation.
    cost_limit: int = MAX_COST
    #: Compiled programs kept, by expression text.
    program_cache_size: int = 4096
    #: Results kept per program, by the values of the device fields it reads.
    result_cache_size: int = 65536


class Program:
    """A compiled, checked expression plus its result memo."""

    __slots__ = ("_eval", "expression", "key", "memo", "reads", "root")

    def __init__(
        self, expression: str, root: ast.Node, evaluate: Eval, reads: frozenset[Path], memo_size: int
    ) -> None:
        self.expression = expression
        self.root = root
        self._eval = evaluate
        #: The device paths the result depends on.
        self.reads = reads
        self.key = key_function(reads)
        #: Converted results (a bool, or a derived attribute) and errors, by the values read.
        self.memo: LRUCache[Any, Any] = LRUCache(maxsize=memo_size)

    def __repr__(self) -> str:
        return f"Program({self.expression!r})"


CompileResult = Program | CelCompileError


@dataclass(slots=True)
class CelCounts:
    """Failures met by one environment (metrics read them). A memoized result is counted once:
    when it was computed, not each time it is reused."""

    #: Expressions that did not compile (a DeviceClass's or a claim's selector, ...).
    compile_errors: int = 0
    #: Evaluations that ended in a runtime error (cost-limit hits included).
    evaluation_errors: int = 0
    #: Evaluations stopped by the runtime cost limit.
    cost_limit_hits: int = 0


class CelEnvironment:
    """Owns parsing, checking, compiling, caching and evaluating of DRA selector expressions."""

    def __init__(
        self, options: CelOptions | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.options = options or CelOptions()
        self._clock = clock
        self._stored = build_registry(list_type_attributes=self.options.list_type_attributes)
        self._new = build_registry(
            list_type_attributes=self.options.list_type_attributes,
            allow_multiple_allocations_field=self.options.consumable_capacity,
        )
        self._parser = Parser(self._stored.qualified_names())
        self._programs: LRUCache[tuple[str, Mode], CompileResult] = LRUCache(
            maxsize=self.options.program_cache_size
        )
        self._variables = {"device": t.DRA_DEVICE}
        self.counts = CelCounts()

    # --- compiling ----------------------------------------------------------------------------

    def compile(self, expression: str, mode: Mode = Mode.STORED, *, use_cache: bool = True) -> CompileResult:
        """A program, or the compile error as a value. Cached by expression text."""
        key = (expression, mode)
        cached = self._programs.get(key) if use_cache else None
        if cached is None:
            try:
                cached = self._compile(expression, mode)
            except CelCompileError as exc:
                cached = exc
            except RecursionError:
                cached = CelCompileError("compilation failed: expression recursion limit exceeded")
            if isinstance(cached, CelCompileError):
                self.counts.compile_errors += 1
            self._programs[key] = cached
        return cached

    def _compile(self, expression: str, mode: Mode) -> Program:
        if mode is Mode.NEW and len(expression.encode("utf-8")) > MAX_EXPRESSION_LENGTH:
            raise CelCompileError(f"Too long: may not be more than {MAX_EXPRESSION_LENGTH} bytes")
        registry = self._new if mode is Mode.NEW else self._stored
        try:
            root = self._parser.parse(expression)
            result_type = Checker(registry, expression, self._variables).check(root)
        except CelCompileError as exc:
            raise CelCompileError(f"compilation failed: {exc}") from None
        if mode is Mode.DERIVED:
            problem = output_type_error(result_type)
            if problem is not None:
                raise CelCompileError(problem)
        elif not (result_type == t.BOOL or t.is_dyn(result_type)):
            raise CelCompileError(f"must evaluate to bool or the unknown type, not {result_type}")
        if mode is Mode.NEW:
            cost = estimate(root)
            if cost > MAX_COST:
                raise CelCompileError(
                    f"Forbidden: too complex, exceeds cost limit (estimated cost {cost} > {MAX_COST})"
                )
        evaluate = Compiler(registry).compile(root)
        return Program(expression, root, evaluate, derive_reads(root), self.options.result_cache_size)

    # --- evaluating ---------------------------------------------------------------------------

    def matches(self, program: Program, device: CelDevice, deadline: float | None = None) -> bool:
        """Evaluate ``program`` for ``device``; raises :class:`CelEvalError` on a runtime error.

        Results (including errors) are memoized on the device and, by the values of the fields
        the expression reads, on the program. A passed ``deadline`` (on this environment's clock)
        interrupts long evaluations; interruptions are not memoized.
        """
        result = self._memoized(program, device, deadline, _to_bool)
        if result is True or result is False:
            return result
        raise result

    def derive(self, program: Program, device: CelDevice, deadline: float | None = None) -> RawAttribute:
        """A derived attribute's value for ``device`` (``program`` compiled with
        :attr:`Mode.DERIVED`); raises :class:`CelEvalError` on a runtime or conversion error.
        Memoized like :meth:`matches`."""
        result = self._memoized(program, device, deadline, to_attribute)
        if isinstance(result, CelEvalError):
            raise result
        return result  # type: ignore[no-any-return]

    def _memoized(
        self, program: Program, device: CelDevice, deadline: float | None, convert: Callable[[Any], Any]
    ) -> Any:
        result = device.memo.get(program)
        if result is None:
            result = self._lookup(program, device, deadline, convert)
            device.memo[program] = result
        return result

    def _lookup(
        self, program: Program, device: CelDevice, deadline: float | None, convert: Callable[[Any], Any]
    ) -> Any:
        list_attributes = self.options.list_type_attributes
        conversion_error = device.conversion_error(list_attributes)
        if conversion_error is not None:
            return conversion_error
        key = program.key(device)
        result = program.memo.get(key)
        if result is None:
            result = self._run(program, device.value(list_attributes), deadline, convert)
            program.memo[key] = result
        return result

    def _run(
        self,
        program: Program,
        device_value: Any,
        deadline: float | None,
        convert: Callable[[Any], Any] | None = None,
    ) -> Any:
        frame = Frame({"device": device_value}, self.options.cost_limit, deadline, self._clock)
        try:
            value = program._eval(frame)
        except CelInterruptedError:
            raise
        except CelEvalError as exc:
            self.counts.evaluation_errors += 1
            if isinstance(exc, CelCostLimitError):
                self.counts.cost_limit_hits += 1
            message = str(exc)
            # Selectors' runtime errors get upstream's hint (cel.EnhanceRuntimeError); derived
            # attributes' do not (v1.37 lookupAttribute wraps the raw error).
            if message.startswith("no such key") and convert is not to_attribute:
                return CelEvalError(message + NO_SUCH_KEY_HINT)
            return exc
        except RecursionError:
            self.counts.evaluation_errors += 1
            return CelEvalError("evaluation recursion limit exceeded")
        result = (convert or _to_bool)(value)
        if isinstance(result, CelEvalError):  # not a bool, or a derived value of no attribute type
            self.counts.evaluation_errors += 1
        return result

    def evaluate_unmemoized(self, program: Program, device: CelDevice, deadline: float | None = None) -> bool:
        """One evaluation without any memo (benchmarks and tests of the evaluator itself)."""
        list_attributes = self.options.list_type_attributes
        error = device.conversion_error(list_attributes)
        if error is not None:
            raise error
        result = self._run(program, device.value(list_attributes), deadline)
        if isinstance(result, CelEvalError):
            raise result
        return result  # type: ignore[no-any-return]


def _to_bool(value: Any) -> bool | CelEvalError:
    if value is True or value is False:
        return value
    return CelEvalError(f"CEL result of type {type_name(value)} could not be converted to bool")
