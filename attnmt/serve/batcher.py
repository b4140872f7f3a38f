"""Dynamic batching: requests that arrive close together are decoded as one batch.

Each request's sentences join a queue. One task takes what is queued, waits at most
`max_wait_ms` for more (up to `max_sentences`), and decodes them together in a worker thread,
so the event loop keeps accepting requests meanwhile; those that arrive during a decode form
the next batch. Requests with different search options (beam size, n-best, attention) are
decoded in separate groups of the same round.

At most `max_queue` sentences wait for a batch: a request that would pass that is refused at
once (`Overloaded`, the service's 503) instead of joining a queue that grows without end, so
the requests already accepted keep their latency.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from attnmt.infer.translate import SearchConfig, Translation, Translator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """What a request chose; requests with equal options share a decode."""

    search: SearchConfig
    attention: bool


class Overloaded(Exception):
    """More sentences wait than `max_queue` allows; the request should come back later."""

    def __init__(self, waiting: int, max_queue: int) -> None:
        super().__init__(f"busy: {waiting} sentences wait (max_queue={max_queue}); retry later")


@dataclass
class Job:
    """One request waiting for its translations."""

    texts: list[str]
    options: Options
    result: asyncio.Future = field(repr=False)


class Batcher:
    """Collects requests into batches and decodes them with one `Translator`."""

    def __init__(
        self, translator: Translator, max_wait_ms: float, max_sentences: int, max_queue: int
    ) -> None:
        self.translator = translator
        self.max_wait, self.max_sentences = max_wait_ms / 1000, max_sentences
        self.max_queue = max_queue
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self.waiting = 0  # sentences queued, not yet taken into a batch
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnmt-decode")

    async def translate(
        self, texts: list[str], search: SearchConfig, attention: bool
    ) -> list[Translation]:
        """The translations of `texts`, decoded with whatever else arrives meanwhile; raises
        `Overloaded` where they would take the queue past `max_queue` sentences."""
        if self.waiting + len(texts) > self.max_queue:
            raise Overloaded(self.waiting, self.max_queue)
        options = Options(search, attention)
        job = Job(texts, options, asyncio.get_running_loop().create_future())
        self.waiting += len(texts)
        self.queue.put_nowait(job)
        return await job.result

    async def run(self) -> None:
        """Decode batches until cancelled."""
        while True:
            jobs = await self._next_batch()
            groups: dict[Options, list[Job]] = defaultdict(list)
            for job in jobs:
                groups[job.options].append(job)
            for options, group in groups.items():
                await self._decode(options, group)

    async def _next_batch(self) -> list[Job]:
        """The first queued job, then all that arrive within `max_wait` (to `max_sentences`)."""
        loop = asyncio.get_running_loop()
        jobs = [self._taken(await self.queue.get())]
        count = len(jobs[0].texts)
        deadline = loop.time() + self.max_wait
        while count < self.max_sentences:
            if self.queue.empty():
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    job = await asyncio.wait_for(self.queue.get(), left)
                except TimeoutError:
                    break
            else:
                job = self.queue.get_nowait()
            jobs.append(self._taken(job))
            count += len(job.texts)
        return jobs

    def _taken(self, job: Job) -> Job:
        """`job`, counted out of the waiting sentences."""
        self.waiting -= len(job.texts)
        return job

    async def _decode(self, options: Options, jobs: list[Job]) -> None:
        """Translate the sentences of `jobs` in one call and hand each job its own."""
        texts = [text for job in jobs for text in job.texts]
        call = functools.partial(
            self.translator.translate, texts, options.search, attention=options.attention
        )
        try:
            results = await asyncio.get_running_loop().run_in_executor(self.worker, call)
        except Exception as error:  # the requests fail, the service goes on
            log.exception("decoding %d sentences failed", len(texts))
            for job in jobs:
                if not job.result.done():
                    job.result.set_exception(error)
            return
        start = 0
        for job in jobs:
            if not job.result.done():  # (a client that went away cancelled its future)
                job.result.set_result(results[start : start + len(job.texts)])
            start += len(job.texts)
