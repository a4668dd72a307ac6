"""Pins the private CPython asyncio API that ``SimEventLoop`` overrides or relies on.

``emulator/sim/loop.py`` replaces ``BaseEventLoop._run_once``, ``call_soon``,
``_call_soon``, ``call_at``, ``call_later`` and ``_timer_handle_cancelled``, reads
``Handle._context``, ``Handle._cancelled``, ``TimerHandle._scheduled`` and the
loop's ``_ready``/``_stopping``/``_closed``/``_debug``, and does what
``Handle.__init__``, ``TimerHandle.__init__`` and ``Handle._run`` do inline (it
sets the handles' slots itself and runs their callbacks in their contexts).
These are private: a Python upgrade may change them without notice. This test
fails loudly when it does.

When it fails after an upgrade: read the new ``asyncio/base_events.py`` and
``asyncio/events.py``, adapt ``SimEventLoop`` where the contract moved (3.12
splits ``run_forever`` into ``_run_forever_setup``/``_run_forever_cleanup``,
and adds ``Handle.get_context``), run ``tests/unit/sim``, then update
``PINNED`` below.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import inspect
import sys
import textwrap
from asyncio import base_events, events
from collections.abc import Callable
from typing import Any

import pytest

from emulator.sim.loop import ActorContext, SimEventLoop, current_actor

PINNED_VERSION = (3, 11)

_TARGETS: dict[str, Callable[..., Any]] = {
    "BaseEventLoop.__init__": base_events.BaseEventLoop.__init__,
    "BaseEventLoop.run_forever": base_events.BaseEventLoop.run_forever,
    "BaseEventLoop.run_until_complete": base_events.BaseEventLoop.run_until_complete,
    "BaseEventLoop.stop": base_events.BaseEventLoop.stop,
    "BaseEventLoop.close": base_events.BaseEventLoop.close,
    "BaseEventLoop.create_task": base_events.BaseEventLoop.create_task,
    "BaseEventLoop.call_soon": base_events.BaseEventLoop.call_soon,
    "BaseEventLoop.call_soon_threadsafe": base_events.BaseEventLoop.call_soon_threadsafe,
    "BaseEventLoop._call_soon": base_events.BaseEventLoop._call_soon,  # type: ignore[attr-defined]
    "BaseEventLoop.call_later": base_events.BaseEventLoop.call_later,
    "BaseEventLoop.call_at": base_events.BaseEventLoop.call_at,
    "BaseEventLoop._timer_handle_cancelled": (
        base_events.BaseEventLoop._timer_handle_cancelled  # type: ignore[attr-defined]
    ),
    "BaseEventLoop._run_once": base_events.BaseEventLoop._run_once,  # type: ignore[attr-defined]
    "Handle.__init__": events.Handle.__init__,
    "Handle.cancel": events.Handle.cancel,
    "Handle._run": events.Handle._run,
    "TimerHandle.__init__": events.TimerHandle.__init__,
    "TimerHandle.cancel": events.TimerHandle.cancel,
}

PINNED = {
    "BaseEventLoop.__init__": "598f514d0849ba73",
    "BaseEventLoop.run_forever": "d90c263f73579035",
    "BaseEventLoop.run_until_complete": "fbcaaa9251fc7cba",
    "BaseEventLoop.stop": "5a158a0b6a3826ba",
    "BaseEventLoop.close": "627eda734e1f81a2",
    "BaseEventLoop.create_task": "fd4c99eb40c695ea",
    "BaseEventLoop.call_soon": "089c2f1e0055d9d6",
    "BaseEventLoop.call_soon_threadsafe": "a83fd2529bb849a6",
    "BaseEventLoop._call_soon": "0d21d7878b738a0c",
    "BaseEventLoop.call_later": "fbe2a205f7363171",
    "BaseEventLoop.call_at": "360ffc10ae52ed09",
    "BaseEventLoop._timer_handle_cancelled": "976a63f6981c6bca",
    "BaseEventLoop._run_once": "6803a518c7f6a369",
    "Handle.__init__": "5fc226e3101e6940",
    "Handle.cancel": "f97cdd575b393a20",
    "Handle._run": "fbd2180838ea3746",
    "TimerHandle.__init__": "1597ea7b0ebc2e6a",
    "TimerHandle.cancel": "730a398e2bef7c4c",
}
"""sha256 (first 16 hex) of each function's code (:func:`code_digest`) on CPython 3.11.

