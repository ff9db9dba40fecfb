"""Test-only helpers for the project's own infrastructure (not shipped with the package).

``commands`` reads and composes the README's commands, ``errors`` checks a refusal (one
``error:`` line, exit status 2), ``fake_slurm`` is a stand-in for
SLURM's commands, ``wandb_log`` reads an offline W&B run, ``planted`` builds a stream with a
planted link rule, ``fakedevice`` is a foreign tensor device that computes on the CPU and
counts host<->device crossings. Tests import them as ``testsupport.<module>``
(``tests/conftest.py`` puts ``tests/`` on the import path). The toy oracles that users may
reuse stay in ``cftgnn.testing``.
"""
