"""Root-cause diagnosis by a model, for the failures the rules leave untyped (policy ``diagnosis:``).

    settings.py   the policy block (strict pydantic)
    verdict.py    the answer's JSON Schema (a subset of the observation schema) and its validation
    prompt.py     what the model is shown: tool, schema, redacted arguments, untrusted error text, recent calls
    providers.py  sampling (the host's own model, through MCP) and any OpenAI-compatible endpoint
    engine.py     when to ask, cache by error signature, per-minute budget, timeout, and the clamps

Kept light: importing the package does not import the proxy's stages (``policy.py`` imports ``settings``).
"""
