"""Where a sweep's trials live: Optuna studies in SQLite (the default) or any SQLAlchemy URL.

The grid study (NAME) holds one trial per unique config, named by its `key` user attribute;
each search experiment has its own study (NAME:EXPERIMENT). A worker *claims* a trial by moving
it from WAITING to RUNNING. PostgreSQL and MySQL do that check-and-set under Optuna's
`SELECT ... FOR UPDATE`; SQLite ignores row locks, so with SQLite every claim (enqueue what is
missing, then pop) holds an exclusive file lock beside the database, and workers on one machine
never take the same trial. As a second guard (a server database shared by machines that start at
the same instant) a claimed grid trial whose key already has an earlier live or finished trial
is dropped as a duplicate.

A RUNNING trial is stale when its worker is gone: on this host, when its pid no longer lives;
elsewhere, when its heartbeat (a user attribute refreshed every HEARTBEAT_SECONDS) is older than
STALE_SECONDS. A stale or interrupted trial is marked FAIL with `interrupted` set, and a copy is
enqueued that resumes from the checkpoints in the same run directory.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import optuna
import sqlalchemy
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from attnmt.utils import UserError

HEARTBEAT_SECONDS = 30.0
STALE_SECONDS = 300.0
HOST = socket.gethostname()
# User attributes a retry inherits from the trial it replaces.
CARRIED = ("key", "name", "run_dir", "config", "experiment")


def default_url(sweep_dir: Path) -> str:
    return f"sqlite:///{(sweep_dir / 'study.db').resolve()}"


def shown_url(url: str) -> str:
    """The URL without its password, for messages."""
    with contextlib.suppress(sqlalchemy.exc.ArgumentError):
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    return url


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    # A killed worker stays a zombie until the sweep's main process reaps it (it joins its
    # workers in order): its pid answers, but nothing runs. Where /proc tells, that is gone.
    with contextlib.suppress(OSError, IndexError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    return True


def is_stale(trial: FrozenTrial, now: float | None = None, *, claims_locked: bool = False) -> bool:
    """A RUNNING trial whose worker is gone (see the module docstring). With `claims_locked` (the
    caller holds the SQLite claim lock, under which every claim also writes its owner) a trial
    without an owner was left by a worker killed between claiming it and writing its pid."""
    attrs = trial.user_attrs
    if claims_locked and "pid" not in attrs:
        return True
    # Claims happen between trials, so a trial carrying this very pid was left by an earlier sweep
    # in this process (or a reused pid), never one this process is running.
    if attrs.get("host") == HOST and "pid" in attrs and (attrs["pid"] == os.getpid() or not _alive(attrs["pid"])):
        return True
    # Elsewhere (and for a zombie where /proc cannot tell) only the heartbeat tells.
    started = trial.datetime_start.timestamp() if trial.datetime_start else 0.0
    return (now or time.time()) - attrs.get("heartbeat", started) > STALE_SECONDS


def occupies(trial: FrozenTrial, retry_before: datetime | None = None) -> bool:
    """Whether this trial stands for its config, so that no other trial should be started for it.
    With `retry_before` (--retry-failed: when this sweep started), failures from before then give
    way to a new attempt; failures since do not, so each failed config is retried once a run."""
    attrs = trial.user_attrs
    if trial.state == TrialState.FAIL:
        if attrs.get("interrupted") or "duplicate_of" in attrs:
            return False
        return retry_before is None or (trial.datetime_complete or retry_before) >= retry_before
    return True  # COMPLETE, PRUNED, WAITING, or RUNNING (stale ones are retired before this is asked)


class Store:
    """An Optuna storage plus the claim protocol of the module docstring."""

    def __init__(self, url: str) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.url, self.lock_path = url, None
        try:
            parsed = sqlalchemy.engine.make_url(url)
        except sqlalchemy.exc.ArgumentError:
            raise UserError(
                f"{url!r}: not a database URL (e.g. sqlite:///study.db, postgresql://...)", field="storage"
            ) from None
        engine_kwargs: dict[str, Any] = {}
        if parsed.get_backend_name() == "sqlite":
            if not parsed.database or parsed.database == ":memory:":
                raise UserError(f"{url}: an in-memory database keeps nothing; give a file", field="storage")
            self.lock_path = Path(parsed.database + ".lock")
            engine_kwargs = {"connect_args": {"timeout": 60}}  # wait for other workers' writes
        elif parsed.get_backend_name() == "postgresql":
            engine_kwargs = {"connect_args": {"connect_timeout": 10}}
        try:
            with self.lock():  # two processes creating the tables of a new SQLite file at once collide
                self.storage = optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
        except ImportError as exc:
            cause = exc.__cause__ or exc
            raise UserError(
                f"{shown_url(url)}: its database driver is not installed ({cause})", field="storage"
            ) from None
        except (sqlalchemy.exc.SQLAlchemyError, RuntimeError, ValueError, OSError) as exc:
            reason = getattr(exc, "strerror", None) or str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise UserError(f"{shown_url(url)}: cannot open the study database ({reason})", field="storage") from None

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive among processes on this machine for SQLite; the database's own locks otherwise."""
        if self.lock_path is None:
            yield
            return
        import fcntl

        with self.lock_path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def study(
        self, name: str, *, direction: Literal["minimize", "maximize"], sampler=None, pruner=None
    ) -> optuna.Study:
        with self.lock():
            study = optuna.create_study(
                storage=self.storage,
                study_name=name,
                direction=direction,
                sampler=sampler,
                pruner=pruner,
                load_if_exists=True,
            )
        if study.direction.name.lower() != direction:
            raise UserError(
                f"study {name!r} in {shown_url(self.url)} was made to {study.direction.name.lower()} its "
                f"metric, this sweep would {direction}; give the sweep another name"
            )
        return study

    def load(self, name: str) -> optuna.Study:
        try:
            return optuna.load_study(study_name=name, storage=self.storage)
        except KeyError:
            raise UserError(f"{shown_url(self.url)}: no study named {name!r}; run `attnmt sweep` first") from None

    def trial_id(self, study: optuna.Study, number: int) -> int:
        study_id = self.storage.get_study_id_from_name(study.study_name)
        return self.storage.get_trial_id_from_study_id_trial_number(study_id, number)

    def claim_grid(self, study: optuna.Study, wanted: dict[str, dict], *, retry_before=None) -> optuna.Trial | None:
        """Enqueue each wanted key (-> its user attributes) that no trial stands for, then take
        the first waiting one; None when nothing is left to run."""
        with self.lock():
            trials = self._retire_stale(study)
            for key, attrs in wanted.items():
                twins = [t for t in trials if t.user_attrs.get("key") == key]
                if not any(occupies(t, retry_before) for t in twins):
                    study.enqueue_trial({}, user_attrs={**attrs, "attempt": len(twins)})
            for waiting in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
                waiting_key = waiting.user_attrs.get("key")
                if waiting_key in wanted and (trial := self._pop(study, waiting)) is not None:
                    twin = self._earlier_twin(study, waiting.number, waiting_key)
                    if twin is None:
                        return trial
                    self.finish(study, waiting.number, TrialState.FAIL, {"duplicate_of": twin})
        return None

    def claim_search(self, study: optuna.Study, n_trials: int, *, retry_before=None) -> optuna.Trial | None:
        """The next trial of a search (a waiting retry first); None once n_trials stand."""
        with self.lock():
            trials = self._retire_stale(study)
            waiting = any(t.state == TrialState.WAITING for t in trials)
            if not waiting and sum(occupies(t, retry_before) for t in trials) >= n_trials:
                return None
            trial = study.ask()
            self._own(self.trial_id(study, trial.number))
            return trial

    def _pop(self, study: optuna.Study, waiting: FrozenTrial) -> optuna.Trial | None:
        trial_id = self.trial_id(study, waiting.number)
        try:
            if not self.storage.set_trial_state_values(trial_id, TrialState.RUNNING):
                return None  # another worker took it
        except UpdateFinishedTrialError:
            return None
        self._own(trial_id)
        return optuna.trial.Trial(study, trial_id)

    def _own(self, trial_id: int) -> None:
        now = time.time()
        for key, value in {"host": HOST, "pid": os.getpid(), "heartbeat": now, "claimed": now}.items():
            self.storage.set_trial_user_attr(trial_id, key, value)

    def _earlier_twin(self, study: optuna.Study, number: int, key: str) -> int | None:
        live = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING, TrialState.PRUNED)
        for trial in study.get_trials(deepcopy=False, states=live):
            if trial.number < number and trial.user_attrs.get("key") == key:
                return trial.number
        return None

    def _retire_stale(self, study: optuna.Study) -> list[FrozenTrial]:
        """Retire every stale RUNNING trial; the study's trials afterwards. Called under `lock()`."""
        now = time.time()
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if is_stale(trial, now, claims_locked=self.lock_path is not None):
                attrs = trial.user_attrs
                self.retire(study, trial.number, f"worker {attrs.get('pid')} on {attrs.get('host')} stopped")
        return study.get_trials(deepcopy=False)

    def retire(self, study: optuna.Study, number: int, reason: str) -> None:
        """Mark a RUNNING trial FAIL (interrupted) and enqueue its retry; a no-op when another
        worker finished or retired it first."""
        if not self.finish(study, number, TrialState.FAIL, {"error": f"interrupted: {reason}", "interrupted": True}):
            return
        old = self.storage.get_trial(self.trial_id(study, number))
        carried = {key: old.user_attrs[key] for key in CARRIED if key in old.user_attrs}
        retry = {**carried, "attempt": old.user_attrs.get("attempt", 0) + 1, "retry_of": number}
        study.enqueue_trial(old.params, user_attrs=retry)

    def finish(self, study: optuna.Study, number: int, state: TrialState, attrs: dict, value=None) -> bool:
        """Store `attrs`, then the final state (and value). False when the trial had already
        finished, e.g. retired as stale by another worker: the state change is the storage's
        atomic check-and-set, so exactly one caller wins."""
        trial_id = self.trial_id(study, number)
        try:
            for key, item in attrs.items():
                self.storage.set_trial_user_attr(trial_id, key, item)
            return self.storage.set_trial_state_values(trial_id, state, None if value is None else [value])
        except UpdateFinishedTrialError:
            return False

    @contextlib.contextmanager
    def heartbeat(self, trial_id: int) -> Iterator[None]:
        """Refresh the trial's heartbeat in a background thread while the body runs."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(HEARTBEAT_SECONDS):
                with contextlib.suppress(Exception):  # a lost beat only makes the trial look older
                    self.storage.set_trial_user_attr(trial_id, "heartbeat", time.time())

        thread = threading.Thread(target=beat, name=f"heartbeat-{trial_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
