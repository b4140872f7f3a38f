"""The batcher's queue bound, in-process: a decode held open while requests arrive."""

import asyncio
import threading

import pytest

from attnmt.infer.translate import SearchConfig
from attnmt.serve.batcher import Batcher, Overloaded


class HeldTranslator:
    """Translates each text to itself, once `release` is set."""

    def __init__(self) -> None:
        self.release, self.calls = threading.Event(), []

    def translate(self, texts, search, attention):
        self.calls.append(len(texts))
        self.release.wait(10)
        return list(texts)


def test_past_max_queue_requests_are_refused_and_the_accepted_ones_answered():
    async def scenario():
        translator = HeldTranslator()
        batcher = Batcher(translator, 0, 3, max_queue=5)
        worker = asyncio.create_task(batcher.run())
        options = (SearchConfig(beam_size=1), False)
        first = asyncio.create_task(batcher.translate(["a", "b", "c"], *options))
        while not translator.calls:  # the first batch is being decoded: nothing waits
            await asyncio.sleep(0.01)
        waiting = [asyncio.create_task(batcher.translate([x, x], *options)) for x in "de"]
        await asyncio.sleep(0.05)
        assert batcher.waiting == 4
        with pytest.raises(Overloaded, match="4 sentences wait .max_queue=5."):
            await batcher.translate(["f", "g"], *options)
        assert batcher.waiting == 4
        translator.release.set()
        answers = [await first, *[await w for w in waiting]]
        assert answers == [["a", "b", "c"], ["d", "d"], ["e", "e"]] and batcher.waiting == 0
        assert await batcher.translate(["h"], *options) == ["h"]  # and it goes on
        worker.cancel()
        batcher.worker.shutdown(wait=True)

    asyncio.run(scenario())