The same on 3.11.2 (Debian 12's build, which ``deploy/local.sh`` prefers) and
3.11.7: between the two only ``call_later``'s docstring changed."""


def code_digest(fn: Callable[..., Any]) -> str:
    """sha256 (first 16 hex) of a function's code without its docstring, as ``ast`` prints it.

    A docstring or comment edit in a Python patch release is not a change of
    the contract; a change of the code is.
    """
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = node.body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.unparse(tree).encode()).hexdigest()[:16]


def test_python_is_the_pinned_minor_version() -> None:
    assert sys.version_info[:2] == PINNED_VERSION, (
        "SimEventLoop overrides CPython 3.11's private asyncio loop API; "
        "review it for this Python (see this module's docstring)"
    )


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_private_sources_are_unchanged(name: str) -> None:
    digest = code_digest(_TARGETS[name])
    assert digest == PINNED[name], f"{name} changed in this Python: review SimEventLoop"


def test_the_private_names_exist() -> None:
    loop = SimEventLoop()
    try:
        assert isinstance(loop._ready, type(base_events.collections.deque()))  # type: ignore[attr-defined]
        assert loop._stopping is False
        for name in ("_run_once", "_call_soon", "_timer_handle_cancelled", "_write_to_self"):
            assert getattr(SimEventLoop, name) is not getattr(base_events.BaseEventLoop, name)
        assert "_context" in events.Handle.__slots__
        assert {"_scheduled", "_when"} <= set(events.TimerHandle.__slots__)
        # run_forever drives through self._run_once and stops on self._stopping.
        src = inspect.getsource(base_events.BaseEventLoop.run_forever)
        assert "self._run_once()" in src and "self._stopping" in src
        # call_soon and call_soon_threadsafe funnel through self._call_soon.
        assert "self._call_soon(" in inspect.getsource(base_events.BaseEventLoop.call_soon)
        threadsafe = inspect.getsource(base_events.BaseEventLoop.call_soon_threadsafe)
        assert "self._call_soon(" in threadsafe and "self._write_to_self()" in threadsafe
        # TimerHandle.cancel tells the loop.
        cancel = inspect.getsource(events.TimerHandle.cancel)
        assert "_timer_handle_cancelled" in cancel
    finally:
        loop.close()


def test_the_c_task_and_future_schedule_through_the_loop() -> None:
    """The C accelerated Task and Future call ``loop.call_soon`` with the context."""
    loop = SimEventLoop()
    seen: list[tuple[str, object]] = []
    orig = loop.call_soon

    def spy(callback: Any, *args: Any, context: Any = None) -> asyncio.Handle:
        seen.append(
            (type(callback).__name__, None if context is None else context.get(current_actor))
        )
        return orig(callback, *args, context=context)

    loop.call_soon = spy  # type: ignore[method-assign, assignment]
    try:
        actor = ActorContext("a")

        async def body() -> None:
            fut = loop.create_future()
            fut.add_done_callback(lambda _: None)
            fut.set_result(None)
            await fut

        loop.run_until_complete(loop.spawn_in(actor, body()))
        kinds = [k for k, owner in seen if owner is actor]
        assert "TaskStepMethWrapper" in kinds  # task steps
        assert "function" in kinds  # the future's done callback
        assert type(loop.create_future()).__module__ == "_asyncio"
    finally:
        loop.close()
