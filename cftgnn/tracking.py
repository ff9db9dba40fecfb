"""Experiment tracking: one optional layer between the explain runs and Weights & Biases.

The entry points talk to a ``Tracker`` only. ``NullTracker`` (``logger=none``) does
nothing and never imports wandb, so the package works without it; ``WandbTracker``
(``logger=wandb``) imports wandb lazily in ``WandbTracker.start`` and logs offline unless told
otherwise. An online run that cannot log in or reach the server (no API key, no network, a
server that does not answer within ``CONNECT_TIMEOUT_S`` / ``INIT_TIMEOUT_S``) falls
back to offline with one ``warning:`` line on stderr, so the run goes on and can be uploaded
later with ``wandb sync`` (``online_problem``). Use ``tracking`` (or
``Tracker.session``) so a run is always finished, and marked failed when the body raises::

    tracker = instantiate(cfg.logger)
    with tracking(tracker, OmegaConf.to_container(cfg, resolve=True), name="uci-greedy"):
        tracker.log_progress(step, {"progress/success_rate": 0.4})
        tracker.log_records(records)
        tracker.log_summary({"summary/fidelity_plus": 0.4})
"""

from __future__ import annotations

import contextlib
import json
import netrc
import os
import socket
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pandas as pd

from cftgnn.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only; wandb stays optional at runtime
    from wandb.sdk.wandb_run import Run

__all__ = [
    "WANDB_MODES",
    "NullTracker",
    "Tracker",
    "WandbTracker",
    "check_logger_mode",
    "table_frame",
    "tracking",
]

#: Modes ``wandb.init`` accepts. ``offline`` writes only local files; ``disabled`` writes nothing.
WANDB_MODES: tuple[str, ...] = ("online", "offline", "disabled", "shared")


def check_logger_mode(mode: Any) -> None:
    """Refuse a ``logger.mode`` that is not one of ``WANDB_MODES``.

    Raises:
        ConfigError: Naming the modes.
    """
    if mode not in WANDB_MODES:
        raise ConfigError(f"logger.mode must be one of {', '.join(WANDB_MODES)}; got {mode!r}")

#: Seconds to wait for a TCP connection to the W&B server before logging offline instead.
CONNECT_TIMEOUT_S = 3.0
#: Seconds ``wandb.init`` may take online before the run logs offline instead.
INIT_TIMEOUT_S = 20.0
#: The W&B server when ``WANDB_BASE_URL`` does not name another.
DEFAULT_BASE_URL = "https://api.wandb.ai"


def _has_api_key(host: str) -> bool:
    """Whether W&B credentials exist without asking anyone: ``WANDB_API_KEY``, an identity
    token file, or a ``netrc`` entry for ``host`` (where ``wandb login`` writes it)."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        return netrc.netrc(path).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def online_problem(base_url: str | None = None,
                   timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why an online W&B run cannot start here, checked in at most ``timeout`` seconds, or
    None when it may: no credentials, or no TCP connection to the server.

    Args:
        base_url: The server (default ``$WANDB_BASE_URL``, else ``DEFAULT_BASE_URL``).
        timeout: Seconds to wait for the connection.
    """
    url = urlparse(base_url or os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL)
    host = url.hostname or ""
    if not _has_api_key(host):
        return "no W&B API key (run `wandb login` or set WANDB_API_KEY)"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        return f"cannot reach {host}:{port} ({exc.strerror or type(exc).__name__})"
    return None


def _warn_offline(reason: str) -> None:
    print(f"warning: W&B online logging is unavailable: {reason}; logging offline instead "
          "(upload later with `wandb sync <run folder>`)", file=sys.stderr)


#: The W&B metric against which ``WandbTracker.log_progress`` values are plotted.
PROGRESS_STEP = "progress/step"


