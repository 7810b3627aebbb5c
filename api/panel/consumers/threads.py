"""`TailThread`: the base of a tail that runs its loop on a daemon thread of its own, restarting
it after a failure, so a broken broker connection or a bad record never takes the API down."""

from __future__ import annotations

import threading

RETRY_S = 2.0


class TailThread:
    """Runs `run(stop)` on a thread named `thread_name` from `start()` to `stop()`; an exception
    is kept in `error` (as `Type: text`) and `run` starts again after `RETRY_S`."""

    thread_name = "tail"

    def __init__(self) -> None:
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self, stop: threading.Event) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._guarded, name=self.thread_name, daemon=True)
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
            except Exception as exc:  # keep the API up; retry after a pause
                self.error = f"{type(exc).__name__}: {exc}"
                self._stop.wait(RETRY_S)
