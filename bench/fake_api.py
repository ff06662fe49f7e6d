"""The project's fake API server in a process of its own, for benchmarks.

In the benchmark's own process it would share one interpreter lock with the load generator, and
the load generator's threads would slow the API server down. The run measures the extender, not
that contention.

``python -m bench.fake_api OBJECTS.json``:
- prints ``URL <url>`` once it serves;
- on stdin, answers ``check`` with one JSON line: the consistency problems of its store, and
  its write time p50 in ms since the last ``reset``;
- ``reset`` starts a new write-time window;
- end of input stops it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.fakeapi.server import FakeApiServer
from tests.integration.invariants import violations


def main() -> None:
    objects = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    with FakeApiServer() as fake:
        for obj in objects:
            fake.create(obj)
        print(f"URL {fake.url}", flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "reset":
                fake.write_times.clear()
                print("{}", flush=True)
            elif command == "check":
                times = sorted(t for _m, t in fake.write_times)
                p50 = times[len(times) // 2] * 1e3 if times else 0.0
                print(json.dumps({"problems": violations(fake), "write_p50_ms": p50}), flush=True)


if __name__ == "__main__":
    main()
