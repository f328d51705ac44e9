"""Root-cause diagnosis by a model, for the failures the rules leave untyped (policy ``diagnosis:``).

    verdict.py    the answer's JSON Schema (a subset of the observation schema) and its validation
    prompt.py     what the model is shown: tool, schema, redacted arguments, untrusted error text, recent calls
    providers.py  sampling (the host's own model, through MCP) and any OpenAI-compatible endpoint
    engine.py     when to ask, cache by error signature, per-minute budget, timeout, and the clamps

Kept light: importing the package does not import the proxy's stages (its policy block is
``policy.diagnosis_settings``).
"""
