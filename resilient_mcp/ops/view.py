"""What the ops side channel reads of a running proxy: its upstreams and the pipeline's shared services."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..stages.breaker import BreakerBoard
    from ..state.redis import RedisStateStore
    from ..state.sqlite import StateStore
    from ..tasks.manager import TaskManager
    from ..upstream import Upstream


@dataclass(frozen=True, slots=True)
class ProxyView:
    """What the ops side channel reads of a running proxy at scrape or page time: its upstreams and the pipeline's
    shared services (breakers, state store). Read only; built with the pipeline, so nothing here holds the whole
    proxy or the pipeline."""

    upstreams: Mapping[str, Upstream]
    services: SharedServices


class SharedServices(Protocol):
    """The part of the pipeline's ``Services`` the ops side reads (the store is set when the pipeline opens)."""

    @property
    def board(self) -> BreakerBoard: ...

    @property
    def store(self) -> StateStore | RedisStateStore | None: ...

    @property
    def treatment(self) -> list[dict[str, str]]: ...

    @property
    def public_names(self) -> dict[tuple[str, str], str]: ...

    @property
    def tasks(self) -> TaskManager: ...
