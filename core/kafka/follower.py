"""`TopicFollower`: follow a topic on a daemon thread of its own, from `start()` to `stop()`,
restarting the loop after a failure, so a broken broker connection or a bad record never takes
its process down. The panel's tails, its feeds and the endpoint's last-use updater run on it."""

from __future__ import annotations

import threading
from collections.abc import Callable

RETRY_S = 2.0

Loop = Callable[[threading.Event], None]


class TopicFollower:
    """Runs `run(stop)` (a subclass's, or the `loop` given) on a thread named `thread_name`;
    the loop returns once `stop` is set. An exception is kept in `error` (as `Type: text`),
    passed to `on_error`, and the loop starts again after `RETRY_S` (without `retry`, it ends).
    `stop`: an event shared with other followers, else its own."""

    thread_name = "tail"

    def __init__(
        self,
        loop: Loop | None = None,
        *,
        name: str | None = None,
        stop: threading.Event | None = None,
        retry: bool = True,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.error: str | None = None
        self._loop = loop
        self.name = name or self.thread_name
        self._retry = retry
        self._on_error = on_error
        self._stop = stop if stop is not None else threading.Event()
        self._thread: threading.Thread | None = None

    def run(self, stop: threading.Event) -> None:
        if self._loop is None:
            raise NotImplementedError
        self._loop(stop)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._guarded, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout_s)

    def _guarded(self) -> None:
        while not self._stop.is_set():
            try:
                self.run(self._stop)
                return
            except Exception as exc:  # keep the process up; retry after a pause
                self.error = f"{type(exc).__name__}: {exc}"
                if self._on_error is not None:
                    self._on_error(self.error)
                if not self._retry:
                    return
                self._stop.wait(RETRY_S)
