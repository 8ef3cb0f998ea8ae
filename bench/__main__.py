"""Run every benchmark module (``bench/<name>.py`` with a ``run()``) in name order."""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import time


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    import bench

    wanted = set(argv)
    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))
    failed: list[str] = []
    for name in names:
        if wanted and name not in wanted:
            continue
        module = importlib.import_module(f"bench.{name}")
        if not hasattr(module, "run"):
            continue
        print(f"== bench.{name} ==", flush=True)
        started = time.monotonic()
        try:
            module.run()
        except SystemExit as exc:  # a benchmark that saw errors: report it, run the others, fail at the end
            if exc.code not in (None, 0):
                failed.append(f"{name}: {exc.code}")
        print(f"== bench.{name} done in {time.monotonic() - started:.1f} s ==\n", flush=True)
    for failure in failed:
        print(f"FAILED {failure}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
