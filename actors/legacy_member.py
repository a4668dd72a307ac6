"""One emulated 0.8 consumer's ZooKeeper I/O inside a consumer host.

:class:`~emulator.host.legacy_shell.LegacyShell` (the core) carries out what
the :class:`~emulator.legacy.consumer.LegacyConsumer` machine decides; this
subclass gives it what only the actor has: a ZooKeeper session of its own (so
its ephemeral nodes live and expire alone), the driver that performs its
requests as asyncio tasks, and the fault link its session may go through
(:class:`actors.io.ZkLink`: on the real engine a
:class:`zk_registry.proxy.FaultProxy`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from emulator.host.legacy_shell import LegacyShell
from emulator.host.shell import EmitFn
from emulator.legacy.consumer import LegacyConsumer
from emulator.legacy.messages import IoResult, Request

if TYPE_CHECKING:
    from actors.io import ZkLink
    from zk_registry.client import ZkClient
    from zk_registry.legacy_driver import LegacyZkDriver


class _ProxyLink:
    """A :class:`~emulator.host.legacy_shell.SessionLink` over a fault link."""

    def __init__(self, proxy: ZkLink) -> None:
        self.proxy = proxy

    def blackhole(self, on: bool) -> None:
        from zk_registry.proxy import ProxyMode

        self.proxy.set_mode(ProxyMode.BLACKHOLE if on else ProxyMode.PASS)


class LegacyMember(LegacyShell):
    """The I/O shell around one legacy consumer.

    Args:
        name: scenario name (``c-0``).
        machine: the state machine.
        zk: a :class:`zk_registry.client.ZkClient` for this consumer alone.
        driver: a :class:`zk_registry.legacy_driver.LegacyZkDriver` on ``zk``.
        emit: writes an event (kind, fields).
        now_ms: the emulated clock.
        proxy: the fault link (proxy) its session goes through, if any.
    """

    def __init__(
        self,
        name: str,
        machine: LegacyConsumer,
        zk: ZkClient | None,
        driver: LegacyZkDriver | None,
        emit: EmitFn,
        now_ms: Callable[[], float],
        proxy: ZkLink | None = None,
    ) -> None:
        super().__init__(
            name,
            machine,
            emit,
            now_ms,
            self._submit,
            None if proxy is None else _ProxyLink(proxy),
        )
        self.zk = zk
        self.driver = driver
        self.proxy = proxy
        # requests in flight, in the order they were made (a dict: a set of tasks
        # iterates in address order, which would make kill() cancel in a
        # different order from one process to the next)
        self.tasks: dict[asyncio.Task[None], None] = {}

    def _submit(self, req: Request) -> None:
        task = asyncio.ensure_future(self._perform_io(req))
        self.tasks[task] = None
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self.tasks.pop(task, None)

    async def _perform_io(self, req: Request) -> None:
        try:
            assert self.driver is not None, "a member without a driver performs nothing"
            result: IoResult = await self.driver.execute(req)
        except Exception as exc:  # the driver turns ZooKeeper errors into results
            result = IoResult(error=type(exc).__name__)
        while self.paused and self.alive:
            await asyncio.sleep(0.01)
        self.complete(req, result)

    def kill(self) -> None:
        """A crash: its requests in flight are abandoned, then the shell stops."""
        self.alive = False
        for t in list(self.tasks):
            t.cancel()
        super().kill()
