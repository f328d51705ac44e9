"""examples/replicas/: the compose file, the HAProxy config, the Kubernetes manifest and the image, checked without a
Docker daemon or a cluster: they parse, name what they must, agree on ports and environment, and the proxy config
they ship is one the proxy accepts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from resilient_mcp.policy.config import load_config
from tests.helpers import REPO

EXAMPLES = REPO / "examples" / "replicas"
ENV = {"REDIS_URL": "redis://redis:6379/0", "MCP_TOKEN": "0123456789abcdef"}


def _listen_port(config_text: str, tmp: Path, more_env: dict[str, str] | None = None) -> tuple[int, Any]:
    path = tmp / "proxy.yaml"
    path.write_text(config_text, encoding="utf-8")
    cfg = load_config(path, environ={**ENV, **(more_env or {})})
    assert cfg.state.backend == "redis" and cfg.state.url == ENV["REDIS_URL"]
    assert cfg.listen.auth_tokens == [ENV["MCP_TOKEN"]], "a replica on 0.0.0.0 needs a token"
    assert cfg.listen.http is not None
    return int(cfg.listen.http.rpartition(":")[2]), cfg


def _host_allowed(cfg: Any, host_header: str) -> bool:
    """What the listener's DNS-rebinding protection says of a request with this Host header."""
    from mcp.server.transport_security import TransportSecurityMiddleware

    from resilient_mcp.host.http import security_settings

    settings = security_settings(cfg.listen.http.rpartition(":")[0], cfg.listen)
    return TransportSecurityMiddleware(settings)._validate_host(host_header)


def test_the_compose_file_runs_two_replicas_on_one_redis_behind_a_sticky_balancer(tmp_path: Path) -> None:
    compose = yaml.safe_load((EXAMPLES / "compose.yaml").read_text())
    services = compose["services"]
    assert {"redis", "replica1", "replica2", "balancer"} <= set(services)
    port, cfg = _listen_port((EXAMPLES / "proxy.yaml").read_text(), tmp_path)
    for host in ("replica1", "replica2", "balancer", "localhost"):  # a scraper per replica, clients via the balancer
        assert _host_allowed(cfg, f"{host}:{port}"), host
    assert not _host_allowed(cfg, f"evil.example:{port}")
    haproxy = (EXAMPLES / "haproxy.cfg").read_text()
    for name in ("replica1", "replica2"):
        replica = services[name]
        assert replica["build"] == "../..", "built from the repository's Dockerfile"
        assert (EXAMPLES / replica["build"] / "Dockerfile").exists()
        assert replica["command"][:3] == ["serve", "--config", "/cfg/proxy.yaml"]
        mount = next(v for v in replica["volumes"] if v.endswith(":/cfg/proxy.yaml:ro"))
        assert (EXAMPLES / mount.split(":")[0]).exists()
        env = replica["environment"]
        assert set(env) == set(ENV)
        assert re.fullmatch(r"redis://redis:6379/\d+", env["REDIS_URL"]), "the url names the redis service"
        assert str(port) in replica["expose"]
        assert re.search(rf"server {name} {name}:{port} check", haproxy)
        assert "redis" in replica["depends_on"]
    assert "stick on req.hdr(mcp-session-id)" in haproxy and "stick store-response res.hdr(mcp-session-id)" in haproxy
    assert "httpchk GET /healthz" in haproxy
    balancer = services["balancer"]
    bind = re.search(r"bind :(\d+)", haproxy)
    assert bind and balancer["ports"] == [f"{bind.group(1)}:{bind.group(1)}"]
    assert any(v.endswith("/usr/local/etc/haproxy/haproxy.cfg:ro") for v in balancer["volumes"])


def test_the_kubernetes_manifest_has_a_deployment_a_service_and_a_config_that_agree(tmp_path: Path) -> None:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "kubernetes.yaml").read_text()) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert set(by_kind) == {"ConfigMap", "Deployment", "Service"}
    config = by_kind["ConfigMap"]["data"]["proxy.yaml"]
    port, cfg = _listen_port(config, tmp_path, {"POD_IP": "10.1.2.3"})
    for host in ("resilient-mcp", "resilient-mcp.default.svc", "resilient-mcp.default.svc.cluster.local", "10.1.2.3"):
        assert _host_allowed(cfg, f"{host}:{port}"), host  # the Service's cluster names, and the pod's own address
    assert not _host_allowed(cfg, f"evil.example:{port}")
    assert cfg.listen.stateless, "a plain Service is not sticky by mcp-session-id: stateless HTTP"
    deployment = by_kind["Deployment"]
    assert deployment["spec"]["replicas"] >= 2
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels == by_kind["Service"]["spec"]["selector"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["serve", "--config", "/cfg/proxy.yaml"]
    assert [p["containerPort"] for p in container["ports"]] == [port]
    assert {e["name"] for e in container["env"]} == {*ENV, "POD_IP"}
    secrets = [e for e in container["env"] if e["name"] in ENV]
    assert all("secretKeyRef" in e["valueFrom"] for e in secrets), "secrets stay out of the manifest"
    pod_ip = next(e for e in container["env"] if e["name"] == "POD_IP")
    assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": port}
    (volume,) = deployment["spec"]["template"]["spec"]["volumes"]
    assert volume["configMap"]["name"] == by_kind["ConfigMap"]["metadata"]["name"]
    assert container["volumeMounts"][0]["mountPath"] == "/cfg"
    (svc_port,) = by_kind["Service"]["spec"]["ports"]
    assert svc_port["targetPort"] == port


def test_the_image_installs_the_redis_client() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r'pip install .*"\.\[redis\]"', dockerfile)
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^redis = \["redis==[\d.]+"\]', pyproject, re.M)