class Tracker(ABC):
    """Where a run's configuration, per-event records and summary metrics go.

    A tracker is used once: ``start``, any number of ``log_*`` calls, then ``finish``.
    """

    @abstractmethod
    def start(
        self,
        config: dict[str, Any],
        name: str | None = None,
        group: str | None = None,
        dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """Open the run.

        Args:
            config: The fully resolved run configuration as a plain dict.
            name: Display name of the run; ``None`` lets the backend choose.
            group: Group the run belongs to (e.g. one per dataset/explainer sweep).
            dir: Folder for local run files; ``None`` uses the backend's default.
        """

    @abstractmethod
    def log_records(self, records: pd.DataFrame) -> None:
        """Log the per-event table (one row per explained event).

        Args:
            records: The records; cells may hold lists (e.g. ``explanation``).
        """

    @abstractmethod
    def log_summary(self, metrics: Mapping[str, float]) -> None:
        """Record final summary metrics; NaN values are allowed.

        Args:
            metrics: Metric name to value, usually namespaced (``"summary/fidelity_plus"``).
        """

    @abstractmethod
    def log_progress(self, step: int, metrics: Mapping[str, float]) -> None:
        """Log running values during the run.

        Args:
            step: Progress counter (e.g. the number of events explained so far).
            metrics: Metric name to value (e.g. ``{"progress/success_rate": 0.4}``).
        """

    def log_curve(self, key: str, x: Sequence[float], y: Sequence[float],  # noqa: B027
                  x_label: str, y_label: str) -> None:  # optional: no-op unless overridden
        """Log one curve of the run (e.g. the mean fidelity against the kept share); a
        tracker that draws nothing ignores it (the default).

        Args:
            key: Name of the curve (``"curves/fidelity_kept"``).
            x: Its abscissae.
            y: Its values, one per abscissa (NaN where undefined).
            x_label: Name of the x axis.
            y_label: Name of the y axis.
        """

    @abstractmethod
    def finish(self, failed: bool = False) -> None:
        """Close the run; safe to call more than once.

        Args:
            failed: Mark the run as failed (the body raised) rather than successful.
        """

    def session(
        self,
        config: dict[str, Any],
        name: str | None = None,
        group: str | None = None,
        dir: str | os.PathLike[str] | None = None,
    ) -> contextlib.AbstractContextManager[Tracker]:
        """Same as ``tracking`` with this tracker."""
        return tracking(self, config, name=name, group=group, dir=dir)


@contextlib.contextmanager
def tracking(
    tracker: Tracker,
    config: dict[str, Any],
    name: str | None = None,
    group: str | None = None,
    dir: str | os.PathLike[str] | None = None,
) -> Iterator[Tracker]:
    """Start ``tracker``, yield it, and always finish it.

    Args:
        tracker: The tracker to run.
        config: The fully resolved run configuration as a plain dict.
        name: Display name of the run.
        group: Group the run belongs to.
        dir: Folder for local run files.

    Yields:
        The started tracker.

    Raises:
        BaseException: Whatever the body raised, after ``finish(failed=True)``.
    """
    tracker.start(config, name=name, group=group, dir=dir)
    try:
        yield tracker
    except BaseException:
        tracker.finish(failed=True)
        raise
    tracker.finish(failed=False)


class NullTracker(Tracker):
    """A tracker that records nothing (``logger=none``); never imports wandb."""

    def start(
        self,
        config: dict[str, Any],
        name: str | None = None,
        group: str | None = None,
        dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """Do nothing."""

    def log_records(self, records: pd.DataFrame) -> None:
        """Do nothing."""

    def log_summary(self, metrics: Mapping[str, float]) -> None:
        """Do nothing."""

    def log_progress(self, step: int, metrics: Mapping[str, float]) -> None:
        """Do nothing."""

    def finish(self, failed: bool = False) -> None:
        """Do nothing."""

    def __repr__(self) -> str:
        return "NullTracker()"


def _cell_to_text(value: Any) -> Any:
    """Turn a container cell into JSON text (``str`` when not JSON-serialisable)."""
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        value = value.tolist()  # numpy arrays and scalars
    if isinstance(value, list | tuple | dict | set | frozenset):
        if isinstance(value, set | frozenset):
            value = sorted(value, key=repr)
        try:
            return json.dumps(value, default=str, allow_nan=True)
        except (TypeError, ValueError):
            return str(value)
    return value


def table_frame(records: pd.DataFrame) -> pd.DataFrame:
    """Make a records frame safe for ``wandb.Table``.

    Object columns are made uniform: containers (lists, tuples, dicts, arrays) become JSON text,
    and a column still mixing types after that becomes ``str`` (``None`` cells stay ``None``).
    Column names become strings. The input is not modified.

    Args:
        records: The per-event records.

    Returns:
        A copy whose cells ``wandb.Table`` can type.
    """
    frame = records.copy()
    frame.columns = [str(c) for c in frame.columns]
    for column in frame.columns:
        series = frame[column]
        if series.dtype != object:
            continue
        converted = series.map(_cell_to_text)
        kinds = {type(v) for v in converted if v is not None}
        if len(kinds) > 1 or (kinds and not kinds <= {str, int, float, bool}):
            converted = converted.map(lambda v: v if v is None else str(v))
        frame[column] = converted
    return frame


def _plain_number(value: Any) -> Any:
    """Turn numpy/torch scalars into Python numbers (NaN stays NaN)."""
    if hasattr(value, "item") and callable(value.item):
        with contextlib.suppress(TypeError, ValueError):
            value = value.item()
    return value


class WandbTracker(Tracker):
    """Log to Weights & Biases (``logger=wandb``); offline by default.

    wandb is imported in ``start``, not at construction, so building the tracker from a
    config never needs it. Each tracker owns its run (``reinit="create_new"``), so several runs
    can be made one after the other, or side by side, in one process; the run is reached through
    ``run``, not the global ``wandb.run``.

    Args:
        project: W&B project name.
        entity: W&B user or team; ``None`` uses the default entity.
        mode: ``"offline"`` (local files only, sync later with ``wandb sync``), ``"online"``,
            ``"shared"`` or ``"disabled"``.
        tags: Tags attached to the run.
        job_type: The run's job type.
        notes: Free-text notes attached to the run.

    Raises:
        ConfigError: If ``mode`` is not one of ``WANDB_MODES`` (a ``ValueError``).
    """

    def __init__(
        self,
        project: str = "cftgnn",
        entity: str | None = None,
        mode: str = "offline",
        tags: Sequence[str] = (),
        job_type: str = "explain",
        notes: str | None = None,
    ) -> None:
        check_logger_mode(mode)
        if isinstance(tags, str):
            tags = (tags,)
        self.project = project
        self.entity = entity
        self.mode = mode
        self.tags: tuple[str, ...] = tuple(str(t) for t in tags)
        self.job_type = job_type
        self.notes = notes
        self._run: Run | None = None
        self._finished = False
        self._progress_keys: set[str] = set()

    def __repr__(self) -> str:
        return (
            f"WandbTracker(project={self.project!r}, entity={self.entity!r}, mode={self.mode!r}, "
            f"tags={list(self.tags)!r}, job_type={self.job_type!r})"
        )

    @property
    def run(self) -> Run | None:
        """The wandb run; ``None`` before ``start``. Kept after ``finish``."""
        return self._run

    @property
    def run_dir(self) -> Path | None:
        """The run's local folder (holding ``run-<id>.wandb``).

        ``None`` before ``start`` and in ``disabled`` mode, which writes nothing.
        """
        if self._run is None or self._run.disabled:
            return None
        return Path(self._run.dir).parent

    @property
    def active(self) -> bool:
        """Whether the run has been started and not yet finished."""
        return self._run is not None and not self._finished

    def _active_run(self) -> Run:
        if self._run is None or self._finished:
            state = "finished" if self._finished else "not started"
            raise RuntimeError(f"WandbTracker run is {state}; log between start() and finish()")
        return self._run

    def start(
        self,
        config: dict[str, Any],
        name: str | None = None,
        group: str | None = None,
        dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """Import wandb and open the run.

        Args:
            config: The fully resolved run configuration as a plain dict.
            name: Display name of the run.
            group: Group the run belongs to.
            dir: Folder for local run files (created if absent); ``None`` uses ``$WANDB_DIR`` or
                the working directory.

        Raises:
            ImportError: If wandb is not installed.
            RuntimeError: If this tracker was already started.
        """
        if self._run is not None:
            raise RuntimeError("WandbTracker.start() called twice; use one tracker per run")
        try:
            import wandb
        except ImportError as exc:
            raise ImportError("logger=wandb needs the wandb package: pip install wandb") from exc
        if dir is not None:
            Path(dir).mkdir(parents=True, exist_ok=True)
        mode = self.mode
        if mode in ("online", "shared") and (problem := online_problem()) is not None:
            _warn_offline(problem)
            mode = "offline"

        def init(mode: str) -> Run:
            return wandb.init(
                project=self.project,
                entity=self.entity,
                mode=mode,  # type: ignore[arg-type]  # validated against WANDB_MODES
                config=dict(config),
                name=name,
                group=group,
                dir=dir,
                tags=list(self.tags),
                job_type=self.job_type,
                notes=self.notes,
                reinit="create_new",
                settings=wandb.Settings(init_timeout=INIT_TIMEOUT_S),
            )

        try:
            self._run = init(mode)
        except Exception as exc:  # noqa: BLE001  (login refused, server error, timeout)
            if mode not in ("online", "shared"):
                raise
            _warn_offline(str(exc).strip().splitlines()[0] if str(exc).strip()
                          else type(exc).__name__)
            mode = "offline"
            self._run = init(mode)
        self.mode = mode
        self._finished = False
        self._run.define_metric(PROGRESS_STEP, hidden=True)

    def log_records(self, records: pd.DataFrame) -> None:
        """Log the records as a ``wandb.Table`` under the key ``"records"``.

        Args:
            records: The per-event records; list cells are stored as JSON text.
        """
        import wandb

        run = self._active_run()
        run.log({"records": wandb.Table(dataframe=table_frame(records))})

    def log_summary(self, metrics: Mapping[str, float]) -> None:
        """Set summary values on the run (stored as given; NaN is stored as null).

        Args:
            metrics: Metric name to value.
        """
        run = self._active_run()
        run.summary.update({str(k): _plain_number(v) for k, v in metrics.items()})

    def log_curve(self, key: str, x: Sequence[float], y: Sequence[float], x_label: str,
                  y_label: str) -> None:
        """Log a curve as a W&B line plot (``wandb.plot.line`` over a two-column table;
        NaN points are left out)."""
        import wandb

        run = self._active_run()
        rows: list[Iterable[Any]] = [[float(a), float(b)] for a, b in zip(x, y, strict=True)
                                     if b == b]
        table = wandb.Table(data=rows, columns=[x_label, y_label])
        run.log({key: wandb.plot.line(table, x_label, y_label, title=key)})

    def log_progress(self, step: int, metrics: Mapping[str, float]) -> None:
        """Log running values, plotted against ``progress/step``.

        A dedicated step metric is used instead of wandb's own step, so progress can restart at
        0 and interleave with ``log_records`` without wandb dropping non-monotonic steps.

        Args:
            step: Progress counter.
            metrics: Metric name to value.
        """
        run = self._active_run()
        values = {str(k): _plain_number(v) for k, v in metrics.items()}
        for key in values.keys() - self._progress_keys:
            run.define_metric(key, step_metric=PROGRESS_STEP)
            self._progress_keys.add(key)
        run.log({PROGRESS_STEP: int(step), **values})

    def finish(self, failed: bool = False) -> None:
        """Finish the run with exit code 1 when ``failed``, else 0; later calls do nothing.

        Args:
            failed: Mark the run as failed.
        """
        if self._run is None or self._finished:
            return
        self._finished = True
        self._run.finish(exit_code=1 if failed else 0)
