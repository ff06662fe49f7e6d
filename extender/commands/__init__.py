"""The subcommands of ``dra-extender``, one module each: its flags beside what it runs.

Each module has ``add(subparsers)`` and ``run(args, out)``. They import what they need when they
run, so ``--help`` and ``--version`` answer without the allocator, the Kubernetes client or the
server stack (``tests/test_startup.py`` runs -X importtime on them).
"""
