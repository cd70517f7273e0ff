"""The sidecar examples (docs/examples/, README "Sidecar in front of a remote agent") parse and
hold together: validated here, not run (no cluster, no docker compose in the tests)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from acp_proxy.cli import _mode, _parser

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"


def _documents(name: str) -> list[Any]:
    return list(yaml.safe_load_all((EXAMPLES / name).read_text()))


def _proxy_args_are_valid(args: list[str]) -> None:
    """The command line parses, and is the sidecar mode (no agent command)."""
    parsed, extra = _parser().parse_known_args(args)
    assert extra == []
    assert _mode(parsed, []) == "listen"
    assert parsed.upstream.startswith("ws://")
    assert parsed.watch_config


def test_the_pod_spec_runs_the_agent_and_the_proxy_with_probes_on_the_listen_port() -> None:
    docs = {doc["kind"]: doc for doc in _documents("k8s-sidecar.yaml")}
    assert set(docs) == {"ConfigMap", "Pod", "Service", "Ingress"}
    agent, proxy = docs["Pod"]["spec"]["containers"]
    assert agent["name"] == "agent"
    _proxy_args_are_valid(proxy["args"])
    assert "--upstream=ws://127.0.0.1:9000/acp" in proxy["args"]
    assert proxy["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "acp"}
    assert proxy["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "acp"}
    assert proxy["ports"] == [{"name": "acp", "containerPort": 8765}]
    assert "ws://0.0.0.0:8765/acp" in " ".join(proxy["args"])
    # the mounted ConfigMap file is a valid config
    import tomllib

    from acp_proxy.config.io import config_from_dict

    config_from_dict(tomllib.loads(docs["ConfigMap"]["data"]["acp.toml"]))
    annotations = docs["Ingress"]["metadata"]["annotations"]
    assert "acp_connection_id" in annotations["nginx.ingress.kubernetes.io/upstream-hash-by"]


def test_the_compose_file_has_the_agent_the_proxy_and_a_collector_reading_the_audit_log() -> None:
    [compose] = _documents("compose.yaml")
    services = compose["services"]
    assert set(services) == {"agent", "acp-proxy", "otel-collector"}
    _proxy_args_are_valid(services["acp-proxy"]["command"])
    assert "--upstream=ws://agent:9000/acp" in services["acp-proxy"]["command"]
    assert "audit:/audit:ro" in services["otel-collector"]["volumes"]
    [collector] = _documents("otel-collector.yaml")
    audit_receiver = collector["receivers"]["filelog/acp-audit"]
    assert audit_receiver["include"] == ["/audit/audit.jsonl"]
    assert "filelog/acp-audit" in collector["service"]["pipelines"]["logs"]["receivers"]


def test_the_readme_shows_the_example_files_it_names() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in re.findall(r"docs/examples/([\w.-]+\.yaml)", readme):
        assert (EXAMPLES / name).exists(), name
    assert "docs/examples/compose.yaml" in readme
    assert "docs/examples/k8s-sidecar.yaml" in readme
