"""Operations: the log pipeline (``logs``), OpenTelemetry traces, Prometheus metrics and the live status page.

Observability is a side channel of the chain, never a stage: the observe stage, the terminal (one upstream attempt)
and the retry stage's waits report into one narrow interface (``call.events.CallEvents``), and upstream supervision
reports state changes. The default is ``call.events.NULL``, whose methods do nothing, so a proxy with operations off
pays one no-op call per event. ``runtime.Ops`` builds the recorders the configuration asks for and the HTTP routes
(``/metrics``, ``/status``) that read them.
"""
