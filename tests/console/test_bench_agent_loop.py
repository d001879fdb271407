"""The plumbing of ``make bench-model ARGS=--agent-loop`` (bench/model_agent.py), with the loopback upstream in
place of the model: the conversation goes through the live console's proxy, is compressed, and both sides
are probed."""

from __future__ import annotations

from typing import Any

from bench.model_agent import PROBES, agent_loop, save
from console.apikeys import create_api_key
from console.models import CompressionRun
from console.proxy.auth import forget_all
from tests.fakes.chat_upstream import MODEL, ChatUpstream


def test_the_agent_loop_runs_through_the_proxy_and_probes_both_sides(live_server: Any, settings: Any, tmp_path):
    with ChatUpstream() as upstream:
        settings.PROXY_UPSTREAM_BASE_URL = upstream.url
        settings.PROXY_COMPRESS_BUDGET_MS = 20_000
        forget_all()
        key = create_api_key("agent-loop", "operator")[1]
        result = agent_loop(live_server.url, key, upstream.url, MODEL)

    assert "compressed" in result["handled"] and "bypass" not in result["handled"]
    assert [p["probe"] for p in result["compressed"]["probes"]] == [name for name, _, _ in PROBES]
    assert len(result["full"]["probes"]) == len(PROBES)
    assert CompressionRun.objects.filter(trigger="proxy", applied=True).exists()
    # the compressed side's last call sent fewer messages than the full side holds
    sent = upstream.chat_requests()
    proxied = [r for r in sent if len(r.messages) and r.messages[-1]["content"] == PROBES[-1][1]]
    assert len(proxied) == 2 and len(proxied[0].messages) != len(proxied[1].messages)
    assert save(result, tmp_path).exists()
