"""The background embedding worker (docs/embeddings.md): writes never wait for a provider.

One thread finds pending memories on its own read connection, embeds them in batches of up to 32 off the
writer, and hands each finished batch to the daemon's single writer to store. A failed batch (unreachable,
timed out, HTTP error, a reply that is not vectors of the right length) is retried with backoff from 5 s
doubling to 1 h, its memories set aside for as long so that others can go first. At start, vectors of any
other model are deleted and their memories become pending again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor

from hivemem.daemon.lifecycle import Log
from hivemem.embeddings import EmbeddingError, cut_text
from hivemem.search.vector import Runtime
from hivemem.store import Store

BATCH = 32
FIRST_BACKOFF = 5.0
MAX_BACKOFF = 3600.0
STOP_WAIT = 2.0
IDLE_POLL = 30.0
Pending = tuple[int, str, str, bytes]  # a safety net: each committed write wakes the worker at once


class Worker:
    def __init__(self, store: Store, runtime: Runtime, writer: Executor, log: Log, *, max_input_bytes: int,
                 batch_timeout_ms: int, dimensions: int) -> None:  # fmt: skip
        self.store, self.runtime, self.writer, self.log = store, runtime, writer, log
        self.max_input_bytes = max_input_bytes
        self.batch_timeout = batch_timeout_ms / 1000
        self.dimensions = dimensions
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._deferred: dict[int, float] = {}  # memory -> monotonic time before which it is not tried
        self.backoff = 0.0
        self.thread = threading.Thread(target=self._run, name="embedder", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self.thread.join(timeout=STOP_WAIT)  # a hung provider must not hold the daemon's exit

    def _on_writer(self, fn: Callable[..., object], *args: object) -> object:
        """Run a store write on the daemon's single writer thread and wait for it."""
        return self.writer.submit(fn, *args).result()

    def _run(self) -> None:
        try:
            reader = self.store.reader()
        except Exception as exc:  # the daemon keeps serving full text
            self.log.write(f"embeddings: cannot open the store for the worker: {exc!r}")
            return
        try:
            dropped = self._on_writer(self.store.vectors.drop_other_models, self.runtime.model)
            if dropped:
                self.log.write(f"embeddings: model is now {self.runtime.model}; {dropped} vectors to re-embed")
            self.runtime.index.reset()
            while not self._stop.is_set():
                self._step(reader)
        except Exception as exc:  # a bug stops embedding, never the daemon
            self.log.write(f"embeddings: worker stopped: {exc!r}")
        finally:
            reader.close()

    def _step(self, reader: Store) -> None:
        now = time.monotonic()
        self._deferred = {m: t for m, t in self._deferred.items() if t > now}
        batch = reader.vectors.pending(BATCH, list(self._deferred))
        if not batch:
            wait = min([IDLE_POLL, *(t - now for t in self._deferred.values())])
            self._wake.wait(max(wait, 0.05))
            self._wake.clear()
            return
        try:
            found = self._embed(reader, batch)
        except EmbeddingError as exc:
            self.backoff = min(MAX_BACKOFF, max(FIRST_BACKOFF, self.backoff * 2))
            self.runtime.last_error = str(exc)
            self.log.write(f"embeddings: a batch of {len(batch)} failed ({exc}); retrying in {self.backoff:.0f} s")
            until = time.monotonic() + self.backoff
            self._deferred.update((m, until) for m, _, _, _ in batch)
            self._stop.wait(self.backoff)
            return
        self.backoff = 0.0
        self.runtime.last_error = None
        stored = self._on_writer(self.store.vectors.put, self.runtime.model, found)
        assert isinstance(stored, list)
        self.runtime.index.touch(stored)

    def _embed(self, reader: Store, batch: list[Pending]) -> list[tuple[int, str, bytes, list[float]]]:
        texts = [cut_text(title, content, self.max_input_bytes) for _, title, content, _ in batch]
        vecs = self.runtime.provider.embed(texts, query=False, timeout=self.batch_timeout)
        expected = self.dimensions or reader.vectors.width(self.runtime.model)
        if expected and any(len(v) != expected for v in vecs):
            raise EmbeddingError(f"vectors of {len(vecs[0])} numbers, but the model's stored ones have {expected}")
        return [(m, title, digest, v) for (m, title, _, digest), v in zip(batch, vecs, strict=True)]
