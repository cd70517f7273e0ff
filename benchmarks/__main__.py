"""``python -m benchmarks``: the benchmark (:func:`benchmarks.bench.main`)."""

from benchmarks.bench import main

raise SystemExit(main())
