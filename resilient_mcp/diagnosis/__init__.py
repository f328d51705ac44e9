"""Root-cause diagnosis by a model, for the failures the rules leave untyped (policy ``diagnosis:``).

    verdict.py    the closed answer (a kind of cause, the argument, sure) and the full verdict; their validation
    prompt.py     what the model is shown: tool, its arguments, shapes sent, effect, how it failed, untrusted text
    providers.py  sampling (the host's own model, through MCP) and any OpenAI-compatible endpoint
    engine.py     when to ask, cache by error signature, per-minute budget, timeout, and the clamps

Kept light: importing the package does not import the proxy's stages (its policy block is
``policy.diagnosis_settings``).
"""
