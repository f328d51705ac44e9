"""Where a verdict comes from: the host's own model (MCP sampling) or an OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import httpx2

from .verdict import KINDS, UNCLEAR

MAX_TOKENS = 300
MAX_RESPONSE_BYTES = 1 << 20
"""The most an OpenAI-compatible endpoint's answer may hold (a verdict is ~1 KB); the rest is not read."""


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    tokens_in: int | None = None
    tokens_out: int | None = None


class ProviderUnavailable(Exception):
    """This call cannot be diagnosed by this provider (e.g. the host did not declare sampling)."""


@runtime_checkable
class SamplingHost(Protocol):
    """A host link that can ask the host's model (``server._Host``)."""

    @property
    def supports_sampling(self) -> bool: ...

    async def create_message(self, system: str, user: str, *, max_tokens: int, model: str | None) -> Answer: ...


class Provider(Protocol):
    name: str

    async def ask(self, system: str, user: str, host: object | None) -> Answer: ...


class Sampling:
    """MCP ``sampling/createMessage`` to the host whose call failed (only if that host declared sampling)."""

    name = "sampling"

    def __init__(self, model: str | None) -> None:
        self.model = model

    async def ask(self, system: str, user: str, host: object | None) -> Answer:
        if not isinstance(host, SamplingHost) or not host.supports_sampling:
            raise ProviderUnavailable("the host did not declare sampling")
        return await host.create_message(system, user, max_tokens=MAX_TOKENS, model=self.model)


RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "diagnosis",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": [*KINDS, UNCLEAR]},
                "argument": {"type": ["string", "null"]},
                "sure": {"type": "boolean"},
            },
            "required": ["kind", "argument", "sure"],
            "additionalProperties": False,
        },
    },
}
"""The closed answer (``verdict.ANSWER_SCHEMA`` in the strict subset endpoints take): an endpoint that constrains its
output to a schema (llama.cpp, vLLM, OpenAI) can answer nothing else."""
JSON_OBJECT: dict[str, Any] = {"type": "json_object"}


class OpenAICompatible:
    """``POST {url}/chat/completions`` of any OpenAI-compatible server (llama.cpp, vLLM, Ollama, OpenAI, ...). The
    answer is asked in the closed schema (``RESPONSE_FORMAT``); an endpoint that refuses a schema (HTTP 400) is asked
    again for a plain JSON object, and from then on only so."""

    name = "openai"

    def __init__(
        self, url: str, model: str, api_key_env: str | None, *, timeout_s: float = 10.0, transport: Any = None
    ) -> None:
        self.url = url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        """The HTTP client's own limits: ``diagnosis.timeout_s`` (the diagnoser's deadline is the same), not httpx's
        5 s default, which cut a slower model short whatever ``timeout_s`` said."""
        self._transport = transport
        self.response_format = RESPONSE_FORMAT

    async def ask(self, system: str, user: str, host: object | None) -> Answer:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ProviderUnavailable(f"environment variable {self.api_key_env} (diagnosis.api_key_env) is unset")
            headers["Authorization"] = f"Bearer {key}"
        body = {
            "model": self.model,
            "temperature": 0,
            "max_tokens": MAX_TOKENS,
            "response_format": self.response_format,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        async with httpx2.AsyncClient(transport=self._transport, timeout=self.timeout_s) as client:
            data = await self._post(client, body, headers)
            if data is None:  # the endpoint takes no schema: a plain JSON object, now and from now on
                self.response_format = JSON_OBJECT
                data = await self._post(client, body | {"response_format": JSON_OBJECT}, headers)
        usage = data.get("usage") or {}
        return Answer(
            str(data["choices"][0]["message"]["content"]), usage.get("prompt_tokens"), usage.get("completion_tokens")
        )

    async def _post(self, client: Any, body: dict[str, Any], headers: dict[str, str]) -> Any:
        """The endpoint's JSON answer, or None when it refused a schema response format (HTTP 400)."""
        async with client.stream("POST", self.url, json=body, headers=headers) as response:
            if response.status_code == 400 and body["response_format"] is not JSON_OBJECT:
                return None
            response.raise_for_status()
            raw = bytearray()
            async for chunk in response.aiter_bytes():
                raw += chunk
                if len(raw) > MAX_RESPONSE_BYTES:
                    raise ProviderUnavailable(f"the endpoint's answer is over {MAX_RESPONSE_BYTES} bytes")
            return json.loads(raw)
